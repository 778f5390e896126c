package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/metrics"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Spec is the desired state of a pool.
type Spec struct {
	Name            string
	ResourceClasses map[string]protocol.ResourceClass
	IdleTimeout     time.Duration
	MaxRuntime      time.Duration
	MaxRunnerAge    time.Duration
	Fleet           *protocol.FleetConfig
	GitHub          *protocol.GitHubTarget
	// GitHubCredential is where the pool keeps the GitHub credential of
	// its claims (nil: they bring their own).
	GitHubCredential *protocol.GitHubCredential
	Warm             map[string]protocol.WarmTarget
	Metrics          *protocol.MetricsConfig // nil: no metrics
	Access           *protocol.Access        // nil: no broker policy
	Tags             map[string]string       // already merged with provider default tags
	ForceDestroy     bool
}

func (s Spec) config(queueURLs map[string]string, instanceARNPrefix string) protocol.PoolConfig {
	return protocol.PoolConfig{
		Name:              s.Name,
		ResourceClasses:   s.ResourceClasses,
		IdleTimeout:       protocol.Duration(s.IdleTimeout),
		MaxRuntime:        protocol.Duration(s.MaxRuntime),
		MaxRunnerAge:      protocol.Duration(s.MaxRunnerAge),
		Fleet:             s.Fleet,
		QueueURLs:         queueURLs,
		GitHub:            s.GitHub,
		GitHubCredential:  s.GitHubCredential,
		Warm:              s.Warm,
		InstanceARNPrefix: instanceARNPrefix,
		Metrics:           s.Metrics,
		Access:            s.Access,
	}
}

// validate refuses what would make the config item unreadable (protocol's
// PoolConfigFromItem) and so the pool unusable, before anything changes:
// an access policy that names classes the pool does not have, or runtimes
// beyond its own.
func (s Spec) validate() error {
	if s.Access == nil {
		return nil
	}
	if err := s.Access.Validate(s.ResourceClasses, s.MaxRuntime); err != nil {
		return fmt.Errorf("access %w", err)
	}
	return nil
}

// Status is what exists of a pool.
type Status struct {
	Config    protocol.PoolConfig
	TableARN  string
	QueueURLs map[string]string // by class; a missing queue has no entry
	QueueARNs map[string]string
	Tags      map[string]string // the table's tags
}

// Create makes the table, the queues and the config item. On failure it
// removes what it made, so a failed apply leaves nothing behind.
func (m *Manager) Create(ctx context.Context, spec Spec) (*Status, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if _, err := m.describeTable(ctx, spec.Name); !errors.Is(err, ErrNotFound) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("a DynamoDB table named %s already exists; import the pool with `terraform import` instead of creating it", spec.Name)
	}
	arnPrefix, err := m.instanceARNPrefix(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.ensureMetricsStream(ctx, spec); err != nil {
		return nil, err
	}
	urls := map[string]string{}
	rollback := func(cause error) error {
		// The caller's context may be what failed: clean up on a fresh one.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		for _, url := range urls {
			cause = errors.Join(cause, m.deleteQueue(cleanup, url))
		}
		return errors.Join(cause, m.deleteTable(cleanup, spec.Name))
	}
	if _, err := m.createTable(ctx, spec.Name, spec.Tags); err != nil {
		return nil, rollback(err) // the table may exist yet never have become active
	}
	if err := m.ensureTTL(ctx, spec.Name); err != nil {
		return nil, rollback(err)
	}
	for class := range spec.ResourceClasses {
		url, err := m.createQueue(ctx, spec.Name, class, spec.Tags)
		if err != nil {
			return nil, rollback(err)
		}
		urls[class] = url
	}
	if err := m.putConfig(ctx, spec.config(urls, arnPrefix), time.Now()); err != nil {
		return nil, rollback(err)
	}
	return m.Read(ctx, spec.Name)
}

