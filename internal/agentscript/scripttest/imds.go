package scripttest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Credentials the metadata service hands out; the proxy verifies signatures
// with them. The secret has '/' and '+' like real ones.
const (
	AccessKeyID     = "ASIATESTAGENT00001"
	SecretAccessKey = "agent/secret+key/0123456789abcdefghijklmn"
	SessionToken    = "IQoJb3JpZ2luX2VjEOb//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+test="
	imdsToken       = "imds-session-token"
	instanceRole    = "ec2runners-agent"
)

// IMDS is a stand-in for the instance metadata service of one instance. It
// insists on IMDSv2: every GET needs the session token from PUT /latest/api/token.
type IMDS struct {
	URL string
}

// NewIMDS serves the metadata of the instance instanceARN names (its id,
// and in its identity document its account and region; its partition) with
// the given instance tags.
func NewIMDS(t testing.TB, instanceARN string, tags map[string]string) *IMDS {
	prefix, instanceID, ok := protocol.SplitInstanceARN(instanceARN)
	if !ok {
		t.Fatalf("scripttest: %q is not an instance ARN", instanceARN)
	}
	arn := strings.Split(prefix, ":") // arn, partition, ec2, region, account, instance/
	identity, _ := json.Marshal(map[string]string{"accountId": arn[4], "region": arn[3], "instanceId": instanceID, "architecture": "x86_64"})
	creds, _ := json.Marshal(map[string]string{
		"Code": "Success", "Type": "AWS-HMAC", "LastUpdated": time.Now().UTC().Format(time.RFC3339),
		"AccessKeyId": AccessKeyID, "SecretAccessKey": SecretAccessKey, "Token": SessionToken,
		"Expiration": time.Now().Add(6 * time.Hour).UTC().Format(time.RFC3339),
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
				http.Error(w, "missing TTL", http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(imdsToken))
			return
		}
		if r.Method != http.MethodGet || r.Header.Get("X-aws-ec2-metadata-token") != imdsToken {
			http.Error(w, "IMDSv2 session token required", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/latest/dynamic/instance-identity/document" {
			_, _ = w.Write(identity)
			return
		}
		path := strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")
		switch {
		case path == "services/partition":
			_, _ = w.Write([]byte(arn[1]))
		case path == "instance-id":
			_, _ = w.Write([]byte(instanceID))
		case path == "iam/security-credentials/":
			_, _ = w.Write([]byte(instanceRole))
		case path == "iam/security-credentials/"+instanceRole:
			_, _ = w.Write(creds)
		case strings.HasPrefix(path, "tags/instance/"):
			v, ok := tags[strings.TrimPrefix(path, "tags/instance/")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte(v))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return &IMDS{URL: srv.URL}
}
