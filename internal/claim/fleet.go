package claim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// launchBudget bounds a launch and its bookkeeping, which run to the end
// even when the claim is cancelled.
const launchBudget = 2 * time.Minute

// maxOverrides bounds an explicit request: AWS documents 300 overrides for
// fleets of type request and maintain, and no limit for instant ones; an
// instant fleet keeps to the documented one.
const maxOverrides = 300

// launch starts n instances of the claim's usage class with an instant
// fleet, records them as created, and returns them. A spot claim that
// falls back (Request.SpotFallback) takes on-demand instances, with a
// second fleet, for what EC2 had no spot capacity for. Fewer than n in the
// end: all are terminated and the claim fails.
func (a *attempt) launch(ctx context.Context, n int) ([]Instance, error) {
	if a.templateErr != nil {
		return nil, a.templateErr
	}
	template, err := CheckTemplateTag(a.template, a.req.Pool, a.cfg.Fleet)
	if err != nil {
		return nil, err
	}
	fallback := a.req.fallsBack()
	launched, short, err := a.launchFleet(ctx, a.req.UsageClass, n, template, !fallback)
	if err != nil || len(launched) == n {
		return launched, err
	}
	// What EC2 had no spot capacity for, on-demand. The spot instances
	// are recorded and held: a failure from here on is the rollback's.
	rest := n - len(launched)
	why := fmt.Sprintf("EC2 launched %d of %d spot instance(s) (%s)", len(launched), n, short)
	a.c.log("claim: too little spot capacity; launching on-demand instances instead", "run", a.req.RunID, "on-demand", rest, "reason", why)
	more, _, err := a.launchFleet(ctx, protocol.UsageOnDemand, rest, template, true)
	if err != nil {
		return nil, fmt.Errorf("%s; launching %d on-demand instance(s) instead: %w", why, rest, err)
	}
	a.mu.Lock()
	a.warnings = append(a.warnings, fmt.Sprintf("%s; launched %d on-demand instance(s) instead: %v", why, rest, instanceIDs(more)))
	a.mu.Unlock()
	return append(launched, more...), nil
}

