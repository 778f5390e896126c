// Package iamcheck checks the documented IAM policies (the JSON policies
// of the IAM guide, templates/guides/iam.md.tmpl, and
// examples/complete/iam.tf) against the AWS calls the tests
// recorded (internal/testworld/awsrecord): every call must be granted to its role by
// an Allow statement, with the statement's conditions holding in the call's
// context; grants no call used are reported. The package's test cases pin
// each policy's boundaries besides.
//
// Policies are evaluated as IAM does for what they use: Action and Resource
// with * and ? wildcards (actions case-insensitively), policy variables
// (${ec2:SourceInstanceARN}) from the call's context, and the condition
// operators StringEquals, StringLike, ArnEquals and ArnLike with the
// ForAllValues: and ForAnyValue: set qualifiers. An explicit Deny wins.
// Anything else makes the check fail rather than guess.
//
// The documents name one pool; the recorded calls come from many test
// pools. A call is checked with the document's pool bound to each pool the
// call itself names (its table, its queue's prefix, its resource's
// ec2runners:pool tag): the check is about which actions and conditions a
// role needs, each test's pool standing for the document's.
package iamcheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
)

// Policy is one documented policy: a role's statements.
type Policy struct {
	Source     string // where it is documented, for reports
	Role       string // awsrecord.Role*
	Statements []Statement
	// JSON is the policy document as the guide writes it, with its
	// placeholders; empty for a Terraform policy document.
	JSON string
}

// Statement is one IAM policy statement.
type Statement struct {
	Sid        string
	Effect     string // "Allow" or "Deny"
	Actions    []string
	Resources  []string
	Conditions []Condition
}

// Condition is one operator on one key with its values.
type Condition struct {
	Operator string // "StringEquals", "ForAllValues:StringLike", ...
	Key      string
	Values   []string
}

// Document variables: the parts of a documented policy that name one
// deployment, bound per call ("${doc:pool}").
const (
	varPool      = "doc:pool"
	varRegion    = "doc:region"
	varAccount   = "doc:account"
	varPartition = "doc:partition"
	varClass     = "doc:class" // a resource class of the pool: the suffix of its queue names
	varRole      = "doc:runner-role"
	varLogGroup  = "doc:log-group" // the log group of the pool's metrics
	varFunction  = "doc:broker-function"
)

// Evaluate tells whether p grants c, and by which Allow statements (all of
// them, for the report of grants never used).
func (p Policy) Evaluate(c awsrecord.Call) (allowed bool, by []*Statement, err error) {
	return p.evaluate(c, bindings(c))
}

// evaluate is Evaluate with each of the bindings of the document variables.
func (p Policy) evaluate(c awsrecord.Call, bindings []map[string]string) (allowed bool, by []*Statement, err error) {
	for _, vars := range bindings {
		for i := range p.Statements {
			s := &p.Statements[i]
			ok, err := s.applies(c, vars)
			if err != nil {
				return false, nil, fmt.Errorf("%s, statement %q: %w", p.Source, s.Sid, err)
			}
			switch {
			case ok && s.Effect == "Deny":
				return false, nil, nil
			case ok && !slices.Contains(by, s):
				by = append(by, s)
			}
		}
	}
	return len(by) > 0, by, nil
}

