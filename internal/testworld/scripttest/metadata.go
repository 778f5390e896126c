package scripttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/awsrecord"
)

// Credentials the metadata service hands out; the proxy verifies signatures
// with them. The secret has '/' and '+' like real ones. The access key id is
// the instance's own (AccessKeyID), as on EC2, so that the calls of each
// instance's agent are recorded as that instance's (awsrecord).
const (
	SecretAccessKey = "agent/secret+key/0123456789abcdefghijklmn"
	SessionToken    = "IQoJb3JpZ2luX2VjEOb//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+test="
	instanceRole    = "ec2runners-agent"
)

// AccessKeyID is the access key id of instance id's role credentials.
func AccessKeyID(instanceID string) string { return awsrecord.AgentKey(instanceID) }

// Metadata is what the instance metadata service of one instance stand-in
// tells: the instance metadata the agent reads, the instance identity
// document, instance metadata tags, and the instance profile's credentials
// (those the SigV4 proxy verifies).
type Metadata struct {
	InstanceID       string
	ImageID          string // the image the instance was launched from
	AccountID        string
	Region           string
	AvailabilityZone string
	Partition        string            // aws, aws-cn, aws-us-gov
	Tags             map[string]string // instance metadata tags, such as InitialRunId
}

// Handler serves m as EC2's instance metadata service with IMDSv2 required:
// a session token from PUT /latest/api/token (its TTL header required,
// 1-21600 seconds) for every GET, refused once its TTL has passed.
func (m Metadata) Handler() http.Handler {
	return &metadataServer{tree: m.tree(time.Now()), tokens: map[string]time.Time{}, now: time.Now}
}

type metadataServer struct {
	tree map[string]string // by path below /latest/
	now  func() time.Time

	mu     sync.Mutex
	tokens map[string]time.Time // session tokens and when they expire
}

const (
	tokenPath      = "/latest/api/token"
	tokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	tokenHeader    = "X-aws-ec2-metadata-token"
	maxTokenTTL    = 21600
)

func (s *metadataServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == tokenPath && r.Method == http.MethodPut:
		s.issue(w, r)
	case r.URL.Path == tokenPath || (r.Method != http.MethodGet && r.Method != http.MethodHead):
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	case !s.valid(r.Header.Get(tokenHeader)):
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	default:
		s.get(w, r)
	}
}

func (s *metadataServer) issue(w http.ResponseWriter, r *http.Request) {
	// As EC2's: a token request that went through a proxy is refused.
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(tokenTTLHeader))
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		http.Error(w, "Bad Request: "+tokenTTLHeader+" must be 1-21600", http.StatusBadRequest)
		return
	}
	token := randomHex(24)
	now := s.now()
	s.mu.Lock()
	for t, expires := range s.tokens {
		if now.After(expires) {
			delete(s.tokens, t)
		}
	}
	s.tokens[token] = now.Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set(tokenTTLHeader, strconv.Itoa(ttl))
	_, _ = w.Write([]byte(token))
}

func (s *metadataServer) valid(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	expires, ok := s.tokens[token]
	return ok && s.now().Before(expires)
}

// get answers a leaf with its value and a directory with its entries, one a
// line, subdirectories with a trailing slash, as EC2's service does.
func (s *metadataServer) get(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/latest/")
	if v, ok := s.tree[path]; ok && path != "" {
		_, _ = w.Write([]byte(v))
		return
	}
	dir := strings.TrimSuffix(path, "/") + "/"
	if dir == "/" {
		dir = ""
	}
	var entries []string
	for p := range s.tree {
		if rest, ok := strings.CutPrefix(p, dir); ok {
			if i := strings.Index(rest, "/"); i >= 0 {
				rest = rest[:i+1]
			}
			entries = append(entries, rest)
		}
	}
	if len(entries) == 0 {
		http.NotFound(w, r)
		return
	}
	slices.Sort(entries)
	_, _ = w.Write([]byte(strings.Join(slices.Compact(entries), "\n")))
}

