package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/claim"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/github"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Agents invoke the broker too: a runner claimed through the broker holds a
// registration grant (protocol.RegistrationGrant) instead of a
// registration token, and asks the broker, with the instance role's
// credentials, for a just-in-time registration for each job of its run
// (OpRegister), and to delete the last one when it leaves the run
// (OpDeregister). The broker holds the GitHub credential: no agent and no
// job ever does.

// Operations an agent asks of the broker.
const (
	OpRegister   = protocol.JITRegister
	OpDeregister = protocol.JITDeregister
)

// AgentRequest is an agent's invocation's payload. Its wire form is the
// agents' too, so it is the protocol's.
type AgentRequest = protocol.JITRequest

// AgentResponse is the broker's answer to an agent.
type AgentResponse struct {
	Runner *protocol.JITRunner `json:"runner,omitempty"` // OpRegister's
	Error  *Error              `json:"error,omitempty"`
}

// RegistrarTable is the part of DynamoDB the registrar reads.
type RegistrarTable interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Registrar serves the agents' requests for the pool's runners.
//
// A request is the instance's only when its grant's secret matches the
// one in that instance's agent partition, which only the instance's role
// (and the pool's claims and broker) can read, and when the grant has not
// expired. Registering also needs the instance's record to name the
// grant's run (a runner released from the run registers no more jobs of
// it), and takes the repository and label from the run's claim record,
// which must list the instance: the instance role may write its own
// partition, grant included, but no claim record. Deregistering deletes
// only a runner of that instance's (protocol.RunnerOfInstance) in the
// grant's repository, and needs no record: the agent deregisters once its
// record no longer names the run.
type Registrar struct {
	DynamoDB RegistrarTable
	Pool     string // the pool the broker serves
	// GitHub is the pool's GitHub credential's access to just-in-time
	// runners, read when a request needs it.
	GitHub func(context.Context) (claim.JITRunners, error)
	Now    func() time.Time // nil: time.Now
}

// Serve answers one agent's request.
func (r *Registrar) Serve(ctx context.Context, req AgentRequest) AgentResponse {
	runner, err := r.serve(ctx, req)
	if err != nil {
		var refusal *Error
		if !errors.As(err, &refusal) {
			refusal = &Error{Kind: ErrorFailed, Message: err.Error()}
		}
		return AgentResponse{Error: refusal}
	}
	return AgentResponse{Runner: runner}
}

func (r *Registrar) serve(ctx context.Context, req AgentRequest) (*protocol.JITRunner, error) {
	_, instanceID, isARN := protocol.SplitInstanceARN(req.InstanceARN)
	switch {
	case req.Operation != OpRegister && req.Operation != OpDeregister:
		return nil, refused(ErrorInvalid, "operation %q is not an agent's: want %s or %s", req.Operation, OpRegister, OpDeregister)
	case !isARN:
		return nil, refused(ErrorInvalid, "instanceArn %q is not an instance's ARN", req.InstanceARN)
	case protocol.ValidateRunID(req.RunID) != nil:
		return nil, refused(ErrorInvalid, "runId: %v", protocol.ValidateRunID(req.RunID))
	case req.Operation == OpDeregister && req.RunnerID <= 0:
		return nil, refused(ErrorInvalid, "%s needs the runnerId to delete", OpDeregister)
	}
	grant, err := r.grant(ctx, req)
	if err != nil {
		return nil, err
	}
	repository, err := repositoryOf(grant.Target)
	if err != nil {
		return nil, err
	}
	if req.Operation == OpRegister {
		if err := r.checkRecords(ctx, instanceID, grant); err != nil {
			return nil, err
		}
	}
	gh, err := r.GitHub(ctx)
	if err != nil {
		return nil, err
	}
	if req.Operation == OpDeregister {
		return nil, deregister(ctx, gh, instanceID, repository, req.RunnerID)
	}
	return register(ctx, gh, instanceID, repository, grant)
}

// grant is the instance's grant, when req presents its secret for its run
// before it expires. A caller without the secret learns nothing else.
func (r *Registrar) grant(ctx context.Context, req AgentRequest) (protocol.RegistrationGrant, error) {
	item, err := r.get(ctx, protocol.AgentKey(req.InstanceARN, protocol.SortKeyRegistrationGrant))
	if err != nil {
		return protocol.RegistrationGrant{}, err
	}
	grant, err := protocol.RegistrationGrantFromItem(item)
	if err != nil || !grant.Matches(req.Grant) {
		return protocol.RegistrationGrant{}, refused(ErrorDenied, "the grant presented is not instance %s's", req.InstanceARN)
	}
	switch now := r.now(); {
	case grant.RunID != req.RunID:
		return protocol.RegistrationGrant{}, refused(ErrorDenied, "instance %s's grant is for run %s, not %s", req.InstanceARN, grant.RunID, req.RunID)
	case !now.Before(grant.ExpiresAt):
		return protocol.RegistrationGrant{}, refused(ErrorDenied, "instance %s's grant for run %s expired at %s", req.InstanceARN, grant.RunID, protocol.FormatTime(grant.ExpiresAt))
	}
	return grant, nil
}

