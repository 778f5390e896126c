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

// TemplateRef is a launch template version: the template's id, its
// version number, and, for the template a pool launches now, when the
// template was created. Empty: unknown.
type TemplateRef struct {
	ID      string
	Version string
	Created time.Time // zero: unknown (always, for a runner's)
}

func (t TemplateRef) String() string {
	switch {
	case t.ID == "":
		return "launch template version " + t.Version
	case t.Version == "":
		return "launch template " + t.ID
	}
	return fmt.Sprintf("launch template %s version %s", t.ID, t.Version)
}

// launchedFrom are the template facts of a runner's record or message.
func launchedFrom(id, version string) TemplateRef { return TemplateRef{ID: id, Version: version} }

// Retirement says why a runner must leave the pool instead of being handed
// out or kept: launched from another launch template, or another version of
// it, than the one the pool launches now (current), or longer ago than
// maxAge. "" when it may stay, or when what would tell is unknown (current
// unknown, 0 maxAge, or facts the runner's record lacks).
//
// A runner recorded before records named their template (from.ID "") is
// judged by its version, and by its launch time: launched before the
// current template was created, it came from another template (one
// replaced, say, for a new AMI: a new id, version 1 again). One launched
// from an old template after the current one was created (the moments
// between the new template and the pool's apply) cannot be told, and
// leaves at maxAge.
func Retirement(launchedAt string, from, current TemplateRef, maxAge time.Duration, now time.Time) string {
	if why := outdated(launchedAt, from, current); why != "" {
		return why
	}
	if end := ageEnd(launchedAt, maxAge); !end.IsZero() && !end.After(now) {
		return fmt.Sprintf("launched at %s, more than max_runner_age %s ago", launchedAt, protocol.FormatDuration(maxAge))
	}
	return ""
}

// outdated says why a runner launched at launchedAt from from is not of
// the current template ("" when it is, or when nothing tells).
func outdated(launchedAt string, from, current TemplateRef) string {
	if from.ID != "" && current.ID != "" && from.ID != current.ID {
		return fmt.Sprintf("launched from %s, the pool launches %s", from, current)
	}
	if from.Version != "" && current.Version != "" && from.Version != current.Version {
		return fmt.Sprintf("launched from %s, the pool launches %s", from, current)
	}
	if at, err := protocol.ParseTime(launchedAt); from.ID == "" && launchedAt != "" && err == nil && at.Before(current.Created) {
		return fmt.Sprintf("launched at %s, before %s was created (%s): from another launch template", launchedAt, current, protocol.FormatTime(current.Created))
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

// templateRef is the template the fleet launches from lt: its id, and
// the pool's version, or the template's latest or default one.
func templateRef(lt ec2types.LaunchTemplate, f *protocol.FleetConfig) TemplateRef {
	ref := TemplateRef{ID: aws.ToString(lt.LaunchTemplateId), Created: aws.ToTime(lt.CreateTime)}
	var n *int64
	switch f.LaunchTemplateVersion {
	case "$Latest":
		n = lt.LatestVersionNumber
	case "$Default":
		n = lt.DefaultVersionNumber
	default:
		ref.Version = f.LaunchTemplateVersion
		return ref
	}
	if n != nil {
		ref.Version = strconv.FormatInt(aws.ToInt64(n), 10)
	}
	return ref
}

// CurrentTemplate reads the template the pool launches from, once per
// claim or release: what is outdated, and what a launch checks. No fleet:
// nothing is outdated, and nothing launches.
func (c *Claimer) CurrentTemplate(ctx context.Context, cfg protocol.PoolConfig) (lt ec2types.LaunchTemplate, ref TemplateRef, err error) {
	if cfg.Fleet == nil {
		return lt, ref, nil
	}
	if lt, err = c.launchTemplate(ctx, cfg.Fleet); err != nil {
		// No runner is judged outdated then: the claim goes on as it would
		// have before; a launch fails on it.
		c.log("cannot tell outdated runners", "pool", cfg.Name, "error", err.Error())
		return lt, ref, err
	}
	return lt, templateRef(lt, cfg.Fleet), nil
}
