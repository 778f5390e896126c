// Package awsfake holds in-memory fakes of the DynamoDB, SQS, EC2, STS and
// CloudWatch Logs calls the product makes. They are small but real: the
// table evaluates whatever condition, update, key condition, filter and
// projection expressions it is sent (expression.go), and is created,
// tagged, given a TTL and deleted as DynamoDB's are; the queues are
// created, tagged and deleted as SQS's, and honour visibility,
// MaxNumberOfMessages and DelaySeconds against their own clock; EC2
// launches instant fleets, filters instance types and terminates as EC2
// does. They refuse what AWS refuses (internal/awslimits). Each can be told
// to fail a given call, and all can record their calls in one Log. The
// claim and pool tests drive them, and so does internal/testworld/simulate,
// on a virtual clock.
package awsfake
