package protocol

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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

// PoolConfig is everything a claim needs to know about a pool, stored in the
// pool config item so that claims in other stacks need only the pool name.
type PoolConfig struct {
	Name            string                   `json:"name"`
	ResourceClasses map[string]ResourceClass `json:"resourceClasses"`
	IdleTimeout     Duration                 `json:"idleTimeout"`
	MaxRuntime      Duration                 `json:"maxRuntime"`
	Fleet           *FleetConfig             `json:"fleet,omitempty"`
	QueueURLs       map[string]string        `json:"queueUrls"`
	GitHub          *GitHubTarget            `json:"github,omitempty"`
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

// PoolConfigFromItem reads the pool config item.
func PoolConfigFromItem(item map[string]types.AttributeValue) (PoolConfig, error) {
	var c PoolConfig
	if err := json.Unmarshal([]byte(StringAttr(item, AttrValue)), &c); err != nil {
		return PoolConfig{}, fmt.Errorf("pool config item is not valid: %w", err)
	}
	return c, nil
}