// launchFleet starts n instances of a usage class with one instant fleet,
// records them as created, and returns them, with why EC2 launched fewer
// ("" when it launched all). Fewer than n: when final, all are terminated
// and it fails; otherwise those launched are recorded and returned.
func (a *attempt) launchFleet(ctx context.Context, usage string, n int, template TemplateRef, final bool) ([]Instance, string, error) {
	a.mu.Lock()
	token := clientToken(a.req, a.rec.Nonce, usage, a.launched, n)
	a.mu.Unlock()
	req := a.req
	req.UsageClass = usage
	in, err := a.c.fleetRequest(ctx, req, a.cfg, a.wants.Class, n, token)
	if err != nil {
		return nil, "", err
	}
	// Once asked for, instances are recorded whatever the caller does
	// meanwhile (Ctrl-C): a cancelled CreateFleet would launch them unseen.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), launchBudget)
	defer cancel()
	out, err := a.c.EC2.CreateFleet(ctx, in)
	if err != nil {
		// It may have launched instances whose ids never came back.
		if _, terr := a.c.terminateUnrecorded(ctx, a.s, a.req.Pool, a.req.RunID); terr != nil {
			err = fmt.Errorf("%w; and: %v", err, terr)
		}
		return nil, "", fmt.Errorf("CreateFleet: %w", err)
	}
	launchedAt := protocol.FormatTime(a.c.now())
	var launched []Instance
	for _, group := range out.Instances {
		for _, id := range group.InstanceIds { // AWS groups several ids per entry
			launched = append(launched, Instance{ID: id, InstanceType: string(group.InstanceType), UsageClass: usage, Source: SourceFleet,
				LaunchedAt: launchedAt, TemplateID: template.ID, TemplateVersion: template.Version})
		}
	}
	a.mu.Lock()
	a.launched += len(launched)
	a.mu.Unlock()
	// Until an instance has its record, only this function knows of it:
	// anything that goes wrong terminates the unrecorded ones directly.
	abandon := func(insts []Instance, cause error) error {
		if err := pool.TerminateInstances(context.WithoutCancel(ctx), a.c.EC2, instanceIDs(insts), true); err != nil {
			return fmt.Errorf("%w; terminating %v also failed: %v", cause, instanceIDs(insts), err)
		}
		for _, inst := range insts {
			a.drop(inst.ID, "launched; terminated")
		}
		return cause
	}
	short := ""
	if len(launched) < n {
		short = fleetErrors(out.Errors)
		if final {
			return nil, short, abandon(launched, fmt.Errorf("CreateFleet launched %d of %d %s instance(s) (%s)", len(launched), n, usage, short))
		}
	}
	if len(launched) == 0 {
		return nil, short, nil
	}
	if err := a.s.addOwned(ctx, a.req.RunID, a.rec.Nonce, instanceIDs(launched)...); err != nil {
		return nil, "", abandon(launched, err)
	}
	// The agent reads its token once its record names the run.
	if err := a.handRegistration(ctx, instanceIDs(launched)); err != nil {
		return nil, "", abandon(launched, err)
	}
	now := a.c.now()
	for i, inst := range launched {
		err := a.s.putCreated(ctx, protocol.Instance{
			ID: inst.ID, State: protocol.StateCreated, RunID: a.req.RunID, Threshold: protocol.FormatTime(now.Add(CreatedLifetime)),
			ResourceClass: a.req.ResourceClass, InstanceType: inst.InstanceType, UsageClass: inst.UsageClass, UpdatedAt: protocol.FormatTime(now),
			LaunchedAt: inst.LaunchedAt, TemplateID: inst.TemplateID, TemplateVersion: inst.TemplateVersion,
		})
		if err != nil {
			return nil, "", abandon(launched[i:], err)
		}
		a.hold(inst, protocol.StateCreated)
	}
	// A retried CreateFleet whose first answer was lost launches nothing
	// new on AWS (same ClientToken), but launches again on endpoints that
	// ignore the token (moto's EC2, and so LocalStack's): the first
	// launch's instances carry the run's tag and no record. A failure here
	// only logs: the reaper terminates them after its grace period.
	if _, err := a.c.terminateUnrecorded(ctx, a.s, a.req.Pool, a.req.RunID); err != nil {
		a.c.log("looking for instances a retried CreateFleet launched twice failed", "run", a.req.RunID, "error", err.Error())
	}
	return launched, short, nil
}

// maxFleetReasons bounds the reasons fleetErrors lists: an explicit fleet
// has up to 300 overrides, and EC2 may answer an error for each.
const maxFleetReasons = 5

