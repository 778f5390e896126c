package scripttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// SigV4Proxy passes AWS requests to the emulator only when their signature is
// what the AWS SDK's own signer computes for them with the instance role's
// credentials, as AWS would check them (the emulator checks none): an
// agent's request must be signed with the credentials of the metadata
// service. A bad signature gets AWS's 403 SignatureDoesNotMatch. It also plays
// EC2's part in stopping the instance stand-ins (power.go).
type SigV4Proxy struct {
	URL string

	mu        sync.Mutex
	verified  map[string][]time.Time // when each request was seen, by "service Action"
	failures  []string
	puts      []map[string]any     // the items of verified PutItem requests, in order
	instances map[string]*Instance // the stand-ins whose agents call through it, by id
}

// NewSigV4Proxy forwards to the emulator at endpoint.
func NewSigV4Proxy(t testing.TB, endpoint string) *SigV4Proxy {
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &SigV4Proxy{verified: map[string][]time.Time{}, instances: map[string]*Instance{}}
	forward := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// Cut off on the way (an instance shutting down): AWS never sees
			// such a request, and neither does the check.
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		action, err := verify(r, body)
		p.mu.Lock()
		if err != nil {
			p.failures = append(p.failures, err.Error())
		} else {
			p.verified[action] = append(p.verified[action], time.Now())
			if action == "dynamodb PutItem" {
				var put struct{ Item map[string]any }
				if json.Unmarshal(body, &put) == nil {
					p.puts = append(p.puts, put.Item)
				}
			}
		}
		p.mu.Unlock()
		if err != nil {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"__type":"com.amazon.coral.service#SignatureDoesNotMatch","message":%q}`, err.Error())
			return
		}
		switch action {
		case "ec2 StopInstances":
			p.stopInstances(w, r, body, forward)
			return
		case "ec2 TerminateInstances":
			p.terminateInstances(w, r, body, forward)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Verified counts the requests with a good signature, by "service Action".
func (p *SigV4Proxy) Verified() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.verified))
	for k, v := range p.verified {
		out[k] = len(v)
	}
	return out
}

// VerifiedAt is when each request of action ("service Action") with a good
// signature came, in order.
func (p *SigV4Proxy) VerifiedAt(action string) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.verified[action]...)
}

// Written returns the string attribute attr of every item of the entity
// type (an item's entityType: HEARTBEAT, WS) the agent put, in the order
// written: the history the table itself overwrites.
func (p *SigV4Proxy) Written(entityType, attr string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, item := range p.puts {
		if stringAttr(item, "entityType") == entityType {
			out = append(out, stringAttr(item, attr))
		}
	}
	return out
}

func stringAttr(item map[string]any, name string) string {
	v, _ := item[name].(map[string]any)
	s, _ := v["S"].(string)
	return s
}

// Failures lists the requests refused for their signature.
func (p *SigV4Proxy) Failures() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failures...)
}

// verify re-signs the request's signed headers with the SDK's signer and
// compares the whole Authorization header.
func verify(r *http.Request, body []byte) (action string, err error) {
	auth := r.Header.Get("Authorization")
	scope, signed, ok := parseAuthorization(auth)
	if !ok {
		return "", fmt.Errorf("malformed Authorization header %q", auth)
	}
	parts := strings.Split(scope, "/") // AKID/day/region/service/aws4_request
	if len(parts) != 5 || !strings.HasPrefix(parts[0], AccessKeyID("")) {
		return "", fmt.Errorf("unexpected credential scope %q", scope)
	}
	region, service := parts[2], parts[3]
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "", fmt.Errorf("X-Amz-Date: %w", err)
	}
	if d := time.Since(when); d > 5*time.Minute || d < -5*time.Minute {
		return "", fmt.Errorf("X-Amz-Date %s is too far from now", when)
	}
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	again.Host = r.Host
	for _, h := range strings.Split(signed, ";") {
		switch h {
		case "host", "x-amz-security-token":
		case "content-length": // the server keeps it out of the header
			again.ContentLength = r.ContentLength
		default:
			again.Header.Set(h, r.Header.Get(h))
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: parts[0], SecretAccessKey: SecretAccessKey, SessionToken: SessionToken}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), service, region, when); err != nil {
		return "", err
	}
	if want := again.Header.Get("Authorization"); want != auth {
		return "", fmt.Errorf("signature mismatch for %s:\n got %s\nwant %s", service, auth, want)
	}
	if r.Header.Get("X-Amz-Security-Token") != SessionToken {
		return "", fmt.Errorf("missing or wrong X-Amz-Security-Token")
	}
	action = r.Header.Get("X-Amz-Target")
	if action == "" {
		q, _ := url.ParseQuery(string(body))
		action = q.Get("Action")
	}
	return service + " " + action[strings.LastIndex(action, ".")+1:], nil
}

func parseAuthorization(h string) (scope, signed string, ok bool) {
	rest, found := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !found {
		return "", "", false
	}
	for _, f := range strings.Split(rest, ", ") {
		switch k, v, _ := strings.Cut(f, "="); k {
		case "Credential":
			scope = v
		case "SignedHeaders":
			signed = v
		}
	}
	return scope, signed, scope != "" && signed != ""
}
