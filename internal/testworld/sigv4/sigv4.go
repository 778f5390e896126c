// Package sigv4 reads what the proxies between the tests and the emulator
// need of a request's AWS Signature Version 4: its credential scope.
package sigv4

import "strings"

// Scope is the credential scope of a SigV4 Authorization header:
// "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/ec2/aws4_request, ...".
type Scope struct {
	AccessKeyID, Date, Region, Service string
}

// ParseScope reads the scope of an Authorization header; ok is false when
// it is not a SigV4 one.
func ParseScope(auth string) (s Scope, ok bool) {
	_, cred, found := strings.Cut(auth, "Credential=")
	if !found {
		return Scope{}, false
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(strings.TrimSpace(cred), "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return Scope{}, false
	}
	return Scope{AccessKeyID: parts[0], Date: parts[1], Region: parts[2], Service: parts[3]}, true
}
