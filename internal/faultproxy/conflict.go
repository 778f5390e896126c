package faultproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// conflicts tells whether a DynamoDB action can meet a transaction
// conflict: the writes.
func conflicts(service, action string) bool {
	if service != "dynamodb" {
		return false
	}
	switch action {
	case "TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem":
		return true
	}
	return false
}

// writeConflict answers as DynamoDB does when another transaction touches
// the same items: a transaction is cancelled for a TransactionConflict, a
// single write fails with TransactionConflictException.
func writeConflict(w http.ResponseWriter, action string, body []byte) {
	if action == "TransactWriteItems" {
		writeCancelled(w, body, "TransactionConflict")
		return
	}
	writeJSONError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#TransactionConflictException", "", "Transaction is ongoing for the item")
}

// writeCancelled answers a TransactWriteItems request (body) as DynamoDB
// does when it cancels the transaction: TransactionCanceledException with
// reason as the code of its first item and None for the others (cancelled
// because of it).
func writeCancelled(w http.ResponseWriter, body []byte, reason string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	var in struct{ TransactItems []json.RawMessage }
	_ = json.Unmarshal(body, &in)
	reasons := make([]string, max(1, len(in.TransactItems)))
	codes := make([]string, len(reasons))
	for i := range reasons {
		code := "None"
		if i == 0 {
			code = reason
		}
		codes[i] = code
		reasons[i] = fmt.Sprintf(`{"Code":%q}`, code)
	}
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled, please refer cancellation reasons for specific reasons [%s]","CancellationReasons":[%s]}`,
		strings.Join(codes, ", "), strings.Join(reasons, ","))
}
