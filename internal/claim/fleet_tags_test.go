package claim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// The instances a fleet launches carry the pool's own tags, then the
// provider's default tags by key; a default tag never replaces one of the
// pool's, and more than EC2's 50 tags fail before anything launches.
func TestInstanceTags(t *testing.T) {
	pairs := func(tags []ec2types.Tag) []string {
		var out []string
		for _, tg := range tags {
			out = append(out, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
		}
		return out
	}
	defaults := map[string]string{
		"team": "infra", "CostCenter": "42",
		protocol.TagInitialRunID: "forged", protocol.TagAllowSelfTermination: "false",
	}
	tags, err := instanceTags("ci", "run-1", defaults)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{protocol.TagAllowSelfTermination + "=true", protocol.TagInitialRunID + "=run-1", protocol.TagPool + "=ci", "CostCenter=42", "team=infra"}
	if got := pairs(tags); !slices.Equal(got, want) {
		t.Errorf("tags %q, want %q", got, want)
	}

	// 47 of their own fit beside the pool's 3, whatever else overlaps.
	many := map[string]string{protocol.TagInitialRunID: "ignored"}
	for i := range 47 {
		many[fmt.Sprintf("k%02d", i)] = "v"
	}
	tags, err = instanceTags("ci", "run-1", many)
	if err != nil || len(tags) != maxInstanceTags {
		t.Fatalf("47 default tags: %d tags, %v; want %d", len(tags), err, maxInstanceTags)
	}
	more := maps.Clone(many)
	more["k47"] = "v"
	if _, err := instanceTags("ci", "run-1", more); err == nil || !strings.Contains(err.Error(), "EC2 allows 50 tags per instance") {
		t.Errorf("48 default tags: %v, want an error about EC2's limit", err)
	}
}
