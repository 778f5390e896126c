package pool

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/retry"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// ListInstances returns every instance record of a pool, terminated ones included.
func ListInstances(ctx context.Context, db table.Querier, pool string) ([]protocol.Instance, error) {
	var out []protocol.Instance
	var corrupt error
	err := table.Partition(ctx, db, protocol.TableName(pool), protocol.TypeInstance, func(item table.Item) error {
		inst, err := protocol.InstanceFromItem(item)
		if err != nil {
			corrupt = fmt.Errorf("pool %s: %w", pool, err)
			return corrupt
		}
		out = append(out, inst)
		return nil
	})
	switch {
	case corrupt != nil:
		return nil, corrupt
	case err != nil:
		return nil, fmt.Errorf("listing instance records of pool %s: %w", pool, err)
	}
	return out, nil
}

// liveInstances are the records not yet terminated, of one class or of all when class is "".
func liveInstances(all []protocol.Instance, class string) []protocol.Instance {
	var live []protocol.Instance
	for _, inst := range all {
		if inst.State != protocol.StateTerminated && (class == "" || inst.ResourceClass == class) {
			live = append(live, inst)
		}
	}
	return live
}

// describeInstances lists instances as "i-1 (idle), i-2 (running, run r-7)".
func describeInstances(insts []protocol.Instance) string {
	parts := make([]string, 0, len(insts))
	for _, inst := range insts {
		if inst.RunID != "" {
			parts = append(parts, fmt.Sprintf("%s (%s, run %s)", inst.ID, inst.State, inst.RunID))
		} else {
			parts = append(parts, fmt.Sprintf("%s (%s)", inst.ID, inst.State))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Terminator terminates EC2 instances.
type Terminator interface {
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// instanceVisibleWithin bounds EC2's eventual consistency: an instance
// launched moments ago can be unknown to EC2's API for a while (AWS: "might
// not have propagated throughout the system"; usually seconds).
const instanceVisibleWithin = 2 * time.Minute

// TerminateInstances terminates ids. An instance EC2 does not know is gone
// (terminated over an hour ago, or never launched), unless justLaunched:
// then EC2 may not know it yet, and its termination is retried until EC2
// does, for up to instanceVisibleWithin. Counting such an instance as
// terminated would leave it running, paid for and unrecorded.
func TerminateInstances(ctx context.Context, client Terminator, ids []string, justLaunched bool) error {
	const batch = awslimits.MaxTerminateInstanceIDs
	for start := 0; start < len(ids); start += batch {
		chunk := ids[start:min(start+batch, len(ids))]
		if len(chunk) == 1 && justLaunched {
			if err := terminateOnceKnown(ctx, client, chunk[0]); err != nil {
				return err
			}
			continue
		}
		_, err := client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: chunk})
		if err == nil {
			continue
		}
		notFound := HasErrorCode(err, "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed")
		switch {
		case notFound && len(chunk) == 1:
		case notFound:
			// One unknown id fails the whole call: go one by one for the rest.
			for _, id := range chunk {
				if err := TerminateInstances(ctx, client, []string{id}, justLaunched); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("terminating instances %s: %w", strings.Join(chunk, ", "), err)
		}
	}
	return nil
}

// terminateOnceKnown terminates a just-launched instance, again with
// backoff while EC2 does not know it yet, until EC2 knows it or
// instanceVisibleWithin has passed.
func terminateOnceKnown(ctx context.Context, client Terminator, id string) error {
	giveUp := time.Now().Add(instanceVisibleWithin)
	whileUnknown := retry.Policy{Backoff: retry.Backoff{First: 500 * time.Millisecond, Max: 5 * time.Second}}
	return retry.Do(ctx, whileUnknown, func() error {
		_, err := client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		switch {
		case err == nil:
			return nil
		case !HasErrorCode(err, "InvalidInstanceID.NotFound"):
			return retry.Permanent(fmt.Errorf("terminating instance %s: %w", id, err))
		case time.Now().After(giveUp):
			return retry.Permanent(fmt.Errorf("terminating instance %s, launched moments ago: EC2 still does not know it after %s", id, instanceVisibleWithin))
		}
		return fmt.Errorf("terminating instance %s, launched moments ago and not yet known to EC2: %w", id, err)
	})
}

// markTerminated records that an instance is gone, whatever state it was in.
func (m *Manager) markTerminated(ctx context.Context, pool, id string, now time.Time) error {
	_, err := m.DynamoDB.UpdateItem(ctx, table.MarkTerminated(protocol.TableName(pool), id, now))
	if err != nil {
		return fmt.Errorf("marking instance %s terminated: %w", id, err)
	}
	return nil
}

// forceTerminate terminates live instances and marks their records.
func (m *Manager) forceTerminate(ctx context.Context, pool string, insts []protocol.Instance, now time.Time) error {
	ids := make([]string, len(insts))
	for i, inst := range insts {
		ids[i] = inst.ID
	}
	if err := TerminateInstances(ctx, m.EC2, ids, false); err != nil {
		return err
	}
	for _, id := range ids {
		if err := m.markTerminated(ctx, pool, id, now); err != nil {
			return err
		}
	}
	return nil
}

// InstanceDescriber lists EC2 instances.
type InstanceDescriber interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// LiveInstances are the instances tagged for the pool that EC2 has not
// terminated, with their launch times; more filters narrow them down.
func LiveInstances(ctx context.Context, client InstanceDescriber, pool string, more ...ec2types.Filter) (map[string]time.Time, error) {
	filters := append([]ec2types.Filter{
		{Name: aws.String("tag:" + protocol.TagPool), Values: []string{pool}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
	}, more...)
	out := map[string]time.Time{}
	p := ec2.NewDescribeInstancesPaginator(client, &ec2.DescribeInstancesInput{Filters: filters})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the instances of pool %s: %w", pool, err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				out[aws.ToString(inst.InstanceId)] = aws.ToTime(inst.LaunchTime)
			}
		}
	}
	return out, nil
}
