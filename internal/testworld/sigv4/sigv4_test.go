package sigv4

import "testing"

func TestParseScope(t *testing.T) {
	s, ok := ParseScope("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=abc")
	if !ok || s != (Scope{AccessKeyID: "AKID", Date: "20260101", Region: "us-east-1", Service: "ec2"}) {
		t.Errorf("scope %+v, %v", s, ok)
	}
	for _, bad := range []string{"", "Bearer x", "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/ec2, SignedHeaders=host"} {
		if _, ok := ParseScope(bad); ok {
			t.Errorf("%q read as a SigV4 scope", bad)
		}
	}
}
