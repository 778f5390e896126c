package iamcheck

import (
	"fmt"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
)

// needsNoPermission are actions AWS allows every caller.
var needsNoPermission = map[string]bool{
	"sts:GetCallerIdentity": true, // "No permissions are required to perform this operation."
}

// unusedExpected are grants the tests cannot exercise on the emulator, each
// with the reason.
//
// A grant no call used is named in the report but does not fail the check:
// some calls the code needs happen only in some runs (a crashed attempt's
// cleanup, a lost CreateFleet answer, the chaos suite's random faults), and
// failing on them would make the suite flaky, or push the removal of a
// permission the code needs in production (which is how the documents came
// to lack sqs:ChangeMessageVisibility). The report tells which of them are
// expected, and why.
var unusedExpected = map[string]string{
	"iam:PassRole": "authorized when CreateFleet launches a template with an instance profile; the tests' templates have none, and no request names the role",
	"s3:*":         "Terraform's state backend, not the provider",
	"kms:Decrypt":  "authorized when SSM or Secrets Manager decrypts the credential under a customer managed key for the caller; the emulator's SSM and Secrets Manager call no KMS",
}

// unusedExpectedStatements are statements no test can exercise, by Sid,
// each with the reason.
var unusedExpectedStatements = map[string]string{
	"FunctionLogs": "Lambda writes the broker function's own logs with its role; the tests run the function outside Lambda",
}

// Report is the outcome of checking the documented policies against the
// recorded calls.
type Report struct {
	Calls   map[string]int // recorded distinct calls by role
	Missing []Finding      // calls a policy of their role does not grant: the check fails
	Unused  []Finding      // grants no call of the role used: reported
	// Unverified are granted calls with a condition key the recorder could
	// not learn (awsrecord.Call.Unknown): granted under some value of it.
	Unverified []awsrecord.Call
}

// Finding is a call a policy misses, or a grant no call used.
type Finding struct {
	Policy   string
	Sid      string
	Action   string
	Call     *awsrecord.Call
	Expected string // why an unused grant is expected
}

func (f Finding) String() string {
	if f.Call != nil {
		return fmt.Sprintf("%s does not grant %s", f.Policy, f.Call)
	}
	s := fmt.Sprintf("%s, statement %q: %s granted, no test used it", f.Policy, f.Sid, f.Action)
	if f.Expected != "" {
		s += " (expected: " + f.Expected + ")"
	}
	return s
}

// OK tells whether the check passes.
func (r Report) OK() bool {
	return len(r.Missing) == 0
}

// String is the report for people: missing grants first.
func (r Report) String() string {
	var b strings.Builder
	for _, role := range awsrecord.Roles {
		fmt.Fprintf(&b, "%s: %d distinct calls recorded\n", role, r.Calls[role])
	}
	for _, f := range r.Missing {
		fmt.Fprintf(&b, "MISSING %s\n", f)
	}
	for _, f := range r.Unused {
		fmt.Fprintf(&b, "unused %s\n", f)
	}
	for _, c := range r.Unverified {
		fmt.Fprintf(&b, "unverified (a condition key the recorder could not learn) %s: %s\n", c.Role, c)
	}
	if r.OK() {
		b.WriteString("every recorded call is granted to its role by every documented policy of the role\n")
	}
	return b.String()
}

// Check checks every policy against the recorded calls of its role. A role
// without any recorded call is an error: the suites did not record.
func Check(policies []Policy, calls []awsrecord.Call) (Report, error) {
	r := Report{Calls: map[string]int{}}
	for _, c := range calls {
		r.Calls[c.Role]++
		if len(c.Unknown) > 0 {
			r.Unverified = append(r.Unverified, c)
		}
	}
	for _, role := range awsrecord.Roles {
		if r.Calls[role] == 0 {
			return r, fmt.Errorf("no calls recorded for the role %s: run the acceptance suites with %s set (make test)", role, awsrecord.EnvDir)
		}
	}
	for _, p := range policies {
		used := map[*Statement]map[string]bool{} // statement -> its action patterns some call used
		for i := range calls {
			c := &calls[i]
			if c.Role != p.Role || needsNoPermission[c.Action] {
				continue
			}
			ok, by, err := p.Evaluate(*c)
			if err != nil {
				return r, err
			}
			if !ok {
				r.Missing = append(r.Missing, Finding{Policy: p.Source, Call: c})
			}
			for _, s := range by {
				if used[s] == nil {
					used[s] = map[string]bool{}
				}
				for _, a := range s.Actions {
					if wildcard(strings.ToLower(a), strings.ToLower(c.Action)) {
						used[s][a] = true
					}
				}
			}
		}
		for i := range p.Statements {
			s := &p.Statements[i]
			if s.Effect != "Allow" {
				continue
			}
			for _, a := range s.Actions {
				if !used[s][a] {
					r.Unused = append(r.Unused, Finding{Policy: p.Source, Sid: s.Sid, Action: a, Expected: expectedUnused(s.Sid, a)})
				}
			}
		}
	}
	return r, nil
}

func expectedUnused(sid, action string) string {
	if reason, ok := unusedExpectedStatements[sid]; ok {
		return reason
	}
	for pattern, reason := range unusedExpected {
		if wildcard(strings.ToLower(pattern), strings.ToLower(action)) {
			return reason
		}
	}
	return ""
}