// fleetErrors says why a fleet launched fewer instances than asked: the
// distinct codes and messages of its Errors[] (EC2 answers one per launch
// template override it tried), in order, the first maxFleetReasons of them.
func fleetErrors(errs []ec2types.CreateFleetError) string {
	var reasons []string
	for _, e := range errs {
		r := fmt.Sprintf("%s: %s", aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	switch {
	case len(reasons) == 0:
		return "EC2 gave no reason"
	case len(reasons) > maxFleetReasons:
		more := len(reasons) - maxFleetReasons
		reasons = append(reasons[:maxFleetReasons], fmt.Sprintf("and %d other reason(s)", more))
	}
	return strings.Join(reasons, "; ")
}

// clientToken makes a retried CreateFleet of the same attempt idempotent,
// while a new attempt (new nonce) of the same run, the attempt's next
// launch (after launched instances), or its on-demand fallback for spot
// capacity EC2 lacked launches anew: EC2 answers a token used again with
// other parameters IdempotentParameterMismatch, and one used again with the
// same parameters with its first answer, launching nothing.
func clientToken(req Request, nonce, usage string, launched, n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%s/%s/%d/%d", req.Pool, req.RunID, nonce, usage, launched, n)))
	return "ec2runners-" + hex.EncodeToString(sum[:16])
}

// fleetRequest builds the instant fleet request of a claim.
func (c *Claimer) fleetRequest(ctx context.Context, req Request, cfg protocol.PoolConfig, class protocol.ResourceClass, n int, token string) (*ec2.CreateFleetInput, error) {
	f := cfg.Fleet
	spec := &ec2types.FleetLaunchTemplateSpecificationRequest{Version: aws.String(f.LaunchTemplateVersion)}
	if f.LaunchTemplateID != "" {
		spec.LaunchTemplateId = aws.String(f.LaunchTemplateID)
	} else {
		spec.LaunchTemplateName = aws.String(f.LaunchTemplateName)
	}
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	switch f.InstanceSelection {
	case protocol.SelectionExplicit:
		types, err := c.resolveInstanceTypes(ctx, f, class, req.AllowedTypes)
		if err != nil {
			return nil, err
		}
		for _, t := range types {
			for _, subnet := range f.SubnetIDs {
				if len(overrides) == maxOverrides {
					c.log("explicit fleet request: override limit reached, later instance types left out", "limit", maxOverrides, "types", len(types))
					break
				}
				overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{SubnetId: aws.String(subnet), InstanceType: ec2types.InstanceType(t)})
			}
		}
	default:
		allowed := make([]string, len(req.AllowedTypes))
		for i, p := range req.AllowedTypes {
			allowed[i] = strings.ToLower(p)
		}
		for _, subnet := range f.SubnetIDs {
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				SubnetId: aws.String(subnet),
				InstanceRequirements: &ec2types.InstanceRequirementsRequest{
					VCpuCount:            &ec2types.VCpuCountRangeRequest{Min: aws.Int32(int32(class.CPU)), Max: aws.Int32(int32(class.CPU))},
					MemoryMiB:            &ec2types.MemoryMiBRequest{Min: aws.Int32(int32(class.MemoryMiB))},
					AllowedInstanceTypes: allowed,
					BurstablePerformance: ec2types.BurstablePerformanceExcluded,
				},
			})
		}
	}
	tags, err := instanceTags(req.Pool, req.RunID, c.DefaultTags)
	if err != nil {
		return nil, err
	}
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           aws.String(token),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: spec, Overrides: overrides}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(int32(n)),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand,
		},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
	}
	if req.UsageClass == protocol.UsageSpot {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeSpot
		in.TargetCapacitySpecification.SpotTargetCapacity = aws.Int32(int32(n))
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.TargetCapacitySpecification.OnDemandTargetCapacity = aws.Int32(int32(n))
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in, nil
}

// maxInstanceTags is EC2's limit of tags per resource.
const maxInstanceTags = awslimits.MaxTagsPerResource

// instanceTags are the tags of the instances a fleet launches: the pool's
// own, which agents, the reaper and IAM conditions rely on, then the
// provider's default tags (cost allocation) by key, never replacing one of
// the pool's. Tags past EC2's limit fail the claim before anything launches:
// dropping some would silently miss a cost report.
//
// Volumes get none: an instant fleet tags only the fleet and its instances
// (CreateFleet refuses other resource types); the launch template's
// tag_specifications tag volumes.
func instanceTags(poolName, runID string, defaultTags map[string]string) ([]ec2types.Tag, error) {
	tags := []ec2types.Tag{
		{Key: aws.String(protocol.TagAllowSelfTermination), Value: aws.String("true")},
		{Key: aws.String(protocol.TagInitialRunID), Value: aws.String(runID)},
		{Key: aws.String(protocol.TagPool), Value: aws.String(poolName)},
	}
	own := len(tags)
	var extra []string
	for k := range defaultTags {
		if !slices.ContainsFunc(tags[:own], func(t ec2types.Tag) bool { return aws.ToString(t.Key) == k }) {
			extra = append(extra, k)
		}
	}
	if own+len(extra) > maxInstanceTags {
		return nil, fmt.Errorf("the provider's default_tags add %d tags to the pool's %d on each instance, but EC2 allows %d tags per instance", len(extra), own, maxInstanceTags)
	}
	slices.Sort(extra)
	for _, k := range extra {
		tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(defaultTags[k])})
	}
	return tags, nil
}

