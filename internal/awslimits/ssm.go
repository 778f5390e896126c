package awslimits

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Systems Manager Parameter Store's limits (JSON 1.1 protocol: parameters as
// the JSON body names them). A pool's GitHub credential may live in a
// SecureString parameter, which claims read with GetParameter.
const (
	// MaxParameterNameLength bounds a parameter's fully qualified name.
	MaxParameterNameLength = 1011
	// MaxParameterReferenceLength bounds GetParameter's Name: a name or an
	// ARN, with a version or label selector.
	MaxParameterReferenceLength = 2048
	// MaxParameterDepth bounds a parameter hierarchy's levels.
	MaxParameterDepth = 15
)

var (
	// parameterNamePattern: letters, digits, '_', '.' and '-', with '/'
	// only between the parts of a path, which starts with '/'.
	parameterNamePattern = regexp.MustCompile(`^(/?[A-Za-z0-9_.-]+|(/[A-Za-z0-9_.-]+)+)$`)
	// parameterARNPattern is a parameter's ARN; its resource is the name
	// without a path's leading '/'.
	parameterARNPattern = regexp.MustCompile(`^arn:[a-z0-9-]+:ssm:[a-z0-9-]+:[0-9]{12}:parameter/(.+)$`)
)

const ssmAPI = "https://docs.aws.amazon.com/systems-manager/latest/APIReference/"

// ssmNameMessage is SSM's answer to a parameter name of other characters or
// a path without its leading '/', as reports quote it (the same words
// whatever the name's fault).
const ssmNameMessage = `Parameter name: can't be prefixed with "ssm" (case-insensitive). If formed as a path, it can consist of sub-paths divided by slash symbol; ` +
	`each sub-path can be formed as a mix of letters, numbers and the following 3 symbols .-_`

var ssmRules = []Rule{
	{
		ID: "ssm-parameter-name", Service: "ssm", Actions: []string{"GetParameter"},
		Limit: "A parameter name is letters, digits, '_', '.' and '-', with '/' only between the parts of a path, which starts with '/'; GetParameter's Name may end in a version or label selector (`:3`), or be an ARN.",
		Check: func(_ string, req map[string]any) *Refusal {
			name, _ := str(field(req, "Name"))
			if strings.HasPrefix(name, "arn:") {
				return nil // an ARN; its length is the next rule's
			}
			name, _, _ = strings.Cut(name, ":") // a version or label selector
			if !parameterNamePattern.MatchString(name) {
				return ssmValidation(ssmNameMessage)
			}
			return nil
		},
		Wording: Reported,
		Source: "https://docs.aws.amazon.com/systems-manager/latest/userguide/sysman-paramstore-su-create.html#sysman-parameter-name-constraints, " +
			ssmAPI + "API_GetParameter.html; the answer: " +
			"https://github.com/aws/aws-sdk-js-v3/issues/5005, https://github.com/localstack/localstack/issues/11538 (parity with AWS)",
	},
	{
		ID: "ssm-parameter-name-length", Service: "ssm", Actions: []string{"GetParameter"},
		Limit: "GetParameter's Name (a name or an ARN) is 1 to 2,048 characters; a parameter's own name at most 1,011, in at most 15 levels.",
		Check: func(_ string, req map[string]any) *Refusal {
			name, _ := str(field(req, "Name"))
			if utf8.RuneCountInString(name) > MaxParameterReferenceLength {
				return ssmValidation(fmt.Sprintf("1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must have length less than or equal to %d (the test front's wording).", name, MaxParameterReferenceLength))
			}
			return nil
		},
		Wording: Ours,
		Source:  ssmAPI + "API_GetParameter.html (Name: 1 to 2048), " + ssmAPI + "API_PutParameter.html (1011 characters for the fully qualified name, 15 levels)",
	},
}

// ssmValidation is SSM's ValidationException.
func ssmValidation(message string) *Refusal {
	return &Refusal{Status: 400, Code: "ValidationException", Type: "ValidationException", Message: message}
}

// reservedParameterName: names starting with aws or ssm, in any case, are
// AWS's (a path's first part included).
func reservedParameterName(name string) bool {
	n := strings.ToLower(strings.TrimPrefix(name, "/"))
	return strings.HasPrefix(n, "aws") || strings.HasPrefix(n, "ssm")
}

// parameterDepth is the number of levels of a parameter's name.
func parameterDepth(name string) int {
	return len(strings.Split(strings.TrimPrefix(name, "/"), "/"))
}

// ParameterNameProblem says why a parameter name or ARN cannot name a
// parameter someone created, in a sentence's end ("is empty"), or "" when
// it can: the rules of a new parameter's name (PutParameter's), for the
// name an ARN holds too.
func ParameterNameProblem(name string) string {
	if m := parameterARNPattern.FindStringSubmatch(name); m != nil {
		if utf8.RuneCountInString(name) > MaxParameterReferenceLength {
			return fmt.Sprintf("is longer than %d characters", MaxParameterReferenceLength)
		}
		name = m[1]
		if strings.Contains(name, "/") {
			name = "/" + name
		}
	} else if strings.HasPrefix(name, "arn:") {
		return "is not a parameter's ARN (arn:<partition>:ssm:<region>:<account>:parameter/<name>)"
	}
	switch {
	case name == "":
		return "is empty"
	case utf8.RuneCountInString(name) > MaxParameterNameLength:
		return fmt.Sprintf("is longer than %d characters", MaxParameterNameLength)
	case !parameterNamePattern.MatchString(name):
		return "may hold only letters, digits, '_', '.', '-' and '/', and a path (a name with '/') starts with '/' and has no empty part"
	case parameterDepth(name) > MaxParameterDepth:
		return fmt.Sprintf("has more than %d levels", MaxParameterDepth)
	case reservedParameterName(name):
		return "starts with aws or ssm, which are AWS's own (in any case)"
	}
	return ""
}
