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
	// MaxParameterNameLength bounds a parameter's name with the ARN that
	// precedes it ("arn:aws:ssm:us-east-2:111122223333:parameter/" and
	// the name): the 1,011 characters of PutParameter's Name include the
	// prefix.
	MaxParameterNameLength = 1011
	// MinParameterARNPrefixLength is the shortest ARN prefix a parameter
	// name can have: arn:aws:ssm:us-east-1:123456789012:parameter (the
	// shortest partition and region names). A name's own characters are at
	// most MaxParameterNameLength less its prefix, so a name longer than
	// MaxParameterNameLength-MinParameterARNPrefixLength (967, with its
	// leading '/') fits in no region; in a longer region or partition, the
	// bound is lower.
	MinParameterARNPrefixLength = len("arn:aws:ssm:us-east-1:123456789012:parameter")
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
		Limit: "GetParameter's Name (a name or an ARN) is 1 to 2,048 characters; a parameter's own name at most 1,011 with its ARN's prefix, in at most 15 levels.",
		Check: func(_ string, req map[string]any) *Refusal {
			name, _ := str(field(req, "Name"))
			if utf8.RuneCountInString(name) > MaxParameterReferenceLength {
				return ssmValidation(fmt.Sprintf("1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must have length less than or equal to %d (the test front's wording).", name, MaxParameterReferenceLength))
			}
			return nil
		},
		Wording: Ours,
		Source: ssmAPI + "API_GetParameter.html (Name: 1 to 2048), " + ssmAPI + "API_PutParameter.html (\"The maximum length for a parameter name that you create is 1011 characters. " +
			"This includes the characters in the ARN that precede the name you specify\"; 15 levels), " +
			"https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-ssm-parameter.html (Name: \"including the full length of the parameter ARN\")",
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
// name an ARN holds too. The length counts the ARN: an ARN's own, or for a
// name the shortest ARN prefix it can have (MinParameterARNPrefixLength).
func ParameterNameProblem(name string) string {
	arnLength := 0
	if m := parameterARNPattern.FindStringSubmatch(name); m != nil {
		arnLength = utf8.RuneCountInString(name)
		name = m[1]
		if strings.Contains(name, "/") {
			name = "/" + name
		}
	} else if strings.HasPrefix(name, "arn:") {
		return "is not a parameter's ARN (arn:<partition>:ssm:<region>:<account>:parameter/<name>)"
	} else {
		arnLength = MinParameterARNPrefixLength + utf8.RuneCountInString(name)
		if !strings.HasPrefix(name, "/") {
			arnLength++ // parameter/name
		}
	}
	switch {
	case name == "":
		return "is empty"
	case arnLength > MaxParameterNameLength:
		return fmt.Sprintf("is longer than %d characters with its ARN (arn:<partition>:ssm:<region>:<account>:parameter, at least %d characters, and the name)",
			MaxParameterNameLength, MinParameterARNPrefixLength)
	case !parameterNamePattern.MatchString(name):
		return "may hold only letters, digits, '_', '.', '-' and '/', and a path (a name with '/') starts with '/' and has no empty part"
	case parameterDepth(name) > MaxParameterDepth:
		return fmt.Sprintf("has more than %d levels", MaxParameterDepth)
	case reservedParameterName(name):
		return "starts with aws or ssm, which are AWS's own (in any case)"
	}
	return ""
}
