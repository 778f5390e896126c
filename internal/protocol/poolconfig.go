package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
)

// ResourceClass is the size of the runners of one class.
type ResourceClass struct {
	CPU       int `json:"cpu"`
	MemoryMiB int `json:"memoryMiB"`
}

// Instance selection modes of the fleet fallback.
const (
	SelectionAttributeBased = "attribute-based"
	SelectionExplicit       = "explicit"
)

// FleetConfig is how a claim launches missing capacity.
type FleetConfig struct {
	LaunchTemplateID      string   `json:"launchTemplateId,omitempty"`
	LaunchTemplateName    string   `json:"launchTemplateName,omitempty"`
	LaunchTemplateVersion string   `json:"launchTemplateVersion"`
	SubnetIDs             []string `json:"subnetIds"`
	InstanceSelection     string   `json:"instanceSelection"`
}

// ShortestMaxRuntime and LongestMaxRuntime bound every max runtime: the
// pool's, a claim's and an access entry's.
const (
	ShortestMaxRuntime = time.Minute
	LongestMaxRuntime  = 7 * 24 * time.Hour
)

// PoolConfig is everything a claim needs to know about a pool, stored in the
// pool config item so that claims in other stacks need only the pool name.
type PoolConfig struct {
	Name            string                   `json:"name"`
	ResourceClasses map[string]ResourceClass `json:"resourceClasses"`
	IdleTimeout     Duration                 `json:"idleTimeout"`
	MaxRuntime      Duration                 `json:"maxRuntime"`
	// MaxRunnerAge: a runner launched longer ago is not handed out again,
	// nor kept in the pool (0: no limit).
	MaxRunnerAge Duration          `json:"maxRunnerAge,omitempty"`
	Fleet        *FleetConfig      `json:"fleet,omitempty"`
	QueueURLs    map[string]string `json:"queueUrls"`
	GitHub       *GitHubTarget     `json:"github,omitempty"`
	// GitHubCredential is where the pool keeps the GitHub credential its
	// claims mint runner tokens with, when their provider has none of its
	// own (nil: nowhere).
	GitHubCredential *GitHubCredential `json:"githubCredential,omitempty"`
	// Warm are the hot targets by resource class (see WarmTarget).
	Warm map[string]WarmTarget `json:"warm,omitempty"`
	// InstanceARNPrefix is arn:<partition>:ec2:<region>:<account>:instance/
	// of the pool's runners, whose agent partitions are AGENT#<prefix><id>.
	InstanceARNPrefix string `json:"instanceArnPrefix"`
	// Metrics is where the pool's metrics go; nil: it publishes none.
	Metrics *MetricsConfig `json:"metrics,omitempty"`
	// Access is who may claim through the pool's broker (nil: no policy).
	Access *Access `json:"access,omitempty"`
}

// GitHubTarget is where a pool's runners register: a repository, or an
// organization when Repository is empty.
type GitHubTarget struct {
	Owner      string `json:"owner"`
	Repository string `json:"repository,omitempty"`
}

// String is "owner/repository", or "owner" for an organization.
func (t GitHubTarget) String() string {
	if t.Repository == "" {
		return t.Owner
	}
	return t.Owner + "/" + t.Repository
}

// GitHubCredential is where a pool's GitHub credential lives, in the
// pool's account: exactly one of a Systems Manager parameter (a
// SecureString) and a Secrets Manager secret, each by name or ARN. Only
// the place is in the pool's table, never the credential.
type GitHubCredential struct {
	SSMParameter         string `json:"ssmParameter,omitempty"`
	SecretsManagerSecret string `json:"secretsManagerSecret,omitempty"`
}

// String names the place: "SSM parameter <name>" or "Secrets Manager
// secret <id>".
func (c GitHubCredential) String() string {
	if c.SSMParameter != "" {
		return "SSM parameter " + c.SSMParameter
	}
	return "Secrets Manager secret " + c.SecretsManagerSecret
}

// Validate checks that exactly one place is named, and that AWS would take
// its name.
func (c GitHubCredential) Validate() error {
	switch {
	case (c.SSMParameter == "") == (c.SecretsManagerSecret == ""):
		return fmt.Errorf("needs exactly one of ssmParameter and secretsManagerSecret, got %q and %q", c.SSMParameter, c.SecretsManagerSecret)
	case c.SSMParameter != "":
		if p := awslimits.ParameterNameProblem(c.SSMParameter); p != "" {
			return fmt.Errorf("the SSM parameter %q %s", c.SSMParameter, p)
		}
	default:
		if p := awslimits.SecretIDProblem(c.SecretsManagerSecret); p != "" {
			return fmt.Errorf("the Secrets Manager secret %q %s", c.SecretsManagerSecret, p)
		}
	}
	return nil
}

// Duration is a time.Duration written as Go duration text ("7m0s") in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(FormatDuration(time.Duration(d)))
}

// UnmarshalJSON reads duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Item renders the config as the pool config item; value holds the JSON document.
func (c PoolConfig) Item(now string) map[string]types.AttributeValue {
	doc, _ := json.Marshal(c) // cannot fail: plain data
	item := BaseItem(TypeMetadata, PoolConfigID, now)
	item[AttrValue] = &types.AttributeValueMemberS{Value: string(doc)}
	return item
}