// checkRecords fails unless the instance's record names the grant's run,
// and the run's claim record lists the instance with the grant's
// repository and label.
func (r *Registrar) checkRecords(ctx context.Context, instanceID string, grant protocol.RegistrationGrant) error {
	item, err := r.get(ctx, protocol.Key(protocol.TypeInstance, instanceID))
	if err != nil {
		return err
	}
	rec, err := protocol.InstanceFromItem(item)
	serving := rec.State == protocol.StateCreated || rec.State == protocol.StateClaimed || rec.State == protocol.StateRunning
	if err != nil || rec.ID != instanceID || rec.RunID != grant.RunID || !serving {
		return refused(ErrorDenied, "instance %s does not serve run %s: its record names run %q (state %q)", instanceID, grant.RunID, rec.RunID, rec.State)
	}
	item, err = r.get(ctx, protocol.Key(protocol.TypeClaim, grant.RunID))
	if err != nil {
		return err
	}
	if len(item) == 0 {
		return refused(ErrorDenied, "run %s has no claim", grant.RunID)
	}
	claimed, err := claim.RecordFromItem(r.Pool, item)
	switch {
	case err != nil:
		return err
	case !slices.Contains(claimed.OwnedIDs, instanceID):
		return refused(ErrorDenied, "the claim of run %s does not hold instance %s", grant.RunID, instanceID)
	case claimed.Request.Repository != grant.Target:
		return refused(ErrorDenied, "instance %s's grant registers with %s, and the claim of run %s with %s", instanceID, grant.Target, grant.RunID, claimed.Request.Repository)
	case claimed.Request.Label != grant.Label:
		// Labels stay out of messages: the agent logs them, and the
		// label's secret keeps other jobs off the claim's runners.
		return refused(ErrorDenied, "instance %s's grant names another label than the claim of run %s", instanceID, grant.RunID)
	}
	return nil
}

// jitSuffixLength is the length of the random part of a just-in-time
// runner's name: 40 bits, unique among an instance's runners.
const jitSuffixLength = 8

// register makes the next just-in-time runner of the instance for the
// grant's repository, with the grant's label alone, in the repository's
// runner group.
func register(ctx context.Context, gh claim.JITRunners, instanceID string, repository github.Target, grant protocol.RegistrationGrant) (*protocol.JITRunner, error) {
	name := protocol.JITRunnerName(instanceID, strings.ToLower(rand.Text()[:jitSuffixLength]))
	if utf8.RuneCountInString(name) > github.MaxRunnerNameLength {
		return nil, refused(ErrorInvalid, "instance id %q is too long for a runner name of at most %d characters", instanceID, github.MaxRunnerNameLength)
	}
	made, err := gh.GenerateJITConfig(ctx, repository, github.JITRequest{Name: name, Labels: []string{grant.Label}, RunnerGroupID: github.DefaultRunnerGroupID})
	if err != nil {
		return nil, err
	}
	return &protocol.JITRunner{RunnerID: made.ID, RunnerName: made.Name, EncodedJITConfig: made.EncodedConfig}, nil
}

// deregister deletes the repository's runner id, when it is the
// instance's; one GitHub no longer has (removed after its job) is gone
// already.
func deregister(ctx context.Context, gh claim.JITRunners, instanceID string, repository github.Target, id int64) error {
	runner, found, err := gh.RepositoryRunner(ctx, repository, id)
	switch {
	case err != nil:
		return err
	case !found:
		return nil
	case !protocol.RunnerOfInstance(runner.Name, instanceID):
		return refused(ErrorDenied, "runner %d of %s is %s, not a runner of instance %s", id, repository, runner.Name, instanceID)
	}
	return gh.DeleteRunner(ctx, repository, id)
}

// get reads the item of key, strongly consistent; nil when there is none.
func (r *Registrar) get(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := r.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(protocol.TableName(r.Pool)), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("reading pool %s's table: %w", r.Pool, err)
	}
	return out.Item, nil
}

func (r *Registrar) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// repositoryOf is the grant's target, a repository (the protocol checked
// it).
func repositoryOf(target string) (github.Target, error) {
	owner, name, err := protocol.ParseRepository(target)
	if err != nil {
		return github.Target{}, refused(ErrorInvalid, "the grant's target: %v", err)
	}
	return github.Target{Owner: owner, Repository: name}, nil
}

// refused is the broker's refusal of kind.
func refused(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}
