package faultproxy

import "net/http"

// writeThrottle answers as DynamoDB does when it throttles a request:
// ProvisionedThroughputExceededException when exceeded (the table's or an
// index's capacity), else ThrottlingException (a rate above the account's
// or the control plane's quota); both are in the SDK's
// retry.DefaultThrottleErrorCodes. A throttled TransactWriteItems is
// cancelled instead, with ThrottlingError as the reason of its first item,
// which the SDK does not retry.
func writeThrottle(w http.ResponseWriter, action string, body []byte, exceeded bool) {
	switch {
	case action == "TransactWriteItems":
		writeCancelled(w, body, "ThrottlingError", 0)
	case exceeded:
		writeJSONError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "",
			"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.")
	default:
		writeJSONError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#ThrottlingException", "", "Rate of requests exceeds the allowed throughput.")
	}
}