// applies tells whether s matches c's action, resource and context.
func (s *Statement) applies(c awsrecord.Call, vars map[string]string) (bool, error) {
	if !slices.ContainsFunc(s.Actions, func(a string) bool { return wildcard(strings.ToLower(a), strings.ToLower(c.Action)) }) {
		return false, nil
	}
	resourceOK := false
	for _, r := range s.Resources {
		r, ok := substitute(r, vars, c.Context)
		if ok && wildcard(r, c.Resource) {
			resourceOK = true
			break
		}
	}
	if !resourceOK {
		return false, nil
	}
	for _, cond := range s.Conditions {
		ok, err := cond.holds(c, vars)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// holds evaluates the condition in c's context. A key the recorder could
// not learn (Call.Unknown) holds: an unanswered lookup is not a missing
// grant (Check reports such calls as unverified).
func (cond Condition) holds(c awsrecord.Call, vars map[string]string) (bool, error) {
	qualifier, op, found := strings.Cut(cond.Operator, ":")
	if !found {
		qualifier, op = "", cond.Operator
	}
	var match func(pattern, value string) bool
	switch op {
	case "StringEquals", "ArnEquals":
		match = func(p, v string) bool { return p == v }
	case "StringLike", "ArnLike":
		match = wildcard
	default:
		return false, fmt.Errorf("condition operator %q: the checker does not evaluate it", cond.Operator)
	}
	if slices.Contains(c.Unknown, cond.Key) {
		return true, nil
	}
	var patterns []string
	for _, v := range cond.Values {
		if v, ok := substitute(v, vars, c.Context); ok {
			patterns = append(patterns, v)
		}
	}
	matchesAny := func(value string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { return match(p, value) })
	}
	values, present := c.Context[cond.Key]
	switch qualifier {
	case "":
		// A single-valued key: absent, the condition does not hold.
		return present && len(values) > 0 && slices.ContainsFunc(values, matchesAny), nil
	case "ForAllValues":
		// Every value of the request's set matches; an empty set matches
		// (which is why documents use it only for keys every request has).
		for _, v := range values {
			if !matchesAny(v) {
				return false, nil
			}
		}
		return true, nil
	case "ForAnyValue":
		return slices.ContainsFunc(values, matchesAny), nil
	}
	return false, fmt.Errorf("condition operator %q: the checker does not evaluate it", cond.Operator)
}

var policyVariable = regexp.MustCompile(`\$\{([^}]*)\}`)

// substitute replaces the policy variables of s: document variables from
// vars, others (${ec2:SourceInstanceARN}) from the call's context. A
// variable with no value makes what uses it match nothing, as in IAM.
func substitute(s string, vars map[string]string, ctx map[string][]string) (string, bool) {
	ok := true
	out := policyVariable.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if v, found := vars[name]; found {
			return v
		}
		if v := ctx[name]; len(v) == 1 {
			return v[0]
		}
		ok = false
		return m
	})
	return out, ok
}

// wildcard matches value against an IAM pattern: * any run, ? one character.
func wildcard(pattern, value string) bool {
	if pattern == "" {
		return value == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(value); i++ {
			if wildcard(pattern[1:], value[i:]) {
				return true
			}
		}
		return false
	case '?':
		return value != "" && wildcard(pattern[1:], value[1:])
	}
	return value != "" && value[0] == pattern[0] && wildcard(pattern[1:], value[1:])
}

// bindings are the document variables to try for c: its deployment, with
// the pool bound to each pool c names (none: the pool stays unbound).
func bindings(c awsrecord.Call) []map[string]string {
	base := map[string]string{varRegion: c.Region, varAccount: c.Account, varPartition: c.Partition}
	var out []map[string]string
	add := func(pool, class string) {
		vars := map[string]string{varPool: pool}
		if class != "" {
			vars[varClass] = class
		}
		for k, v := range base {
			vars[k] = v
		}
		out = append(out, vars)
	}
	for _, v := range c.Context[awsrecord.KeyPoolTag] {
		add(v, "")
	}
	parts := strings.SplitN(c.Resource, ":", 6)
	if len(parts) == 6 && parts[2] == "logs" {
		// log-group:<group>[:log-stream:<pool>]: the stream is named after
		// the pool.
		group, stream, _ := strings.Cut(strings.TrimPrefix(parts[5], "log-group:"), ":log-stream:")
		base[varLogGroup] = group
		if stream != "" {
			add(stream, "")
		}
	}
	if len(parts) == 6 {
		switch parts[2] {
		case "dynamodb":
			if name, ok := strings.CutPrefix(parts[5], "table/"); ok {
				name, _, _ = strings.Cut(name, "/")
				add(name, "")
			}
		case "lambda":
			// function:<name>[:<qualifier>]: the broker function, whatever
			// the deployment names it.
			if rest, ok := strings.CutPrefix(parts[5], "function:"); ok {
				name, _, _ := strings.Cut(rest, ":")
				base[varFunction] = name
			}
		case "ssm", "secretsmanager":
			// The pool's GitHub credential, as the documents name it:
			// parameter/ec2runners/<pool>/github, secret:ec2runners/<pool>/github-??????.
			rest := strings.TrimPrefix(strings.TrimPrefix(parts[5], "parameter/"), "secret:")
			if rest, ok := strings.CutPrefix(rest, "ec2runners/"); ok {
				name, _, _ := strings.Cut(rest, "/")
				add(name, "")
			}
		case "sqs":
			// <pool>-<class>, class names without '-'.
			if i := strings.LastIndex(parts[5], "-"); i > 0 {
				add(parts[5][:i], parts[5][i+1:])
			}
		}
	}
	if len(out) == 0 {
		out = append(out, base)
	}
	return out
}
