package faultproxy

import "net/http"

// Identify names a request's service ("dynamodb", "sqs", "ec2", or the SigV4
// signing name) and API action as the proxy does, for other layers in front
// of the emulator (the call recorder) that classify requests the same way.
func Identify(r *http.Request, body []byte) (service, action string) {
	return identify(r, body)
}
