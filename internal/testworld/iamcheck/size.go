package iamcheck

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// IAM's limits on the size of a policy, in characters with the white space
// taken out (IAM and AWS STS quotas: IAM and STS character limits,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html#reference_iam-quotas-entity-length).
const (
	// MaxManagedPolicy is a managed policy's size; CreatePolicy past it
	// answers LimitExceeded "Cannot exceed quota for PolicySize: 6144".
	MaxManagedPolicy = 6144
	// MaxRolePolicies is the size of a role's inline policies together;
	// PutRolePolicy past it answers LimitExceeded "Maximum policy size of
	// 10240 bytes exceeded for role <name>".
	MaxRolePolicies = 10240
)

// longest are the longest values the documents' placeholders take: what a
// policy grows to in the largest deployment the provider allows (a pool
// name of 40 characters, a class name filling the queue name's 80, a role
// name of 64, a bucket name of 63, a log group name of 512, a function name
// of 64).
var longest = map[string]string{
	varPool:            strings.Repeat("p", 40),
	varRegion:          "ap-southeast-5",
	varAccount:         "123456789012",
	varPartition:       "aws-iso-b",
	varClass:           strings.Repeat("c", 80-40-1),
	varRole:            strings.Repeat("r", 64),
	"doc:state-bucket": strings.Repeat("b", 63),
	varLogGroup:        strings.Repeat("g", 512),
	varFunction:        strings.Repeat("f", 64),
}

// Size is a policy's size as IAM counts it, its placeholders at their
// longest: the guide's JSON as written, compacted; a Terraform policy
// document as aws_iam_policy_document renders it (a list of one value as
// that value).
func Size(p Policy) int {
	if p.JSON != "" {
		return compactLength(fillLongest(guidePlaceholders.Replace(p.JSON)))
	}
	type statement struct {
		Sid       string                    `json:"Sid,omitempty"`
		Effect    string                    `json:"Effect"`
		Action    any                       `json:"Action,omitempty"`
		Resource  any                       `json:"Resource,omitempty"`
		Condition map[string]map[string]any `json:"Condition,omitempty"`
	}
	one := func(l []string) any {
		if len(l) == 1 {
			return l[0]
		}
		return l
	}
	doc := struct {
		Version   string      `json:"Version"`
		Statement []statement `json:"Statement"`
	}{Version: "2012-10-17"}
	for _, s := range p.Statements {
		st := statement{Sid: s.Sid, Effect: s.Effect, Action: one(s.Actions), Resource: one(s.Resources)}
		for _, c := range s.Conditions {
			if st.Condition == nil {
				st.Condition = map[string]map[string]any{}
			}
			if st.Condition[c.Operator] == nil {
				st.Condition[c.Operator] = map[string]any{}
			}
			st.Condition[c.Operator][c.Key] = one(c.Values)
		}
		doc.Statement = append(doc.Statement, st)
	}
	b, _ := json.Marshal(doc)
	return compactLength(fillLongest(string(b)))
}

var docVariable = regexp.MustCompile(`\$\{(doc:[a-z-]+)\}`)

func fillLongest(s string) string {
	return docVariable.ReplaceAllStringFunc(s, func(v string) string {
		if l, ok := longest[docVariable.FindStringSubmatch(v)[1]]; ok {
			return l
		}
		return v
	})
}

// compactLength is a JSON document's length in characters without its
// white space (outside strings).
func compactLength(doc string) int {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(doc)); err != nil {
		return utf8.RuneCountInString(doc)
	}
	return utf8.RuneCount(b.Bytes())
}
