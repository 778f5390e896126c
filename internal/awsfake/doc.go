// Package awsfake holds in-memory fakes of the DynamoDB, SQS and EC2 calls
// the pool logic makes. They are small but real: the table evaluates the
// exact condition and update expressions internal/claim sends (and rejects
// any other), the queue honours visibility, MaxNumberOfMessages and
// DelaySeconds against its own clock, and EC2 launches instant fleets and
// filters instance types. Each can be told to fail a given call. The claim
// tests drive them, and so does internal/simulate, on a virtual clock.
package awsfake
