// Package awslimits holds the limits and validations AWS applies to the
// requests this project makes and emulators do not (moto takes user data of
// any size, 26 writes in a BatchWriteItem, a table named "a"), as data: the
// service and actions each rule applies to, its check, AWS's own answer to a
// request that breaks it, and where the limit and the answer are documented
// or reported.
//
// Two places apply the rules, on the same wire form: the emulator's front
// (internal/testworld/emulator), which every test, the demo and the Terraform runs
// they start talk to, and the in-memory fakes (internal/testworld/awsfake), which
// serialize their typed inputs with the SDK first (CheckHTTP). So a
// fixture, an example, a batch or a rendered user data that grows past a
// limit fails the tests as it would fail a user's apply.
//
// Adding a rule: one more Rule in the service's file (ec2.go, sqs.go,
// dynamodb.go, logs.go, ssm.go,
// secretsmanager.go), with its Source, a case for it in the front's test
// (internal/testworld/emulator's front_rules_test.go, which fails without one), one in
// awsfake's when it implements the action, a row for it in the users'
// Service limits guide (templates/guides/service-limits.md.tmpl), whose
// answer cell gives AWS's answers as the rule gives them, and one in this
// package's README.md, the developer catalogue, naming the guide's row,
// the rule, where the tests enforce it and which tests. Examples of
// requests that break it go in catalogue_test.go
// (TestCatalogue_answersAreTheCodes compares the guide's answers with the
// code's).
package awslimits

import (
	"net/http"
	"slices"
)

// Refusal is AWS's answer to a request that breaks a rule: the HTTP status,
// the error code an SDK reports (for SQS, the query-compatible code of
// x-amzn-query-error), the JSON protocols' __type, and the message.
type Refusal struct {
	Status  int
	Code    string
	Type    string // the JSON error's __type (SQS, DynamoDB); "" for EC2
	Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// EntryFailure is AWS's answer to one entry of a batch call that it fails
// alone: the call succeeds (HTTP 200), the other entries are carried out,
// and the answer lists this one among its Failed entries, with its id, the
// error code and message, and whether the sender is at fault.
type EntryFailure struct {
	ID          string
	Code        string
	Message     string
	SenderFault bool
}

// Wording says where a rule's answer comes from.
type Wording int

const (
	// Documented: AWS's documentation gives the code and the message.
	Documented Wording = iota
	// Reported: the code and message as published reports of AWS's answers
	// quote them (issues, or conformance suites run against AWS).
	Reported
	// Ours: AWS documents the limit and the error code, but neither its
	// documentation nor a report gives the message; the message is ours,
	// saying so, and the test suite only needs the refusal.
	Ours
)

// Rule is one limit or validation AWS applies to some actions' requests.
type Rule struct {
	// ID names the rule in the catalogue and in the tests.
	ID string
	// Service is the SigV4 signing name of the service ("ec2", "sqs",
	// "dynamodb", "logs", "ssm", "secretsmanager").
	Service string
	// Actions are the API actions whose requests the rule reads.
	Actions []string
	// Limit is the rule in one sentence.
	Limit string
	// Check returns AWS's answer to a request (its action and its
	// parameters as a document, see wire.go) that breaks the rule, or nil.
	Check func(action string, req map[string]any) *Refusal
	// Entries, for a rule AWS applies to each entry of a batch call
	// rather than to the call, returns the entries of a request that
	// break it (CheckEntries); nil for the others.
	Entries func(action string, req map[string]any) []EntryFailure
	// Stateful are the rule's answers that depend on what AWS stores (an
	// item's size after an update): the front, which keeps no state,
	// cannot give them; the fakes do.
	Stateful []*Refusal
	// Wording says whether the answer's message is AWS's, documented or
	// reported, or ours.
	Wording Wording
	// Source is where the limit and the answer are documented or reported.
	Source string
}

// Rules are the rules the front and the fakes enforce, in the catalogue's
// order.
var Rules = slices.Concat(ec2Rules, sqsRules, dynamodbRules, logsRules, ssmRules, secretsManagerRules)

// watched are the actions some rule reads, by service.
var watched = func() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, r := range Rules {
		if out[r.Service] == nil {
			out[r.Service] = map[string]bool{}
		}
		for _, a := range r.Actions {
			out[r.Service][a] = true
		}
	}
	return out
}()

// Watches reports whether a rule reads requests of service's action (with
// action "", whether one reads any of service's).
func Watches(service, action string) bool {
	if action == "" {
		return len(watched[service]) > 0
	}
	return watched[service][action]
}

// Check applies the rules of service's action to a request (its parameters
// as a document) and returns AWS's answer to the first it breaks, or nil.
func Check(service, action string, req map[string]any) *Refusal {
	for i := range Rules {
		r := &Rules[i]
		if r.Service != service || !slices.Contains(r.Actions, action) {
			continue
		}
		if refusal := r.Check(action, req); refusal != nil {
			return refusal
		}
	}
	return nil
}

// CheckEntries applies the per-entry rules of service's action to a batch
// request that Check takes, and returns the entries AWS fails alone, each
// once (by the first rule it breaks).
func CheckEntries(service, action string, req map[string]any) []EntryFailure {
	var out []EntryFailure
	failed := map[string]bool{}
	for i := range Rules {
		r := &Rules[i]
		if r.Entries == nil || r.Service != service || !slices.Contains(r.Actions, action) {
			continue
		}
		for _, f := range r.Entries(action, req) {
			if !failed[f.ID] {
				failed[f.ID] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// The answers' shapes, by protocol.

// ec2Error is an EC2 error (HTTP 400 unless said otherwise).
func ec2Error(code, message string) *Refusal {
	return &Refusal{Status: http.StatusBadRequest, Code: code, Message: message}
}

// sqsError is an SQS error: queryCode is what x-amzn-query-error carries and
// SDKs report, shape the error's name in SQS's JSON protocol (__type
// com.amazonaws.sqs#<shape>).
func sqsError(queryCode, shape, message string) *Refusal {
	return &Refusal{Status: http.StatusBadRequest, Code: queryCode, Type: "com.amazonaws.sqs#" + shape, Message: message}
}

// dynamodbValidation is DynamoDB's ValidationException.
func dynamodbValidation(message string) *Refusal {
	return &Refusal{Status: http.StatusBadRequest, Code: "ValidationException", Type: "com.amazon.coral.validate#ValidationException", Message: message}
}