// resolveInstanceTypes lists the types an explicit request may use: the
// class's vCPU count exactly, at least its memory, not burstable, of the
// launch template AMI's architecture, and allowed by the claim's patterns.
func (c *Claimer) resolveInstanceTypes(ctx context.Context, f *protocol.FleetConfig, class protocol.ResourceClass, patterns []string) ([]string, error) {
	arch, err := c.templateArchitecture(ctx, f)
	if err != nil {
		return nil, err
	}
	var types []string
	p := ec2.NewDescribeInstanceTypesPaginator(c.EC2, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{
		{Name: aws.String("vcpu-info.default-vcpus"), Values: []string{fmt.Sprint(class.CPU)}},
		{Name: aws.String("processor-info.supported-architecture"), Values: []string{arch}},
		{Name: aws.String("burstable-performance-supported"), Values: []string{"false"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstanceTypes: %w", err)
		}
		for _, it := range page.InstanceTypes {
			name := string(it.InstanceType)
			if it.MemoryInfo != nil && aws.ToInt64(it.MemoryInfo.SizeInMiB) >= int64(class.MemoryMiB) && MatchInstanceType(patterns, name) {
				types = append(types, name)
			}
		}
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("no %s instance type has %d vCPUs, at least %d MiB and matches %v", arch, class.CPU, class.MemoryMiB, patterns)
	}
	sort.Strings(types)
	return types, nil
}

// CheckTemplateTag makes sure the pool's launch template lt is tagged for
// the pool, and returns the template and version the fleet launches: the config item
// names the template, and anyone who may write the table could change it;
// the tag is set by whoever manages the template (and IAM pins CreateFleet
// on it, aws:ResourceTag/ec2runners:pool).
func CheckTemplateTag(lt ec2types.LaunchTemplate, poolName string, f *protocol.FleetConfig) (TemplateRef, error) {
	for _, tag := range lt.Tags {
		if aws.ToString(tag.Key) == protocol.TagPool && aws.ToString(tag.Value) == poolName {
			return templateRef(lt, f), nil
		}
	}
	ref := cmp.Or(f.LaunchTemplateID, f.LaunchTemplateName)
	return TemplateRef{}, fmt.Errorf("launch template %s does not carry the tag %s = %s: pool %s launches only templates tagged for it; add the tag to the launch template", ref, protocol.TagPool, poolName, poolName)
}

// templateArchitecture is the architecture of the launch template's AMI.
func (c *Claimer) templateArchitecture(ctx context.Context, f *protocol.FleetConfig) (string, error) {
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{f.LaunchTemplateVersion}}
	if f.LaunchTemplateID != "" {
		in.LaunchTemplateId = aws.String(f.LaunchTemplateID)
	} else {
		in.LaunchTemplateName = aws.String(f.LaunchTemplateName)
	}
	out, err := c.EC2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return "", fmt.Errorf("reading the launch template: %w", err)
	}
	if len(out.LaunchTemplateVersions) == 0 || out.LaunchTemplateVersions[0].LaunchTemplateData == nil || out.LaunchTemplateVersions[0].LaunchTemplateData.ImageId == nil {
		return "", errors.New("explicit instance selection needs an AMI id in the launch template, to know its architecture")
	}
	image := aws.ToString(out.LaunchTemplateVersions[0].LaunchTemplateData.ImageId)
	imgs, err := c.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{image}})
	if err != nil {
		return "", fmt.Errorf("reading AMI %s: %w", image, err)
	}
	if len(imgs.Images) == 0 || imgs.Images[0].Architecture == "" {
		return "", fmt.Errorf("AMI %s of the launch template has no known architecture", image)
	}
	return string(imgs.Images[0].Architecture), nil
}

func isTableMissing(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "ResourceNotFoundException"
}

// terminateUnrecorded terminates the instances a run's fleet requests
// launched (tagged InitialRunId) that have no record: a CreateFleet whose
// answer never arrived, or an attempt killed before it recorded them.
func (c *Claimer) terminateUnrecorded(ctx context.Context, s *store, poolName, runID string) ([]string, error) {
	launched, err := pool.LiveInstances(ctx, c.EC2, poolName, ec2types.Filter{Name: aws.String("tag:" + protocol.TagInitialRunID), Values: []string{runID}})
	if err != nil {
		return nil, fmt.Errorf("looking for unrecorded instances of run %s: %w", runID, err)
	}
	ids := slices.Sorted(maps.Keys(launched))
	records, err := s.instances(ctx, ids)
	if err != nil {
		return nil, err
	}
	var unrecorded []string
	for _, id := range ids {
		if _, ok := records[id]; !ok {
			unrecorded = append(unrecorded, id)
		}
	}
	if len(unrecorded) > 0 {
		c.log("terminating unrecorded instances of the run", "run", runID, "instances", unrecorded)
	}
	return unrecorded, pool.TerminateInstances(ctx, c.EC2, unrecorded, false)
}
