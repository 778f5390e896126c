package agentsim

import "regexp"

// requestID is the part of an AWS SDK error that differs between attempts.
var requestID = regexp.MustCompile(`RequestID: [^,]*`)

// ErrorKey identifies an error for logging each distinct one once: its
// message without the request id, which every attempt's answer has anew.
func ErrorKey(err error) string {
	return requestID.ReplaceAllString(err.Error(), "RequestID: …")
}