// tree is every leaf of the metadata, by path below /latest/.
func (m Metadata) tree(boot time.Time) map[string]string {
	creds, _ := json.MarshalIndent(map[string]string{
		"Code": "Success", "Type": "AWS-HMAC", "LastUpdated": boot.UTC().Format(time.RFC3339),
		"AccessKeyId": AccessKeyID(m.InstanceID), "SecretAccessKey": SecretAccessKey, "Token": SessionToken,
		"Expiration": boot.Add(6 * time.Hour).UTC().Format(time.RFC3339),
	}, "", "  ")
	t := map[string]string{
		"meta-data/instance-id":                              m.InstanceID,
		"meta-data/instance-type":                            SeedInstanceType,
		"meta-data/ami-id":                                   m.ImageID,
		"meta-data/placement/region":                         m.Region,
		"meta-data/placement/availability-zone":              m.AvailabilityZone,
		"meta-data/services/partition":                       m.Partition,
		"meta-data/services/domain":                          "amazonaws.com",
		"meta-data/iam/security-credentials/" + instanceRole: string(creds),
		"dynamic/instance-identity/document":                 m.identityDocument(boot),
	}
	for k, v := range m.Tags {
		t["meta-data/tags/instance/"+k] = v
	}
	return t
}

// identityDocument is laid out as EC2's, with spaces around the colons: a
// parser that expects `"key":"value"` fails here as it would on EC2.
func (m Metadata) identityDocument(boot time.Time) string {
	fields := []struct{ k, v string }{
		{"accountId", m.AccountID}, {"architecture", "x86_64"}, {"availabilityZone", m.AvailabilityZone},
		{"billingProducts", ""}, {"devpayProductCodes", ""}, {"marketplaceProductCodes", ""},
		{"imageId", m.ImageID}, {"instanceId", m.InstanceID}, {"instanceType", SeedInstanceType},
		{"kernelId", ""}, {"pendingTime", boot.UTC().Format(time.RFC3339)}, {"privateIp", "10.0.0.10"},
		{"ramdiskId", ""}, {"region", m.Region}, {"version", "2017-09-30"},
	}
	var b strings.Builder
	b.WriteString("{\n")
	for i, f := range fields {
		v := "null"
		if f.v != "" {
			v = strconv.Quote(f.v)
		}
		fmt.Fprintf(&b, "  %q : %s", f.k, v)
		if i < len(fields)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// metadata is what EC2 tells instance c about itself: its image, from the
// emulator, and the account and partition, the emulator's as STS
// GetCallerIdentity tells them to the pool resource, unless c names the
// account.
func (e *Env) metadata(c InstanceConfig) (Metadata, error) {
	m := Metadata{InstanceID: c.InstanceID, AccountID: c.AccountID, Region: e.Region,
		AvailabilityZone: c.AvailabilityZone, Partition: "aws", Tags: c.Tags}
	if m.AvailabilityZone == "" {
		m.AvailabilityZone = e.Region + "a"
	}
	if e.Endpoint == "" {
		if m.AccountID != "" {
			return m, nil
		}
		return m, errors.New("the instance's account: the Env has no emulator endpoint; set InstanceConfig.AccountID")
	}
	ctx := context.Background()
	insts, err := e.emulatorEC2().DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{c.InstanceID}})
	if err != nil {
		return m, fmt.Errorf("the instance's image from DescribeInstances: %w", err)
	}
	for _, r := range insts.Reservations {
		for _, inst := range r.Instances {
			m.ImageID = aws.ToString(inst.ImageId)
		}
	}
	if m.AccountID != "" {
		return m, nil
	}
	client := sts.New(sts.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	out, err := client.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return m, fmt.Errorf("the instance's account from STS GetCallerIdentity: %w", err)
	}
	m.AccountID = aws.ToString(out.Account)
	if a, err := arn.Parse(aws.ToString(out.Arn)); err == nil {
		m.Partition = a.Partition
	}
	return m, nil
}
