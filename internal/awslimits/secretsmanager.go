package awslimits

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Secrets Manager's limits (JSON 1.1 protocol: parameters as the JSON body
// names them). A pool's GitHub credential may live in a secret, which
// claims read with GetSecretValue.
const (
	// MaxSecretNameLength bounds a secret's name.
	MaxSecretNameLength = 512
	// MaxSecretIDLength bounds a SecretId: a name or an ARN, whole or
	// partial.
	MaxSecretIDLength = 2048
)

var (
	// secretNamePattern: the characters of a new secret's name.
	secretNamePattern = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]+$`)
	// secretIDPattern: the characters of a SecretId that is not an ARN (a
	// secret AWS made for a service has a '!' in its name).
	secretIDPattern = regexp.MustCompile(`^[A-Za-z0-9/_+=.@!-]+$`)
	// secretARNPattern is a secret's ARN, whole (the name and a '-' with 6
	// random characters Secrets Manager adds) or partial (the name alone).
	secretARNPattern = regexp.MustCompile(`^arn:[a-z0-9-]+:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:(.+)$`)
)

const (
	smAPI = "https://docs.aws.amazon.com/secretsmanager/latest/apireference/"
	// smNameMessage is Secrets Manager's answer to a SecretId of other
	// characters.
	smNameMessage = "Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!"
)

var secretsManagerRules = []Rule{
	{
		ID: "secretsmanager-secret-id", Service: "secretsmanager", Actions: []string{"GetSecretValue"},
		Limit: "A SecretId that is not an ARN is letters, digits and / _ + = . @ - (and '!', in the secrets AWS makes for its services).",
		Check: func(_ string, req map[string]any) *Refusal {
			if id, _ := str(field(req, "SecretId")); id != "" && !strings.HasPrefix(id, "arn:") && !secretIDPattern.MatchString(id) {
				return smValidation(smNameMessage)
			}
			return nil
		},
		Wording: Reported,
		Source: smAPI + "API_CreateSecret.html (Name), " + smAPI + "API_GetSecretValue.html (SecretId); the answer: " +
			"https://github.com/anomalyco/sst/issues/3795 (GetSecretValue), https://github.com/smithy-lang/smithy-typescript/issues/1546",
	},
	{
		ID: "secretsmanager-secret-id-length", Service: "secretsmanager", Actions: []string{"GetSecretValue"},
		Limit: "A SecretId (a name or an ARN) is 1 to 2,048 characters; a secret's own name at most 512.",
		Check: func(_ string, req map[string]any) *Refusal {
			id, present := str(field(req, "SecretId"))
			prefix := "1 validation error detected: Value '" + id + "' at 'secretId' failed to satisfy constraint: "
			switch n := utf8.RuneCountInString(id); {
			case present && n == 0:
				return smValidation(prefix + "Member must have length greater than or equal to 1 (the test front's wording).")
			case n > MaxSecretIDLength:
				return smValidation(prefix + fmt.Sprintf("Member must have length less than or equal to %d (the test front's wording).", MaxSecretIDLength))
			}
			return nil
		},
		Wording: Ours,
		Source:  smAPI + "API_CreateSecret.html (Name: 1 to 512), " + smAPI + "API_GetSecretValue.html (SecretId: 1 to 2048); ValidationException: " + smAPI + "CommonErrors.html",
	},
}

// smValidation is Secrets Manager's ValidationException.
func smValidation(message string) *Refusal {
	return &Refusal{Status: 400, Code: "ValidationException", Type: "ValidationException", Message: message}
}

// SecretIDProblem says why a secret's name or ARN cannot name a secret
// someone created, in a sentence's end ("is empty"), or "" when it can:
// the rules of CreateSecret's Name, and of a SecretId for an ARN.
func SecretIDProblem(id string) string {
	if m := secretARNPattern.FindStringSubmatch(id); m != nil {
		if utf8.RuneCountInString(id) > MaxSecretIDLength {
			return fmt.Sprintf("is longer than %d characters", MaxSecretIDLength)
		}
		id = m[1]
	} else if strings.HasPrefix(id, "arn:") {
		return "is not a secret's ARN (arn:<partition>:secretsmanager:<region>:<account>:secret:<name>)"
	}
	switch {
	case id == "":
		return "is empty"
	case utf8.RuneCountInString(id) > MaxSecretNameLength:
		return fmt.Sprintf("is longer than %d characters", MaxSecretNameLength)
	case !secretNamePattern.MatchString(id):
		return "may hold only letters, digits and / _ + = . @ -"
	}
	return ""
}
