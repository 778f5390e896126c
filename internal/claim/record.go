package claim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/table"
)

// Claim record states.
const (
	recordPending  = "pending"  // Create is under way, or crashed
	recordComplete = "complete" // the claim holds its runners
)

// Record is the claim record: what one claim owns.
type Record struct {
	Request   Request
	State     string
	Nonce     string // distinguishes attempts with the same run id (fleet ClientToken)
	Instances []Instance
	OwnedIDs  []string
	UpdatedAt string // a pending record's attempt refreshes it while it runs
}

type recordDoc struct {
	// Label is absent in the records of claims made before labels carried
	// a secret: their label is the run id.
	Label               string            `json:"label,omitempty"`
	RunnerGroup         string            `json:"runnerGroup,omitempty"`
	Claimant            string            `json:"claimant,omitempty"` // absent: none
	InstanceCount       int               `json:"instanceCount"`
	ResourceClass       string            `json:"resourceClass"`
	UsageClass          string            `json:"usageClass"`
	AllowedTypes        []string          `json:"allowedInstanceTypes"`
	MaxRuntime          protocol.Duration `json:"maxRuntime"`
	FleetFallback       bool              `json:"fleetFallback"`
	SpotFallback        string            `json:"spotFallback,omitempty"` // absent in records before it: ""
	HeartbeatMaxAge     protocol.Duration `json:"heartbeatMaxAge"`
	RegistrationWait    protocol.Duration `json:"registrationWait"`
	FleetValidationWait protocol.Duration `json:"fleetValidationWait"`
	ReleaseWait         protocol.Duration `json:"releaseWait"`
	// The workflow run attempt the claim serves (Request.Repository and
	// WorkflowRun); absent when not known.
	Repository      string `json:"repository,omitempty"`
	WorkflowRunID   int64  `json:"workflowRunId,omitempty"`
	WorkflowAttempt int    `json:"workflowRunAttempt,omitempty"`
	// RegisterWithRepository: the runners register with Repository
	// (Request.RegisterWithRepository); absent: with the pool's target.
	RegisterWithRepository bool       `json:"registerWithRepository,omitempty"`
	State                  string     `json:"state"`
	Nonce                  string     `json:"nonce"`
	Instances              []Instance `json:"instances"`
}

// Item is the record's table item, written at now.
func (r Record) Item(now string) map[string]types.AttributeValue {
	d := requestDoc(r.Request)
	d.State, d.Nonce, d.Instances = r.State, r.Nonce, r.Instances
	doc, _ := json.Marshal(d) // cannot fail: plain data
	item := protocol.BaseItem(protocol.TypeClaim, r.Request.RunID, now)
	item[protocol.AttrValue] = str(string(doc))
	item[protocol.AttrState] = str(r.State)
	item[table.AttrNonce] = str(r.Nonce)
	if len(r.OwnedIDs) > 0 {
		item[table.AttrInstanceIDs] = &types.AttributeValueMemberSS{Value: r.OwnedIDs}
	}
	return item
}

// requestDoc is the document of what q asks, without the state of a
// claim.
func requestDoc(q Request) recordDoc {
	return recordDoc{
		Label: q.Label, RunnerGroup: q.RunnerGroup, Claimant: q.Claimant,
		InstanceCount: q.InstanceCount, ResourceClass: q.ResourceClass, UsageClass: q.UsageClass,
		AllowedTypes: q.AllowedTypes, MaxRuntime: protocol.Duration(q.MaxRuntime), FleetFallback: q.FleetFallback,
		SpotFallback: q.SpotFallback, HeartbeatMaxAge: protocol.Duration(q.Timings.HeartbeatMaxAge), RegistrationWait: protocol.Duration(q.Timings.RegistrationWait),
		FleetValidationWait: protocol.Duration(q.Timings.FleetValidationWait), ReleaseWait: protocol.Duration(q.Timings.ReleaseWait),
		Repository: q.Repository, WorkflowRunID: q.WorkflowRun.ID, WorkflowAttempt: q.WorkflowRun.Attempt,
		RegisterWithRepository: q.RegisterWithRepository,
	}
}

// request is the claim of run id runID in pool that d records, or why d
// is not valid.
func (d recordDoc) request(pool, runID string) (Request, error) {
	if d.ResourceClass == "" || d.InstanceCount < 1 {
		return Request{}, fmt.Errorf("its document names no resource class or instance count")
	}
	if d.Label != "" {
		if err := protocol.ValidateLabel(runID, d.Label); err != nil {
			return Request{}, err
		}
	}
	return Request{
		Pool: pool, RunID: runID, Label: cmp.Or(d.Label, runID), // a record older than labels with a secret
		RunnerGroup: d.RunnerGroup, Claimant: d.Claimant, InstanceCount: d.InstanceCount, ResourceClass: d.ResourceClass,
		UsageClass: d.UsageClass, AllowedTypes: d.AllowedTypes, MaxRuntime: time.Duration(d.MaxRuntime), FleetFallback: d.FleetFallback,
		SpotFallback: d.SpotFallback, Timings: Timings{
			HeartbeatMaxAge: time.Duration(d.HeartbeatMaxAge), RegistrationWait: time.Duration(d.RegistrationWait),
			FleetValidationWait: time.Duration(d.FleetValidationWait), ReleaseWait: time.Duration(d.ReleaseWait),
			PollInterval: DefaultTimings().PollInterval,
		},
		Repository: d.Repository, WorkflowRun: WorkflowRun{ID: d.WorkflowRunID, Attempt: d.WorkflowAttempt},
		RegisterWithRepository: d.RegisterWithRepository,
	}, nil
}

