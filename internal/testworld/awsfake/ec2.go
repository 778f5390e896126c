package awsfake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// EC2 launches instant fleets, describes a catalogue of instance types
// (applying the filters it understands) and records terminations.
type EC2 struct {
	Mu sync.Mutex
	// Pool is the pool whose tag every instance and the launch template
	// carry.
	Pool string
	// Now is the clock of launch times (nil: time.Now).
	Now func() time.Time

	// Live are the instances EC2 runs, with their launch times: fleet
	// launches add to it, terminations remove from it.
	Live map[string]time.Time
	// Stopped are the live instances that are stopped.
	Stopped map[string]bool
	// OnStart runs, without the lock, for every instance StartInstances
	// started: its agent boots.
	OnStart func(id string)
	// StartErr fails StartInstances.
	StartErr error
	// LtVersion is the launch template's latest and default version
	// number (0: 1).
	LtVersion int64
	// LtID is the launch template's id ("": lt-0123), and LtCreated when
	// it was created (zero: 2020-01-01): a template replaced by another
	// has a new id and creation time.
	LtID      string
	LtCreated time.Time

	Fleets []*ec2.CreateFleetInput
	// Runs are the RunInstances calls EC2 carried out.
	Runs []*ec2.RunInstancesInput
	// InitialRunIDs are the InitialRunId tags of the instances fleets
	// launched.
	InitialRunIDs map[string]string
	// OnFleet runs (under the lock) at every CreateFleet, with its input;
	// LaunchOfFleetLocked launches an instance of that fleet from it.
	OnFleet func(in *ec2.CreateFleetInput)
	// ShortBy launches this many fewer instances than asked, with an
	// InsufficientInstanceCapacity error entry.
	ShortBy int
	// Capacity, when it has a usage class ("spot", "on-demand"), is how
	// many instances of that class one CreateFleet can launch: a fleet of
	// that default capacity type asking for more launches that many and
	// answers the rest with ShortError (as EC2 answers an instant fleet it
	// cannot fill: the call succeeds).
	Capacity map[string]int
	// ShortError is the Errors[] entry of a fleet short of Capacity, by
	// usage class (none: InsufficientInstanceCapacity).
	ShortError map[string]ec2types.CreateFleetError
	FleetErr   error
	nextID     int
	GroupSize  int // instance ids per CreateFleetInstance entry (AWS groups them)

	Catalog       []ec2types.InstanceTypeInfo
	PageSize      int
	TypeInputs    []*ec2.DescribeInstanceTypesInput
	LtImage       string // "" : the template has no AMI
	LtInputs      []*ec2.DescribeLaunchTemplateVersionsInput
	LtTags        map[string]string // the launch template's tags; nil: tagged for the test pool
	LtMissing     bool              // DescribeLaunchTemplates finds no template
	LtDescribes   []*ec2.DescribeLaunchTemplatesInput
	Images        map[string]ec2types.ArchitectureValues
	ImageInputs   []*ec2.DescribeImagesInput
	Terminated    []string
	StartedIDs    []string      // instances StartInstances started, in order
	TerminateErrs map[int]error // n-th TerminateInstances call fails
	TerminateN    int
	// UnseenCalls: EC2's eventual consistency; the first calls naming a
	// fleet's new instance answer InvalidInstanceID.NotFound.
	UnseenCalls int
	Unseen      map[string]int
	// Gone are instances EC2 no longer knows (terminated over an hour ago,
	// or never launched): a TerminateInstances naming any fails as a whole
	// with InvalidInstanceID.NotFound, naming them all.
	Gone map[string]bool
	// Denied are instances the caller may not terminate
	// (UnauthorizedOperation).
	Denied map[string]bool
	// Log, when set, records the calls with other fakes'.
	Log *Log
}