// Read reports what exists of the named pool, or ErrNotFound when its table is gone.
func (m *Manager) Read(ctx context.Context, name string) (*Status, error) {
	arn, err := m.describeTable(ctx, name)
	if err != nil {
		return nil, err
	}
	cfg, err := ReadConfig(ctx, m.DynamoDB, name)
	if err != nil {
		return nil, err
	}
	tags, err := m.tableTags(ctx, arn)
	if err != nil {
		return nil, err
	}
	st := &Status{Config: cfg, TableARN: arn, QueueURLs: map[string]string{}, QueueARNs: map[string]string{}, Tags: tags}
	for class := range cfg.ResourceClasses {
		url, err := m.queueURL(ctx, name, class)
		if err != nil {
			return nil, err
		}
		if url == "" {
			continue
		}
		info, err := m.queueInfo(ctx, url)
		if isQueueMissing(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		st.QueueURLs[class], st.QueueARNs[class] = url, info.arn
	}
	return st, nil
}

// Update brings an existing pool to spec: queues for new or missing classes,
// removed classes' queues deleted, tags and the config item rewritten.
// Every refusal happens before anything changes.
func (m *Manager) Update(ctx context.Context, spec Spec) (*Status, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	cur, err := m.Read(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	arnPrefix, err := m.instanceARNPrefix(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.ensureMetricsStream(ctx, spec); err != nil {
		return nil, err
	}
	removed := map[string]string{} // class -> queue URL ("" when the queue is gone already)
	for class := range cur.Config.ResourceClasses {
		if _, keep := spec.ResourceClasses[class]; !keep {
			removed[class] = cur.QueueURLs[class]
		}
	}
	var doomed []protocol.Instance
	if len(removed) > 0 {
		doomed, err = m.checkRemovable(ctx, spec, removed)
		if err != nil {
			return nil, err
		}
	}
	now := time.Now()
	if len(doomed) > 0 {
		if err := m.forceTerminate(ctx, spec.Name, doomed, now); err != nil {
			return nil, err
		}
	}
	urls := maps.Clone(cur.QueueURLs)
	for class, url := range removed {
		delete(urls, class)
		if url != "" {
			if err := m.deleteQueue(ctx, url); err != nil {
				return nil, err
			}
		}
	}
	for class := range spec.ResourceClasses {
		if url, ok := urls[class]; ok {
			// A queue the config item records is the pool's, with owner
			// tags or, made by an earlier version, without.
			recorded := cur.Config.QueueURLs[class] == url
			if err := m.syncQueueTags(ctx, url, spec.Name, class, queueTags(spec.Name, class, spec.Tags), recorded); err != nil {
				return nil, err
			}
			continue
		}
		url, err := m.createQueue(ctx, spec.Name, class, spec.Tags)
		if err != nil {
			return nil, err
		}
		urls[class] = url
	}
	if err := m.syncTableTags(ctx, cur.TableARN, spec.Tags); err != nil {
		return nil, err
	}
	if err := m.ensureTTL(ctx, spec.Name); err != nil { // pools created before TTL was used
		return nil, err
	}
	if err := m.putConfig(ctx, spec.config(urls, arnPrefix), now); err != nil {
		return nil, err
	}
	return m.Read(ctx, spec.Name)
}

// ensureMetricsStream creates the log stream of a pool with metrics
// settings (its apply re-creates one deleted meanwhile), before anything
// else changes: a log group that does not exist fails the apply.
func (m *Manager) ensureMetricsStream(ctx context.Context, spec Spec) error {
	if spec.Metrics == nil {
		return nil
	}
	if m.Logs == nil {
		return errors.New("no CloudWatch Logs client to create the pool's metrics log stream with")
	}
	return metrics.EnsureStream(ctx, m.Logs, metrics.Target{Namespace: spec.Metrics.Namespace, LogGroup: spec.Metrics.LogGroup, Stream: protocol.MetricsStream(spec.Name)})
}

// checkRemovable refuses to drop classes that still have runners, unless
// spec.ForceDestroy; then it returns the live instances to terminate.
func (m *Manager) checkRemovable(ctx context.Context, spec Spec, removed map[string]string) ([]protocol.Instance, error) {
	all, err := ListInstances(ctx, m.DynamoDB, spec.Name)
	if err != nil {
		return nil, err
	}
	var doomed []protocol.Instance
	var problems []error
	for _, class := range slices.Sorted(maps.Keys(removed)) {
		live := liveInstances(all, class)
		messages := 0
		if url := removed[class]; url != "" {
			info, err := m.queueInfo(ctx, url)
			if err != nil && !isQueueMissing(err) {
				return nil, err
			}
			messages = info.messages
		}
		if len(live) == 0 && messages == 0 {
			continue
		}
		doomed = append(doomed, live...)
		problems = append(problems, fmt.Errorf("resource class %q still has %d queued runner message(s) and %d live instance(s): %s",
			class, messages, len(live), describeInstances(live)))
	}
	if len(problems) > 0 && !spec.ForceDestroy {
		return nil, fmt.Errorf("cannot remove resource classes of pool %s while they hold runners; release the claims first, or set force_destroy = true to terminate them:\n%w",
			spec.Name, errors.Join(problems...))
	}
	return doomed, nil
}

// Delete removes the pool. Live instances make it fail, unless force: then
// they are terminated first.
func (m *Manager) Delete(ctx context.Context, name string, force bool) error {
	cfg, err := ReadConfig(ctx, m.DynamoDB, name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	all, err := ListInstances(ctx, m.DynamoDB, name)
	if err != nil {
		return err
	}
	if live := liveInstances(all, ""); len(live) > 0 {
		if !force {
			return fmt.Errorf("pool %s still has %d live runner instance(s): %s; release the claims that hold them, or set force_destroy = true to terminate them",
				name, len(live), describeInstances(live))
		}
		if err := m.forceTerminate(ctx, name, live, time.Now()); err != nil {
			return err
		}
	}
	// The config item records every queue; a missing one is skipped.
	for _, url := range cfg.QueueURLs {
		if err := m.deleteQueue(ctx, url); err != nil {
			return err
		}
	}
	return m.deleteTable(ctx, name)
}
