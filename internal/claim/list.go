package claim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/pool"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// Claim record states, as ListFilter.State takes them.
const (
	StatePending  = recordPending  // a claim under way, or one whose apply crashed
	StateComplete = recordComplete // a claim that got its runners
)

// ListFilter selects claims; its zero value selects all.
type ListFilter struct {
	State       string        // StatePending or StateComplete
	MinAge      time.Duration // claims whose record is at least this old
	RunIDPrefix string
}

// Listed is one claim of a listing.
type Listed struct {
	Record
	Live []Instance    // the runners it still holds, as Read tells them
	Age  time.Duration // since its record was last written: for a complete claim, since it got its runners
}

// List returns the claims of a pool that pass f, by run id, with the
// runners each still holds, and the claim records it could not read
// (skipped). A pool that does not exist is pool.ErrNotFound.
func (c *Claimer) List(ctx context.Context, poolName string, f ListFilter) ([]Listed, []string, error) {
	s := c.store(poolName)
	now := c.now()
	var claims []Listed
	var corrupt []string
	err := s.queryType(ctx, protocol.TypeClaim, func(item map[string]types.AttributeValue) {
		if !strings.HasPrefix(protocol.IdentifierOf(item), f.RunIDPrefix) {
			return
		}
		r, err := recordFromItem(poolName, item)
		if err != nil {
			corrupt = append(corrupt, err.Error())
			return
		}
		var age time.Duration
		if updated, err := protocol.ParseTime(r.UpdatedAt); err == nil {
			age = now.Sub(updated)
		}
		if (f.State == "" || r.State == f.State) && age >= f.MinAge {
			claims = append(claims, Listed{Record: r, Age: age})
		}
	})
	if isTableMissing(err) {
		return nil, nil, fmt.Errorf("listing the claims of pool %s: %w", poolName, pool.ErrNotFound)
	}
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, l := range claims {
		ids = append(ids, instanceIDs(l.Instances)...)
	}
	records, err := s.instances(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	for i := range claims {
		claims[i].Live = liveInstances(claims[i].Record, records, now)
	}
	return claims, corrupt, nil
}

// queryType calls fn for every item of one type, following pages.
func (s *store) queryType(ctx context.Context, typ string, fn func(map[string]types.AttributeValue)) error {
	err := table.Partition(ctx, s.db, s.table, typ, func(item table.Item) error {
		fn(item)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading %s items: %w", typ, err)
	}
	return nil
}
