package iamcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
)

// Guide is the IAM guide, relative to the repository's root: the template
// tfplugindocs renders as docs/guides/iam.md, the page users read on the
// Terraform Registry. Its JSON policies are the ones checked.
const Guide = "templates/guides/iam.md.tmpl"

// GeneratedGuide is the guide as make docs renders it into docs/.
const GeneratedGuide = "docs/guides/iam.md"

// Documents are the policies documented in the repository at root: the IAM
// guide's and examples/complete's.
func Documents(root string) ([]Policy, error) {
	guide, err := GuidePolicies(root, Guide)
	if err != nil {
		return nil, err
	}
	example, err := TerraformPolicies(filepath.Join(root, "examples", "complete"))
	if err != nil {
		return nil, err
	}
	return append(guide, example...), nil
}

// policyMarker precedes each policy of the guide: an HTML comment (not
// rendered) naming the role, then the ```json block of the policy.
var policyMarker = regexp.MustCompile("(?s)<!-- policy: ([a-z-]+) -->\\s*```json\\n(.*?)\\n```")

// guidePlaceholders are the guide's names for one deployment.
var guidePlaceholders = strings.NewReplacer(
	"<pool>", "${"+varPool+"}",
	"<class>", "${"+varClass+"}",
	"<region>", "${"+varRegion+"}",
	"<account>", "${"+varAccount+"}",
	"<runner-instance-role>", "${"+varRole+"}",
	"<log-group>", "${"+varLogGroup+"}",
	"<broker-function>", "${"+varFunction+"}",
)

// GuidePolicies reads the JSON policies, one per role, of the page at
// path under root (Guide, or GeneratedGuide).
func GuidePolicies(root, path string) ([]Policy, error) {
	text, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	var out []Policy
	for _, m := range policyMarker.FindAllStringSubmatch(string(text), -1) {
		role, body := m[1], guidePlaceholders.Replace(m[2])
		if !knownRole(role) {
			return nil, fmt.Errorf("%s: policy for unknown role %q", path, role)
		}
		if rest := regexp.MustCompile(`<[a-z-]+>`).FindString(body); rest != "" {
			return nil, fmt.Errorf("%s: the %s policy has a placeholder %s the checker does not know", path, role, rest)
		}
		statements, err := parseJSONPolicy(body)
		if err != nil {
			return nil, fmt.Errorf("%s: the %s policy: %w", path, role, err)
		}
		out = append(out, Policy{Source: path + " (" + role + ")", Role: role, Statements: statements, JSON: m[2]})
	}
	for _, role := range documentedRoles {
		if !hasRole(out, role) {
			return nil, fmt.Errorf("%s: no policy for the role %s (<!-- policy: %s --> before its ```json block)", path, role, role)
		}
	}
	return out, nil
}

// documentedRoles are the roles the documents must give a policy: those
// the tests record.
var documentedRoles = awsrecord.Roles

func knownRole(role string) bool {
	return slices.Contains(documentedRoles, role)
}

func hasRole(policies []Policy, role string) bool {
	for _, p := range policies {
		if p.Role == role {
			return true
		}
	}
	return false
}

// parseJSONPolicy reads an IAM policy document's statements.
func parseJSONPolicy(body string) ([]Statement, error) {
	var doc struct {
		Statement []struct {
			Sid                     string
			Effect                  string
			Action, Resource        stringOrList
			NotAction               any
			NotResource             any
			NotPrincipal, Principal any
			Condition               map[string]map[string]stringOrList
		}
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		return nil, err
	}
	var out []Statement
	for _, s := range doc.Statement {
		if s.NotAction != nil || s.NotResource != nil || s.Principal != nil || s.NotPrincipal != nil {
			return nil, fmt.Errorf("statement %q: NotAction, NotResource and principals are not evaluated by the checker", s.Sid)
		}
		st := Statement{Sid: s.Sid, Effect: s.Effect, Actions: s.Action, Resources: s.Resource}
		for op, keys := range s.Condition {
			for key, values := range keys {
				st.Conditions = append(st.Conditions, Condition{Operator: op, Key: key, Values: values})
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// stringOrList is a JSON policy value: a string or a list of strings.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}
