// Package table owns the pool's DynamoDB table for the provider: it alone
// writes the table's expressions (key conditions, conditions and updates),
// names the attributes only the provider writes, and reads a partition.
//
// Its writes are values (a *types.Update, a *dynamodb.PutItemInput, ...),
// not calls: a claim sends the same transition alone or in a transaction,
// and each caller keeps its client, its fault handling and its answer to a
// failed condition. The items' codecs shared with the agent stay in
// internal/protocol, which the agent imports; this package is the
// provider's side of the table and no agent code needs it.
//
// Placeholders are named after what they hold (#state, :toState), not
// numbered as the SDK's expression builder numbers them: tests and fault
// injection tell one transition from another by its :toState.
package table
