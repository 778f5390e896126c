package protocol

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A claim made through the pool's broker hands each of its runners a
// registration grant instead of a registration token: each job of the run
// then starts on a just-in-time runner of its own (a registration GitHub
// sends one job and then removes), which the agent asks the broker for
// with the grant. The grant is a secret in the runner's own agent
// partition, which only that instance (and the pool's claims and broker)
// can read: whoever presents it to the broker is that instance's agent.
// It authenticates the agent, and does not authorize what the runners
// register as: the instance role may write its own partition, so the
// broker takes the repository and label from the run's claim record,
// which only claims write, and checks the grant names the same.

// SortKeyRegistrationGrant is the registration grant's item in the agent
// partition.
const SortKeyRegistrationGrant = "JIT#GRANT"

// entityGrant is the registration grant item's entity type.
const entityGrant = "GRANT"

// GrantSecretLength is the length of a grant's secret: 256 bits from
// crypto/rand in lower-case hex.
const GrantSecretLength = 64

var grantSecretPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// NewGrantSecret is a new grant secret: 256 bits from crypto/rand.
func NewGrantSecret() string {
	b := make([]byte, GrantSecretLength/2)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// RegistrationGrant is a runner's leave to ask the pool's broker for the
// just-in-time registrations of the jobs of one run.
type RegistrationGrant struct {
	InstanceARN string
	// Grant is the secret the agent presents to the broker
	// (GrantSecretLength hex digits).
	Grant     string
	ExpiresAt time.Time
	RunID     string // the run the grant is for
	Target    string // the repository the runners register with, "owner/name"
	Label     string // the runners' one label: the claim's
	UpdatedAt string
}

// Fields of the grant item's value map.
const (
	grantSecret    = "grant"
	grantExpiresAt = "expires_at"
	grantRunID     = "runId"
	grantTarget    = "target"
	grantLabel     = "label"
)

// Item renders the grant item; the table forgets it when the grant
// expires.
func (g RegistrationGrant) Item() map[string]types.AttributeValue {
	item := agentItem(g.InstanceARN, SortKeyRegistrationGrant, entityGrant, g.UpdatedAt)
	item[AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(g.ExpiresAt.Unix(), 10)}
	item[AttrValue] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		grantSecret:    &types.AttributeValueMemberS{Value: g.Grant},
		grantExpiresAt: &types.AttributeValueMemberS{Value: FormatTime(g.ExpiresAt)},
		grantRunID:     &types.AttributeValueMemberS{Value: g.RunID},
		grantTarget:    &types.AttributeValueMemberS{Value: g.Target},
		grantLabel:     &types.AttributeValueMemberS{Value: g.Label},
	}}
	return item
}

// RegistrationGrantFromItem reads a grant item. Anything but a grant item
// of an agent partition with a secret of GrantSecretLength hex digits, its
// expiry, a run id, a repository ("owner/name": grants register
// repository runners alone) and a label of the run with its secret is an
// error.
func RegistrationGrantFromItem(item map[string]types.AttributeValue) (RegistrationGrant, error) {
	arn, ok := agentOf(item, SortKeyRegistrationGrant)
	if !ok {
		return RegistrationGrant{}, fmt.Errorf("registration grant item: keys %q, %q and identifier %q do not name the %s item of an instance's agent partition",
			StringAttr(item, AttrPK), StringAttr(item, AttrSK), StringAttr(item, AttrIdentifier), SortKeyRegistrationGrant)
	}
	value, ok := item[AttrValue].(*types.AttributeValueMemberM)
	if !ok {
		return RegistrationGrant{}, fmt.Errorf("registration grant item: its %s attribute is %s, want a map", AttrValue, describeAttr(item[AttrValue]))
	}
	v := value.Value
	g := RegistrationGrant{
		InstanceARN: arn, Grant: StringAttr(v, grantSecret), RunID: StringAttr(v, grantRunID), Target: StringAttr(v, grantTarget),
		Label: StringAttr(v, grantLabel), UpdatedAt: StringAttr(item, AttrUpdatedAt),
	}
	expires, err := ParseTime(StringAttr(v, grantExpiresAt))
	switch {
	case err != nil:
		return RegistrationGrant{}, fmt.Errorf("registration grant item: %s: %w", grantExpiresAt, err)
	case !grantSecretPattern.MatchString(g.Grant):
		// The secret stays out of the message: a log may show it.
		return RegistrationGrant{}, fmt.Errorf("registration grant item: its %s is not %d lower-case hex digits", grantSecret, GrantSecretLength)
	case ValidateRunID(g.RunID) != nil:
		return RegistrationGrant{}, fmt.Errorf("registration grant item: %w", ValidateRunID(g.RunID))
	case !strings.Contains(g.Target, "/") || !validTarget(g.Target):
		return RegistrationGrant{}, fmt.Errorf("registration grant item: target %q is not a repository, owner/name", g.Target)
	case g.Label == g.RunID:
		// Only claims made before labels carried a secret had the run id
		// as their label, and none of them handed a grant.
		return RegistrationGrant{}, fmt.Errorf("registration grant item: label %q has no secret", g.Label)
	case ValidateLabel(g.RunID, g.Label) != nil:
		return RegistrationGrant{}, fmt.Errorf("registration grant item: %w", ValidateLabel(g.RunID, g.Label))
	}
	g.ExpiresAt = expires
	return g, nil
}

// Matches tells whether secret is the grant's, in time that does not
// depend on where they differ: a caller cannot learn the secret a
// character at a time.
func (g RegistrationGrant) Matches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(g.Grant), []byte(secret)) == 1
}

// An agent asks the pool's broker, by invoking its Lambda function, for the
// just-in-time registration of the next job of its run (JITRegister), and
// to delete a registration of its run's when it leaves the run
// (JITDeregister). The broker answers with a JITRunner, or refuses.
const (
	JITRegister   = "register"
	JITDeregister = "deregister"
)

// JITRequest is an agent's request to the pool's broker: the payload of
// its Lambda invocation.
type JITRequest struct {
	Operation   string `json:"operation"`   // JITRegister or JITDeregister
	InstanceARN string `json:"instanceArn"` // the agent partition holding the grant
	RunID       string `json:"runId"`
	Grant       string `json:"grant"` // the grant's secret
	// RunnerID is the registration JITDeregister deletes.
	RunnerID int64 `json:"runnerId,omitempty"`
}

// JITRunner is a just-in-time runner GitHub made for one job.
type JITRunner struct {
	RunnerID   int64  `json:"runnerId"`
	RunnerName string `json:"runnerName"`
	// EncodedJITConfig is all run.sh --jitconfig needs to run as the
	// runner: its credentials. A secret.
	EncodedJITConfig string `json:"encodedJitConfig"`
}

// JITRunnerName is the name of a just-in-time runner of instance id: the
// instance id, '-' and suffix, unique among the instance's runners
// (GitHub refuses a name a runner of the repository has).
func JITRunnerName(instanceID, suffix string) string { return instanceID + "-" + suffix }

// RunnerOfInstance tells whether the runner named name runs on instance
// id: the runner of a direct claim, named after the instance, or one of
// its just-in-time runners (JITRunnerName). GitHub names a job's runner,
// and the pool's maintenance tells by it whose runners a job runs on.
func RunnerOfInstance(name, instanceID string) bool {
	return name == instanceID || strings.HasPrefix(name, instanceID+"-")
}
