package claim

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// PoolTable is one pool's table as the claims keep it, for the pool's
// maintenance (internal/maintenance): the records it reads, the
// transitions it makes and the claims it releases, through the claims'
// own codecs and conditional writes.
type PoolTable struct {
	c    *Claimer
	s    *store
	pool string
}

// PoolTable is poolName's table.
func (c *Claimer) PoolTable(poolName string) *PoolTable {
	return &PoolTable{c: c, s: c.store(poolName), pool: poolName}
}

// Instances reads every instance record, page by page, skipping (and
// naming) corrupt ones.
func (t *PoolTable) Instances(ctx context.Context) ([]protocol.Instance, []string, error) {
	return t.s.allInstances(ctx)
}

// InstancesOf reads the records of ids that exist.
func (t *PoolTable) InstancesOf(ctx context.Context, ids []string) (map[string]protocol.Instance, error) {
	return t.s.instances(ctx, ids)
}

// Apply makes transition tr of id's record; ErrRecordChanged when the
// record is not as tr expects.
func (t *PoolTable) Apply(ctx context.Context, id string, tr table.Transition) error {
	return t.s.apply(ctx, id, tr)
}

// ApplyEach makes the transition of each id, with an outcome each as
// Apply gives, in as few writes as it can.
func (t *PoolTable) ApplyEach(ctx context.Context, ids []string, tr func(id string) table.Transition) []error {
	return t.s.applyEach(ctx, ids, tr)
}

// Discard expires an instance that state and runID still describe and
// terminates it; an instance someone else took meanwhile is left alone,
// and terminated is false.
func (t *PoolTable) Discard(ctx context.Context, id, state, runID string) (terminated bool, err error) {
	return t.c.discard(ctx, t.s, id, state, runID)
}

// Claims reads the claim records that can be read, in no order.
func (t *PoolTable) Claims(ctx context.Context) ([]Record, error) {
	var out []Record
	err := t.s.queryType(ctx, protocol.TypeClaim, func(item map[string]types.AttributeValue) {
		if r, err := recordFromItem(t.pool, item); err == nil {
			out = append(out, r)
		}
	})
	return out, err
}

// DeleteRecord deletes the claim record of runID written by the attempt
// nonce.
func (t *PoolTable) DeleteRecord(ctx context.Context, runID, nonce string) error {
	return t.s.deleteRecord(ctx, runID, nonce)
}

// Release releases the claim of rec as its destroy would (Release), and
// returns what happened to each of its runners.
func (t *PoolTable) Release(ctx context.Context, rec Record) ([]string, error) {
	return t.c.releaseRecord(ctx, t.s, rec)
}

// ReleasedClaim is a released claim's marker (putReleased): the claim as
// its record held it (WorkflowRun: the attempt that claimed or revived
// it), and the attempt it was last revived for (0: none since its
// release).
type ReleasedClaim struct {
	Request    Request
	RevivedFor int
}

// ReleasedClaims reads the markers of released claims not yet expired, in
// run id order. Markers that cannot be read are skipped and logged.
func (t *PoolTable) ReleasedClaims(ctx context.Context) ([]ReleasedClaim, error) {
	s := t.s
	var out []ReleasedClaim
	now := s.now().Unix()
	err := s.queryType(ctx, protocol.TypeReleased, func(item map[string]types.AttributeValue) {
		runID := protocol.IdentifierOf(item)
		expires, _ := strconv.ParseInt(numberAttr(item, protocol.AttrExpiresAt), 10, 64)
		if expires <= now { // DynamoDB deletes expired items within days, not at once
			return
		}
		var d recordDoc
		err := json.Unmarshal([]byte(protocol.StringAttr(item, protocol.AttrValue)), &d)
		req, rerr := d.request(t.pool, runID)
		if err = errors.Join(err, rerr); err != nil {
			s.log("released-claim marker skipped: not valid", "run", runID, "error", err.Error())
			return
		}
		revived, _ := strconv.Atoi(numberAttr(item, table.AttrRevivedFor))
		out = append(out, ReleasedClaim{Request: req, RevivedFor: revived})
	})
	slices.SortFunc(out, func(a, b ReleasedClaim) int { return strings.Compare(a.Request.RunID, b.Request.RunID) })
	return out, err
}

func numberAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}
