package claim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// retirement says why a runner must leave the pool instead of being handed
// out or kept: launched from another launch template version than the
// pool's current one, or longer ago than maxAge. "" when it may stay, or
// when what would tell is unknown ("" current version, 0 maxAge, or facts
// the runner's record lacks).
func retirement(launchedAt, version, current string, maxAge time.Duration, now time.Time) string {
	if version != "" && current != "" && version != current {
		return fmt.Sprintf("launched from launch template version %s, the pool launches version %s", version, current)
	}
	if end := ageEnd(launchedAt, maxAge); !end.IsZero() && !end.After(now) {
		return fmt.Sprintf("launched at %s, more than max_runner_age %s ago", launchedAt, protocol.FormatDuration(maxAge))
	}
	return ""
}

// ageEnd is when a runner launched at launchedAt reaches maxAge; zero when
// either is unknown.
func ageEnd(launchedAt string, maxAge time.Duration) time.Time {
	at, err := protocol.ParseTime(launchedAt)
	if launchedAt == "" || err != nil || maxAge <= 0 {
		return time.Time{}
	}
	return at.Add(maxAge)
}

// launchTemplate reads the pool's launch template.
func (c *Claimer) launchTemplate(ctx context.Context, f *protocol.FleetConfig) (ec2types.LaunchTemplate, error) {
	in := &ec2.DescribeLaunchTemplatesInput{}
	ref := f.LaunchTemplateID // as the fleet request names it
	if ref != "" {
		in.LaunchTemplateIds = []string{ref}
	} else {
		ref = f.LaunchTemplateName
		in.LaunchTemplateNames = []string{ref}
	}
	out, err := c.EC2.DescribeLaunchTemplates(ctx, in)
	if err != nil {
		return ec2types.LaunchTemplate{}, fmt.Errorf("reading launch template %s: %w", ref, err)
	}
	if len(out.LaunchTemplates) != 1 {
		return ec2types.LaunchTemplate{}, fmt.Errorf("launch template %s does not exist (DescribeLaunchTemplates found %d)", ref, len(out.LaunchTemplates))
	}
	return out.LaunchTemplates[0], nil
}

// templateVersion is the version number the fleet launches from lt: the
// pool's own, or the template's latest or default one.
func templateVersion(lt ec2types.LaunchTemplate, f *protocol.FleetConfig) string {
	var n *int64
	switch f.LaunchTemplateVersion {
	case "$Latest":
		n = lt.LatestVersionNumber
	case "$Default":
		n = lt.DefaultVersionNumber
	default:
		return f.LaunchTemplateVersion
	}
	if n == nil {
		return ""
	}
	return strconv.FormatInt(aws.ToInt64(n), 10)
}

// currentTemplate reads the template the pool launches from, once per
// claim or release: what is outdated, and what a launch checks. No fleet:
// nothing is outdated, and nothing launches.
func (c *Claimer) currentTemplate(ctx context.Context, cfg protocol.PoolConfig) (lt ec2types.LaunchTemplate, version string, err error) {
	if cfg.Fleet == nil {
		return lt, "", nil
	}
	if lt, err = c.launchTemplate(ctx, cfg.Fleet); err != nil {
		// No runner is judged outdated then: the claim goes on as it would
		// have before; a launch fails on it.
		c.log("cannot tell outdated runners", "pool", cfg.Name, "error", err.Error())
		return lt, "", err
	}
	return lt, templateVersion(lt, cfg.Fleet), nil
}