// PoolConfigFromItem reads the pool config item. A document that cannot be
// a pool's settings is an error rather than a zero or half-read config: not
// a JSON object, an invalid name, instance ARN prefix or resource classes,
// a negative duration, an unusable fleet, GitHub target, metrics settings
// or access policy.
func PoolConfigFromItem(item map[string]types.AttributeValue) (PoolConfig, error) {
	value, ok := item[AttrValue].(*types.AttributeValueMemberS)
	if !ok {
		return PoolConfig{}, fmt.Errorf("pool config item is not valid: its %s attribute is %s, want a string holding a JSON document", AttrValue, describeAttr(item[AttrValue]))
	}
	var c PoolConfig
	if err := json.Unmarshal([]byte(value.Value), &c); err != nil {
		return PoolConfig{}, fmt.Errorf("pool config item is not valid: %w", err)
	}
	if err := c.validate(); err != nil {
		return PoolConfig{}, fmt.Errorf("pool config item is not valid: %w", err)
	}
	return c, nil
}

// validate checks what a claim relies on; queue URLs are not checked, as a
// claim reports a missing queue itself.
func (c PoolConfig) validate() error {
	if err := ValidatePoolName(c.Name); err != nil {
		return err
	}
	if err := ValidateInstanceARNPrefix(c.InstanceARNPrefix); err != nil {
		return fmt.Errorf("instanceArnPrefix: %w", err)
	}
	if err := ValidateResourceClasses(c.ResourceClasses); err != nil {
		return err
	}
	for _, class := range SortedClassNames(c.ResourceClasses) {
		if err := validateStoredClassName(c.Name, class); err != nil {
			return err
		}
	}
	for _, class := range slices.Sorted(maps.Keys(c.Warm)) {
		if _, ok := c.ResourceClasses[class]; !ok {
			return fmt.Errorf("warm names resource class %q, which the pool does not have", class)
		}
		if err := c.Warm[class].Validate(); err != nil {
			return fmt.Errorf("warm[%q]: %w", class, err)
		}
	}
	if c.IdleTimeout < 0 || c.MaxRuntime < 0 || c.MaxRunnerAge < 0 {
		return fmt.Errorf("idleTimeout %s, maxRuntime %s and maxRunnerAge %s must not be negative", time.Duration(c.IdleTimeout), time.Duration(c.MaxRuntime), time.Duration(c.MaxRunnerAge))
	}
	if f := c.Fleet; f != nil {
		switch {
		case (f.LaunchTemplateID == "") == (f.LaunchTemplateName == ""):
			return fmt.Errorf("fleet needs exactly one of launchTemplateId and launchTemplateName, got %q and %q", f.LaunchTemplateID, f.LaunchTemplateName)
		case f.LaunchTemplateVersion == "":
			return fmt.Errorf("fleet has no launchTemplateVersion")
		case len(f.SubnetIDs) == 0 || slices.Contains(f.SubnetIDs, ""):
			return fmt.Errorf("fleet needs non-empty subnetIds, got %q", f.SubnetIDs)
		case f.InstanceSelection != SelectionAttributeBased && f.InstanceSelection != SelectionExplicit:
			return fmt.Errorf("fleet instanceSelection %q is not %q or %q", f.InstanceSelection, SelectionAttributeBased, SelectionExplicit)
		}
	}
	if m := c.Metrics; m != nil {
		if err := ValidateMetricsNamespace(m.Namespace); err != nil {
			return fmt.Errorf("metrics namespace %q %w", m.Namespace, err)
		}
		if err := ValidateLogGroupName(m.LogGroup); err != nil {
			return fmt.Errorf("metrics logGroup %q %w", m.LogGroup, err)
		}
	}
	if g := c.GitHub; g != nil {
		if !GitHubOwnerPattern.MatchString(g.Owner) || (g.Repository != "" && !GitHubRepositoryPattern.MatchString(g.Repository)) {
			return fmt.Errorf("github target %q is not a GitHub owner or owner/repository", g.String())
		}
	}
	if a := c.Access; a != nil {
		if err := a.Validate(c.ResourceClasses, time.Duration(c.MaxRuntime)); err != nil {
			return fmt.Errorf("access %w", err)
		}
	}
	if cred := c.GitHubCredential; cred != nil {
		if c.GitHub == nil {
			return fmt.Errorf("githubCredential names %s, but the pool has no github target to mint runner tokens for", cred)
		}
		if err := cred.Validate(); err != nil {
			return fmt.Errorf("githubCredential: %w", err)
		}
	}
	return nil
}

// describeAttr names the type of an attribute value, for errors about corrupt items.
func describeAttr(v types.AttributeValue) string {
	switch v.(type) {
	case nil:
		return "absent"
	case *types.AttributeValueMemberS:
		return "a string"
	case *types.AttributeValueMemberN:
		return "a number"
	case *types.AttributeValueMemberB:
		return "binary"
	case *types.AttributeValueMemberBOOL:
		return "a boolean"
	case *types.AttributeValueMemberNULL:
		return "null"
	case *types.AttributeValueMemberM:
		return "a map"
	case *types.AttributeValueMemberL:
		return "a list"
	case *types.AttributeValueMemberSS:
		return "a string set"
	case *types.AttributeValueMemberNS:
		return "a number set"
	case *types.AttributeValueMemberBS:
		return "a binary set"
	default:
		return fmt.Sprintf("of type %T", v)
	}
}
