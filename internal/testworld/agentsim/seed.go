package agentsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/emulator"
)

// Defaults of SeedSpec.
const (
	DefaultSeedInstanceType = "c6i.large"
	DefaultSeedIdleTimeout  = 7 * time.Minute
)

// SeedSpec describes the idle runners SeedIdle creates.
type SeedSpec struct {
	// ResourceClass is required.
	ResourceClass string
	// InstanceType defaults to DefaultSeedInstanceType.
	InstanceType string
	// UsageClass defaults to on-demand.
	UsageClass string
	// CPU and MemoryMiB (for the queue message) default to the seeds'
	// default class of the same name; they are required for other classes.
	CPU, MemoryMiB int
	// IdleTimeout sets the threshold (now + IdleTimeout) of the record and
	// message; default DefaultSeedIdleTimeout. Negative values are kept, for
	// runners already past their deadline.
	IdleTimeout time.Duration
	// Behavior of the agents started for the instances.
	Behavior Behavior
	// QueueURL of the resource class's queue; by default it is looked up by
	// protocol.QueueName.
	QueueURL string
}

// SeedIdle makes n idle runners, as if a claim had released them: it launches
// n instances (one RunInstances, tagged with the pool, AllowSelfTermination
// and TagSeeded), writes an `idle` instance record for each, starts its agent
// (with the first heartbeat already written, unless NoHeartbeat), and then
// sends the queue messages. It returns the instance ids, also on error (those
// launched so far). The image is any the emulator offers (emulator.Image).
// The agents run until ctx is done or Stop.
func (s *Sim) SeedIdle(ctx context.Context, n int, spec SeedSpec) ([]string, error) {
	if n <= 0 {
		return nil, fmt.Errorf("agentsim: SeedIdle needs n > 0, got %d", n)
	}
	if spec.ResourceClass == "" {
		return nil, errors.New("agentsim: SeedSpec.ResourceClass is required")
	}
	if spec.InstanceType == "" {
		spec.InstanceType = DefaultSeedInstanceType
	}
	if spec.UsageClass == "" {
		spec.UsageClass = protocol.UsageOnDemand
	}
	if spec.CPU == 0 && spec.MemoryMiB == 0 {
		rc, ok := protocol.DefaultResourceClasses()[spec.ResourceClass]
		if !ok {
			return nil, fmt.Errorf("agentsim: SeedSpec for resource class %q needs CPU and MemoryMiB", spec.ResourceClass)
		}
		spec.CPU, spec.MemoryMiB = rc.CPU, rc.MemoryMiB
	}
	if spec.IdleTimeout == 0 {
		spec.IdleTimeout = DefaultSeedIdleTimeout
	}
	if s.ctx.Err() != nil {
		return nil, errors.New("agentsim: Sim is stopped")
	}
	if s.c.SQS == nil {
		return nil, errors.New("agentsim: SeedIdle needs an SQS client")
	}
	r, err := s.settings(ctx)
	if err != nil {
		return nil, fmt.Errorf("agentsim: %w", err)
	}
	queueURL := spec.QueueURL
	if queueURL == "" {
		out, err := s.c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(protocol.QueueName(s.pool, spec.ResourceClass))})
		if err != nil {
			return nil, fmt.Errorf("agentsim: looking up the queue of resource class %q: %w", spec.ResourceClass, err)
		}
		queueURL = aws.ToString(out.QueueUrl)
	}

	image, err := emulator.Image(ctx, s.c.EC2)
	if err != nil {
		return nil, fmt.Errorf("agentsim: %w", err)
	}
	run, err := s.c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{
		ImageId:      aws.String(image),
		InstanceType: ec2types.InstanceType(spec.InstanceType),
		MinCount:     aws.Int32(int32(n)),
		MaxCount:     aws.Int32(int32(n)),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{
				{Key: aws.String(protocol.TagPool), Value: aws.String(s.pool)},
				{Key: aws.String(protocol.TagAllowSelfTermination), Value: aws.String("true")},
				{Key: aws.String(TagSeeded), Value: aws.String("seed")},
			},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("agentsim: launching %d instances: %w", n, err)
	}
	var ids []string
	for _, inst := range run.Instances {
		ids = append(ids, aws.ToString(inst.InstanceId))
	}
	if len(ids) != n {
		return ids, fmt.Errorf("agentsim: RunInstances launched %d instances, want %d", len(ids), n)
	}

	now := time.Now()
	threshold := protocol.FormatTime(now.Add(spec.IdleTimeout))
	msgs := make([]sqstypes.SendMessageBatchRequestEntry, 0, n)
	for i, id := range ids {
		rec := protocol.Instance{
			ID: id, State: protocol.StateIdle, RunID: "", Threshold: threshold,
			ResourceClass: spec.ResourceClass, InstanceType: spec.InstanceType, UsageClass: spec.UsageClass,
			UpdatedAt: protocol.FormatTime(now),
		}
		if _, err := s.c.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(protocol.TableName(s.pool)),
			Item:      rec.Item(),
		}); err != nil {
			return ids, fmt.Errorf("agentsim: writing the instance record of %s: %w", id, err)
		}
		a := s.newAgent(id, spec.Behavior, r)
		if a == nil {
			return ids, fmt.Errorf("agentsim: cannot start an agent for %s: Sim stopped or agent exists", id)
		}
		a.described = true // running, and without an InitialRunId tag: launched just now
		if err := a.prime(ctx); err != nil {
			return ids, fmt.Errorf("agentsim: the first heartbeat of %s: %w", id, err)
		}
		s.run(ctx, a)
		msgs = append(msgs, sqstypes.SendMessageBatchRequestEntry{
			Id: aws.String("m" + strconv.Itoa(i)),
			MessageBody: aws.String(protocol.Message{
				ID: id, ResourceClass: spec.ResourceClass, InstanceType: spec.InstanceType,
				CPU: spec.CPU, MemoryMiB: spec.MemoryMiB, UsageClass: spec.UsageClass, Threshold: threshold,
			}.Body()),
		})
	}
	for batch := range slices.Chunk(msgs, 10) {
		out, err := s.c.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: batch})
		if err != nil {
			return ids, fmt.Errorf("agentsim: sending queue messages: %w", err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return ids, fmt.Errorf("agentsim: %d queue messages failed, first: %s %s", len(out.Failed), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return ids, nil
}

// WatchFleet starts, in the background, a watcher that polls DescribeInstances
// (instances tagged with the pool, pending or running) every
// FleetWatchInterval and starts an agent for each instance that has none yet:
// this is how instances launched by a claim's CreateFleet, or to fill the
// pool's targets, get agents. An instance that stopped and was started again
// keeps its agent, which boots again. Instances launched by SeedIdle
// (TagSeeded) are left alone. choose (nil: always Healthy) picks the
// behaviour; index counts the agents this watcher started, from 0, in launch
// order. The watcher runs until ctx is done or Stop.
func (s *Sim) WatchFleet(ctx context.Context, choose func(instanceID string, index int) Behavior) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
		s.watchFleet(wctx, choose)
	}()
}

