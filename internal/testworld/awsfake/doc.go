// Package awsfake holds in-memory fakes of the DynamoDB, SQS, EC2 and
// CloudWatch Logs calls the pool logic makes. They are small but real: the
// table evaluates the exact condition and update expressions internal/claim
// sends (and rejects any other), the queue honours visibility,
// MaxNumberOfMessages and DelaySeconds against its own clock, EC2 launches
// instant fleets and filters instance types, and the log groups keep the
// metrics' events. Each can be told to fail a given call. The claim tests
// drive them, and so does internal/testworld/simulate, on a virtual clock.
package awsfake
