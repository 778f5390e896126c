package protocol

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

const (
	// MinPoolNameLength and MaxPoolNameLength bound the pool name: the
	// table is named after it, and DynamoDB refuses a table name shorter
	// than 3 characters.
	MinPoolNameLength = awslimits.MinTableNameLength
	MaxPoolNameLength = 40
	// MaxQueueNameLength is SQS's limit for a queue name.
	MaxQueueNameLength = awslimits.MaxQueueNameLength
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ClassNamePattern is the rule for resource class names: no '-', so that
// the last '-' of a queue name <pool>-<class> separates pool and class, and
// two pools' queues never share a name.
var ClassNamePattern = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// ClassNameRule says what ClassNamePattern allows, and why.
const ClassNameRule = "may contain only letters, digits and '_', not '-': the class's queue is named <pool>-<class>, " +
	"so a '-' in a class would let two pools share a queue (pool a-b's class c and pool a's class b-c are both a-b-c)"

// legacyClassPattern is what class names could hold before '-' was refused.
// A pool created then keeps such a class in its config item: reading it
// still works, so that the pool can be refreshed and its classes renamed.
var legacyClassPattern = namePattern

// runIDPattern is the rule for a claim's run id, which begins its runners'
// only label (labels.go): lower case, because GitHub matches labels
// case-insensitively.
var runIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,99}$`)

// RunIDRule says what a run id may be.
const RunIDRule = "1-100 characters of lower-case letters, digits, '_', '.' and '-', starting with a letter or digit"

// GitHub's rules for user and organization names, and for repository
// names, and what they allow in words.
var (
	GitHubOwnerPattern      = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	GitHubRepositoryPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
)

const (
	GitHubOwnerRule      = "1-39 letters, digits or '-', not starting with '-'"
	GitHubRepositoryRule = "1-100 letters, digits, '_', '.' or '-'"
)

// ParseRepository splits a repository's full name, "owner/name", as
// GITHUB_REPOSITORY gives it.
func ParseRepository(fullName string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || !GitHubOwnerPattern.MatchString(owner) || !GitHubRepositoryPattern.MatchString(name) {
		return "", "", fmt.Errorf("repository %q must be a GitHub repository's full name, owner/name: the owner %s, the name %s", fullName, GitHubOwnerRule, GitHubRepositoryRule)
	}
	return owner, name, nil
}

// ValidatePoolName reports why name cannot name a pool, or nil.
func ValidatePoolName(name string) error {
	if len(name) < MinPoolNameLength || len(name) > MaxPoolNameLength {
		return fmt.Errorf("pool name %q must be %d-%d characters long (it names a DynamoDB table), got %d", name, MinPoolNameLength, MaxPoolNameLength, len(name))
	}
	if !namePattern.MatchString(name) {
		return fmt.Errorf("pool name %q may contain only letters, digits, '_' and '-'", name)
	}
	return nil
}

// ValidateClassName reports why class cannot name a resource class of pool, or nil.
func ValidateClassName(pool, class string) error {
	if class == "" {
		return fmt.Errorf("resource class %q must not be empty: it %s", class, ClassNameRule)
	}
	if !ClassNamePattern.MatchString(class) {
		return fmt.Errorf("resource class %q %s", class, ClassNameRule)
	}
	return validateQueueName(pool, class)
}

// validateStoredClassName is ValidateClassName for the classes of a config
// item, which may be older than the rule against '-' (legacyClassPattern).
func validateStoredClassName(pool, class string) error {
	if class == "" || !legacyClassPattern.MatchString(class) {
		return fmt.Errorf("resource class %q may contain only letters, digits, '_' and '-' and must not be empty", class)
	}
	return validateQueueName(pool, class)
}

func validateQueueName(pool, class string) error {
	if q := QueueName(pool, class); len(q) > MaxQueueNameLength {
		return fmt.Errorf("queue name %q for resource class %q is %d characters long; SQS allows at most %d (shorten the pool or class name)", q, class, len(q), MaxQueueNameLength)
	}
	return nil
}

// ValidateRunID reports why id cannot be a claim's run id, or nil: no
// runner should register with a label that matches another run's. The
// provider refuses other run ids before a claim starts (and, for a new
// claim, longer ones than ValidateNewRunID allows); agents ignore a record
// naming one.
func ValidateRunID(id string) error {
	if lower := strings.ToLower(id); lower != id && runIDPattern.MatchString(lower) {
		return fmt.Errorf("run id %q must be lower case: GitHub matches labels case-insensitively, so %q and %q would share one label", id, id, lower)
	}
	if !runIDPattern.MatchString(id) {
		return fmt.Errorf("run id %q must be %s", id, RunIDRule)
	}
	return nil
}

// TableName is the DynamoDB table of a pool.
func TableName(pool string) string { return pool }

// QueueName is the SQS queue holding the idle runners of one resource class.
func QueueName(pool, class string) string { return pool + "-" + class }

// Tags: instances get theirs at fleet creation; each queue is tagged with
// its pool and class, so that a pool never takes another's queue.
const (
	TagAllowSelfTermination = "AllowSelfTermination" // lets the agent's instance profile terminate it
	TagInitialRunID         = "InitialRunId"
	TagPool                 = "ec2runners:pool"  // instances and queues
	TagClass                = "ec2runners:class" // queues
)
