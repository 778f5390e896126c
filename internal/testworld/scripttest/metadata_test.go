package scripttest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The metadata service insists on IMDSv2 as EC2's does: a token whose TTL
// header is 1-21600 seconds, for every GET, until the TTL has passed.
func TestMetadata_IMDSv2(t *testing.T) {
	m := Metadata{InstanceID: "i-0123456789abcdef0", AccountID: "123456789012", Region: "eu-west-1",
		AvailabilityZone: "eu-west-1b", Partition: "aws", Tags: map[string]string{"InitialRunId": "run-7"}}
	clock := time.Now()
	h := m.Handler().(*metadataServer)
	h.now = func() time.Time { return clock }
	call := func(method, path string, header ...string) (int, string) {
		t.Helper()
		r := httptest.NewRequest(method, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(body)
	}
	for _, ttl := range []string{"", "0", "21601", "ten"} {
		if code, _ := call(http.MethodPut, tokenPath, tokenTTLHeader, ttl); code != http.StatusBadRequest {
			t.Errorf("PUT token with TTL %q: %d, want 400", ttl, code)
		}
	}
	if code, _ := call(http.MethodPut, tokenPath, tokenTTLHeader, "60", "X-Forwarded-For", "10.0.0.1"); code != http.StatusForbidden {
		t.Errorf("PUT token through a proxy: %d, want 403", code)
	}
	if code, _ := call(http.MethodGet, "/latest/meta-data/instance-id"); code != http.StatusUnauthorized {
		t.Errorf("GET without a token: %d, want 401", code)
	}
	code, token := call(http.MethodPut, tokenPath, tokenTTLHeader, "60")
	if code != http.StatusOK || token == "" {
		t.Fatalf("PUT token: %d %q", code, token)
	}
	for path, want := range map[string]string{
		"meta-data/instance-id":                              m.InstanceID,
		"meta-data/placement/region":                         "eu-west-1",
		"meta-data/placement/availability-zone":              "eu-west-1b",
		"meta-data/services/partition":                       "aws",
		"meta-data/tags/instance/InitialRunId":               "run-7",
		"meta-data/tags/instance":                            "InitialRunId",
		"meta-data/iam/security-credentials/":                instanceRole,
		"meta-data/iam/security-credentials/" + instanceRole: `"SecretAccessKey": "` + SecretAccessKey + `"`,
		"dynamic/instance-identity/document":                 `"accountId" : "123456789012",`,
	} {
		code, body := call(http.MethodGet, "/latest/"+path, tokenHeader, token)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %q, want %q in it", path, code, body, want)
		}
	}
	if code, _ := call(http.MethodGet, "/latest/meta-data/tags/instance/Other", tokenHeader, token); code != http.StatusNotFound {
		t.Errorf("GET an absent tag: %d, want 404", code)
	}
	clock = clock.Add(61 * time.Second)
	if code, _ := call(http.MethodGet, "/latest/meta-data/instance-id", tokenHeader, token); code != http.StatusUnauthorized {
		t.Errorf("GET with an expired token: %d, want 401", code)
	}
}