func (s *Sim) watchFleet(ctx context.Context, choose func(string, int) Behavior) {
	index := 0
	lastErr := ""
	t := time.NewTicker(s.opts.FleetWatchInterval)
	defer t.Stop()
	for {
		found, err := s.fleetInstances(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			err = fmt.Errorf("agentsim: watching the fleet of pool %s: %w", s.pool, err)
			s.recordErr(err)
			if key := ErrorKey(err); key != lastErr {
				lastErr = key
				s.logf("%v (retrying)", err)
			}
		case err == nil:
			lastErr = ""
		}
		for _, id := range found {
			if s.hasAgent(id) {
				continue
			}
			b := Healthy
			if choose != nil {
				b = choose(id, index)
			}
			if s.Start(ctx, id, b) {
				index++
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sim) hasAgent(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agents[id] != nil
}

// fleetInstances lists the pool's pending or running instances not seeded by
// SeedIdle, by launch time, then launch index, then id.
func (s *Sim) fleetInstances(ctx context.Context) ([]string, error) {
	type found struct {
		id     string
		launch time.Time
		index  int32
	}
	var all []found
	p := ec2.NewDescribeInstancesPaginator(s.c.EC2, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + protocol.TagPool), Values: []string{s.pool}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
		},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range out.Reservations {
			for _, inst := range r.Instances {
				if tagValue(inst.Tags, TagSeeded) != "" {
					continue
				}
				all = append(all, found{aws.ToString(inst.InstanceId), aws.ToTime(inst.LaunchTime), aws.ToInt32(inst.AmiLaunchIndex)})
			}
		}
	}
	slices.SortFunc(all, func(a, b found) int {
		if c := a.launch.Compare(b.launch); c != 0 {
			return c
		}
		if a.index != b.index {
			return int(a.index - b.index)
		}
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	ids := make([]string, len(all))
	for i, f := range all {
		ids[i] = f.id
	}
	return ids, nil
}