func recordFromItem(pool string, item map[string]types.AttributeValue) (Record, error) {
	var d recordDoc
	invalid := func(why error) (Record, error) {
		return Record{}, fmt.Errorf("claim record %s is not valid: %w", protocol.IdentifierOf(item), why)
	}
	if err := json.Unmarshal([]byte(protocol.StringAttr(item, protocol.AttrValue)), &d); err != nil {
		return invalid(err)
	}
	req, err := d.request(pool, protocol.IdentifierOf(item))
	if err != nil {
		return invalid(err)
	}
	ids, isSet := item[table.AttrInstanceIDs].(*types.AttributeValueMemberSS)
	if item[table.AttrInstanceIDs] != nil && !isSet {
		// What it owns is unknown: releasing it as empty would leak runners.
		return invalid(fmt.Errorf("%s is not a string set", table.AttrInstanceIDs))
	}
	r := Record{Request: req, State: d.State, Nonce: d.Nonce, Instances: d.Instances, UpdatedAt: protocol.StringAttr(item, protocol.AttrUpdatedAt)}
	if isSet {
		r.OwnedIDs = ids.Value
	}
	return r, nil
}

// readRecord returns the claim record of runID; ok is false when there is none.
func (s *store) readRecord(ctx context.Context, pool, runID string) (Record, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: protocol.Key(protocol.TypeClaim, runID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Record{}, false, fmt.Errorf("reading claim record %s: %w", runID, err)
	}
	if out.Item == nil {
		return Record{}, false, nil
	}
	r, err := recordFromItem(pool, out.Item)
	return r, err == nil, err
}

// errLeaseLost: the claim record no longer belongs to this attempt. Its
// lease lapsed and another attempt of the run took the record over (and with
// it the cleanup of every instance the record lists), or it was deleted.
// ErrOtherClaimant: the run id's claim record was made by another
// claimant.
var ErrOtherClaimant = errors.New("claimed by another claimant")

// ErrOtherRepository: a claim that registers with its repository found the
// run id's claim record made for another repository (or by a claim that
// does not register with its repository).
var ErrOtherRepository = errors.New("claimed for another repository")

var errLeaseLost = errors.New("the claim record was taken over by another attempt of the run (this one's lease lapsed)")

// leaseError turns a failed ownership condition into errLeaseLost.
func leaseError(err error, what string) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return errLeaseLost
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// recordPut is the write of r, for a transaction: r's attempt must still own
// the record.
func (s *store) recordPut(r Record) *types.Put {
	return table.PutRecord(s.table, r.Item(protocol.FormatTime(s.now())), r.Nonce)
}

// createRecord writes a new record; ErrRecordChanged when one exists.
func (s *store) createRecord(ctx context.Context, r Record) error {
	_, err := s.db.PutItem(ctx, table.PutNew(s.table, r.Item(protocol.FormatTime(s.now()))))
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrRecordChanged
	}
	if err != nil {
		return fmt.Errorf("writing claim record %s: %w", r.Request.RunID, err)
	}
	return nil
}

// replaceRecord writes r over the record of the attempt with nonce, as it
// stood when refreshed at updatedAt ("": whenever). errLeaseLost when the
// record changed hands, or was refreshed since.
func (s *store) replaceRecord(ctx context.Context, r Record, nonce, updatedAt string) error {
	_, err := s.db.PutItem(ctx, table.ReplaceRecord(s.table, r.Item(protocol.FormatTime(s.now())), nonce, updatedAt))
	return leaseError(err, "writing claim record "+r.Request.RunID)
}

// addOwned grows the record's set of instances before anything else is done
// with them, so a crash cannot lose track of one.
func (s *store) addOwned(ctx context.Context, runID, nonce string, ids ...string) error {
	_, err := s.db.UpdateItem(ctx, table.AddOwned(s.table, runID, nonce, ids))
	return leaseError(err, fmt.Sprintf("updating the instances %v of claim record %s", ids, runID))
}

// dropOwned removes settled instances from the record, so that a release
// retried after a crash does not settle them twice.
func (s *store) dropOwned(ctx context.Context, runID, nonce string, ids ...string) error {
	_, err := s.db.UpdateItem(ctx, table.DropOwned(s.table, runID, nonce, ids))
	return leaseError(err, fmt.Sprintf("updating the instances %v of claim record %s", ids, runID))
}

// touchRecord refreshes a pending record's updatedAt while its attempt runs,
// so that another apply can tell a live attempt from a crashed one.
func (s *store) touchRecord(ctx context.Context, runID, nonce string) error {
	_, err := s.db.UpdateItem(ctx, table.TouchRecord(s.table, runID, nonce, protocol.FormatTime(s.now())))
	return leaseError(err, "refreshing claim record "+runID)
}

// deleteRecord deletes the record of the attempt with nonce. A record gone
// already, or another attempt's now, is left as it is: not ours to delete.
func (s *store) deleteRecord(ctx context.Context, runID, nonce string) error {
	_, err := s.db.DeleteItem(ctx, table.DeleteRecord(s.table, runID, nonce))
	if err = leaseError(err, "deleting claim record "+runID); errors.Is(err, errLeaseLost) {
		s.log("claim record changed hands or is gone; left as it is", "run", runID)
		return nil
	}
	return err
}