func (e *EC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	if err := limits(ctx, "ec2", "CreateFleet", in, func(ctx context.Context) error { return sdkErr(ec2Limits.CreateFleet(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "CreateFleet", in)
	defer e.Mu.Unlock()
	e.Fleets = append(e.Fleets, in)
	if e.OnFleet != nil {
		e.OnFleet(in)
	}
	if e.FleetErr != nil {
		return nil, e.FleetErr
	}
	if in.Type != ec2types.FleetTypeInstant || in.TargetCapacitySpecification == nil || len(in.LaunchTemplateConfigs) != 1 {
		return nil, errors.New("fake ec2: only single-template instant fleets are supported")
	}
	overrides := in.LaunchTemplateConfigs[0].Overrides
	if len(overrides) == 0 {
		return nil, errors.New("fake ec2: no overrides")
	}
	typ := ec2types.InstanceType("c6i.large")
	if overrides[0].InstanceType != "" {
		typ = overrides[0].InstanceType
	}
	lifecycle := string(in.TargetCapacitySpecification.DefaultTargetCapacityType)
	n := int(aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity)) - e.ShortBy
	out := &ec2.CreateFleetOutput{FleetId: aws.String("fleet-1")}
	if have, limited := e.Capacity[lifecycle]; limited && n > have {
		n = max(0, have)
		short, ok := e.ShortError[lifecycle]
		if !ok {
			short = ec2types.CreateFleetError{ErrorCode: aws.String("InsufficientInstanceCapacity"), ErrorMessage: aws.String("not enough capacity")}
		}
		short.Lifecycle = ec2types.InstanceLifecycle(lifecycle)
		out.Errors = append(out.Errors, short)
	}
	group := max(1, e.GroupSize)
	for i := 0; i < n; i++ {
		e.nextID++
		id := fmt.Sprintf("i-f%d", e.nextID)
		e.LaunchOfFleetLocked(id, in)
		if e.UnseenCalls > 0 {
			if e.Unseen == nil {
				e.Unseen = map[string]int{}
			}
			e.Unseen[id] = e.UnseenCalls
		}
		if i%group == 0 {
			out.Instances = append(out.Instances, ec2types.CreateFleetInstance{InstanceType: typ, Lifecycle: ec2types.InstanceLifecycle(lifecycle)})
		}
		last := &out.Instances[len(out.Instances)-1]
		last.InstanceIds = append(last.InstanceIds, id)
	}
	if e.ShortBy > 0 {
		out.Errors = append(out.Errors, ec2types.CreateFleetError{ErrorCode: aws.String("InsufficientInstanceCapacity"), ErrorMessage: aws.String("not enough capacity")})
	}
	return out, nil
}

// LaunchOfFleetLocked launches instance id as fleet in launches its
// instances: tagged with its InitialRunId. The caller holds Mu.
func (e *EC2) LaunchOfFleetLocked(id string, in *ec2.CreateFleetInput) {
	e.LaunchLocked(id, e.now())
	if e.InitialRunIDs == nil {
		e.InitialRunIDs = map[string]string{}
	}
	for _, spec := range in.TagSpecifications {
		for _, tag := range spec.Tags {
			if aws.ToString(tag.Key) == protocol.TagInitialRunID {
				e.InitialRunIDs[id] = aws.ToString(tag.Value)
			}
		}
	}
}

// RunInstances launches MaxCount instances, after refusing what EC2
// refuses (internal/awslimits: user data over 16 KB, or not base64...)
// with EC2's own error.
func (e *EC2) RunInstances(ctx context.Context, in *ec2.RunInstancesInput, _ ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	if err := limits(ctx, "ec2", "RunInstances", in, func(ctx context.Context) error { return sdkErr(ec2Limits.RunInstances(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "RunInstances", in)
	defer e.Mu.Unlock()
	e.Runs = append(e.Runs, in)
	out := &ec2.RunInstancesOutput{}
	for range aws.ToInt32(in.MaxCount) {
		e.nextID++
		id := fmt.Sprintf("i-r%d", e.nextID)
		e.LaunchLocked(id, e.now())
		out.Instances = append(out.Instances, ec2types.Instance{InstanceId: aws.String(id), InstanceType: in.InstanceType})
	}
	return out, nil
}

func (e *EC2) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	if err := limits(ctx, "ec2", "DescribeInstanceTypes", in, func(ctx context.Context) error { return sdkErr(ec2Limits.DescribeInstanceTypes(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "DescribeInstanceTypes", in)
	defer e.Mu.Unlock()
	e.TypeInputs = append(e.TypeInputs, in)
	var match []ec2types.InstanceTypeInfo
	for _, it := range e.Catalog {
		ok := true
		for _, f := range in.Filters {
			var have []string
			switch aws.ToString(f.Name) {
			case "vcpu-info.default-vcpus":
				have = []string{strconv.Itoa(int(aws.ToInt32(it.VCpuInfo.DefaultVCpus)))}
			case "processor-info.supported-architecture":
				for _, a := range it.ProcessorInfo.SupportedArchitectures {
					have = append(have, string(a))
				}
			case "burstable-performance-supported":
				have = []string{strconv.FormatBool(aws.ToBool(it.BurstablePerformanceSupported))}
			default:
				return nil, fmt.Errorf("fake ec2: unsupported filter %s", aws.ToString(f.Name))
			}
			hit := false
			for _, v := range f.Values {
				hit = hit || slices.Contains(have, v)
			}
			ok = ok && hit
		}
		if ok {
			match = append(match, it)
		}
	}
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(aws.ToString(in.NextToken))
	}
	size := e.PageSize
	if size == 0 {
		size = len(match) + 1
	}
	end := min(start+size, len(match))
	out := &ec2.DescribeInstanceTypesOutput{InstanceTypes: match[start:end]}
	if end < len(match) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

func (e *EC2) DescribeLaunchTemplateVersions(ctx context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	if err := limits(ctx, "ec2", "DescribeLaunchTemplateVersions", in, func(ctx context.Context) error { return sdkErr(ec2Limits.DescribeLaunchTemplateVersions(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "DescribeLaunchTemplateVersions", in)
	defer e.Mu.Unlock()
	e.LtInputs = append(e.LtInputs, in)
	data := &ec2types.ResponseLaunchTemplateData{}
	if e.LtImage != "" {
		data.ImageId = aws.String(e.LtImage)
	}
	return &ec2.DescribeLaunchTemplateVersionsOutput{LaunchTemplateVersions: []ec2types.LaunchTemplateVersion{{LaunchTemplateData: data}}}, nil
}

// DescribeLaunchTemplates describes the one launch template there is, by
// whatever id or name it is asked for, as EC2 does: an unknown one is an
// error.
func (e *EC2) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	if err := limits(ctx, "ec2", "DescribeLaunchTemplates", in, func(ctx context.Context) error { return sdkErr(ec2Limits.DescribeLaunchTemplates(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "DescribeLaunchTemplates", in)
	defer e.Mu.Unlock()
	e.LtDescribes = append(e.LtDescribes, in)
	if len(in.LaunchTemplateIds)+len(in.LaunchTemplateNames) != 1 {
		return nil, errors.New("fake ec2: DescribeLaunchTemplates of exactly one id or name is supported")
	}
	if e.LtMissing {
		return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateId.NotFound", Message: "the launch template does not exist"}
	}
	tags := e.LtTags
	if tags == nil {
		tags = map[string]string{protocol.TagPool: e.Pool}
	}
	version := max(1, e.LtVersion)
	id, created := e.LtID, e.LtCreated
	if id == "" {
		id = "lt-0123"
	}
	if created.IsZero() {
		created = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	lt := ec2types.LaunchTemplate{LaunchTemplateId: aws.String(id), LaunchTemplateName: aws.String("runners"), CreateTime: aws.Time(created),
		LatestVersionNumber: aws.Int64(version), DefaultVersionNumber: aws.Int64(version)}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		lt.Tags = append(lt.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return &ec2.DescribeLaunchTemplatesOutput{LaunchTemplates: []ec2types.LaunchTemplate{lt}}, nil
}

func (e *EC2) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	if err := limits(ctx, "ec2", "DescribeImages", in, func(ctx context.Context) error { return sdkErr(ec2Limits.DescribeImages(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "DescribeImages", in)
	defer e.Mu.Unlock()
	e.ImageInputs = append(e.ImageInputs, in)
	out := &ec2.DescribeImagesOutput{}
	for _, id := range in.ImageIds {
		if arch, ok := e.Images[id]; ok {
			out.Images = append(out.Images, ec2types.Image{ImageId: aws.String(id), Architecture: arch})
		}
	}
	return out, nil
}

func (e *EC2) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	if err := limits(ctx, "ec2", "TerminateInstances", in, func(ctx context.Context) error { return sdkErr(ec2Limits.TerminateInstances(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "TerminateInstances", in)
	defer e.Mu.Unlock()
	e.TerminateN++
	if err := e.TerminateErrs[e.TerminateN]; err != nil {
		return nil, err
	}
	for _, id := range in.InstanceIds {
		if e.Unseen[id] > 0 {
			e.Unseen[id]--
			return nil, notFound(id)
		}
	}
	if gone := slices.DeleteFunc(slices.Clone(in.InstanceIds), func(id string) bool { return !e.Gone[id] }); len(gone) > 0 {
		return nil, notFound(gone...)
	}
	if slices.ContainsFunc(in.InstanceIds, func(id string) bool { return e.Denied[id] }) {
		return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation.", Fault: smithy.FaultClient}
	}
	e.Terminated = append(e.Terminated, in.InstanceIds...)
	for _, id := range in.InstanceIds {
		delete(e.Live, id)
		delete(e.Stopped, id)
	}
	return &ec2.TerminateInstancesOutput{}, nil
}

// Launch adds an instance EC2 runs, as if launched at at.
func (e *EC2) Launch(id string, at time.Time) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	e.LaunchLocked(id, at)
}

// LaunchLocked is Launch with Mu held (from OnFleet).
func (e *EC2) LaunchLocked(id string, at time.Time) {
	if e.Live == nil {
		e.Live = map[string]time.Time{}
	}
	e.Live[id] = at
}

// DescribeInstances lists the live instances, all or those named. A
// listing applies its filters as EC2 does (an instance matches every
// filter, and a filter when it has any of the filter's values): the pool's
// tag, which every fake instance carries, the InitialRunId tag of the
// fleets' instances and the state. A named instance EC2 never ran is an
// error, as on AWS; a terminated one is listed as such.
func (e *EC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if err := limits(ctx, "ec2", "DescribeInstances", in, func(ctx context.Context) error { return sdkErr(ec2Limits.DescribeInstances(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "DescribeInstances", in)
	defer e.Mu.Unlock()
	var r ec2types.Reservation
	describe := func(id string, state ec2types.InstanceStateName) {
		r.Instances = append(r.Instances, ec2types.Instance{InstanceId: aws.String(id), LaunchTime: aws.Time(e.Live[id]), State: &ec2types.InstanceState{Name: state}})
	}
	if len(in.InstanceIds) > 0 {
		for _, id := range in.InstanceIds {
			switch {
			case e.Stopped[id]:
				describe(id, ec2types.InstanceStateNameStopped)
			case !e.Live[id].IsZero():
				describe(id, ec2types.InstanceStateNameRunning)
			case slices.Contains(e.Terminated, id):
				describe(id, ec2types.InstanceStateNameTerminated)
			default:
				return nil, notFound(id)
			}
		}
		return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
	}
	var tagged, live bool
	for _, f := range in.Filters {
		tagged = tagged || aws.ToString(f.Name) == "tag:"+protocol.TagPool
		live = live || aws.ToString(f.Name) == "instance-state-name"
	}
	if !tagged || !live {
		return nil, errors.New("fake ec2: DescribeInstances without the pool tag and state filters")
	}
	for _, id := range slices.Sorted(maps.Keys(e.Live)) {
		state := ec2types.InstanceStateNameRunning
		if e.Stopped[id] {
			state = ec2types.InstanceStateNameStopped
		}
		match, err := e.matches(id, state, in.Filters)
		if err != nil {
			return nil, err
		}
		if match {
			describe(id, state)
		}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
}

// matches says whether live instance id, in state, passes every filter.
func (e *EC2) matches(id string, state ec2types.InstanceStateName, filters []ec2types.Filter) (bool, error) {
	for _, f := range filters {
		var have string
		switch name := aws.ToString(f.Name); name {
		case "tag:" + protocol.TagPool:
			have = e.Pool
		case "tag:" + protocol.TagInitialRunID:
			have = e.InitialRunIDs[id]
		case "instance-state-name":
			have = string(state)
		default:
			return false, fmt.Errorf("fake ec2: unsupported filter %s", name)
		}
		if !slices.Contains(f.Values, have) {
			return false, nil
		}
	}
	return true, nil
}

// notFound is EC2's answer to a call naming instances it does not know.
func notFound(ids ...string) error {
	if len(ids) == 1 {
		return &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance ID '%s' does not exist", ids[0])}
	}
	return &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(ids, ", "))}
}

// StopInstances stops live instances.
func (e *EC2) StopInstances(ctx context.Context, in *ec2.StopInstancesInput, _ ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error) {
	if err := limits(ctx, "ec2", "StopInstances", in, func(ctx context.Context) error { return sdkErr(ec2Limits.StopInstances(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "StopInstances", in)
	defer e.Mu.Unlock()
	for _, id := range in.InstanceIds {
		if e.Live[id].IsZero() {
			return nil, notFound(id)
		}
	}
	for _, id := range in.InstanceIds {
		e.StopLocked(id)
	}
	return &ec2.StopInstancesOutput{}, nil
}

// StopLocked stops a live instance, with Mu held.
func (e *EC2) StopLocked(id string) {
	if e.Stopped == nil {
		e.Stopped = map[string]bool{}
	}
	e.Stopped[id] = true
}

// StartInstances starts stopped instances (a running one stays running, as
// on AWS) and lets their agents boot (OnStart).
func (e *EC2) StartInstances(ctx context.Context, in *ec2.StartInstancesInput, _ ...func(*ec2.Options)) (*ec2.StartInstancesOutput, error) {
	if err := limits(ctx, "ec2", "StartInstances", in, func(ctx context.Context) error { return sdkErr(ec2Limits.StartInstances(ctx, in)) }); err != nil {
		return nil, err
	}
	e.Mu.Lock()
	e.Log.record("ec2", "StartInstances", in)
	if e.StartErr != nil {
		e.Mu.Unlock()
		return nil, e.StartErr
	}
	for _, id := range in.InstanceIds {
		if e.Live[id].IsZero() {
			e.Mu.Unlock()
			return nil, notFound(id)
		}
	}
	var started []string
	for _, id := range in.InstanceIds {
		if e.Stopped[id] {
			delete(e.Stopped, id)
			started = append(started, id)
		}
	}
	e.StartedIDs = append(e.StartedIDs, started...)
	onStart := e.OnStart
	e.Mu.Unlock()
	if onStart != nil {
		for _, id := range started {
			onStart(id)
		}
	}
	return &ec2.StartInstancesOutput{}, nil
}

// TerminatedIDs are the instances TerminateInstances ended, sorted.
func (e *EC2) TerminatedIDs() []string {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	ids := slices.Clone(e.Terminated)
	sort.Strings(ids)
	return ids
}

// FleetInputs are the CreateFleet calls, in order.
func (e *EC2) FleetInputs() []*ec2.CreateFleetInput {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	return slices.Clone(e.Fleets)
}

func InstanceTypeInfo(name string, vcpus int32, mib int64, burstable bool, archs ...ec2types.ArchitectureType) ec2types.InstanceTypeInfo {
	return ec2types.InstanceTypeInfo{
		InstanceType:                  ec2types.InstanceType(name),
		VCpuInfo:                      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(vcpus)},
		MemoryInfo:                    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(mib)},
		ProcessorInfo:                 &ec2types.ProcessorInfo{SupportedArchitectures: archs},
		BurstablePerformanceSupported: aws.Bool(burstable),
	}
}

func (e *EC2) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}
