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
// single write fails with TransactionConflictException. at is the index of
// the transaction's item that conflicts.
func writeConflict(w http.ResponseWriter, action string, body []byte, at int) {
	if action == "TransactWriteItems" {
		writeCancelled(w, body, "TransactionConflict", at)
		return
	}
	writeJSONError(w, http.StatusBadRequest, "com.amazonaws.dynamodb.v20120810#TransactionConflictException", "", "Transaction is ongoing for the item")
}

// writeCancelled answers a TransactWriteItems request (body) as DynamoDB
// does when it cancels the transaction: TransactionCanceledException with
// reason as the code of its item at and None for the others (cancelled
// because of it).
func writeCancelled(w http.ResponseWriter, body []byte, reason string, at int) {
	var in struct{ TransactItems []json.RawMessage }
	_ = json.Unmarshal(body, &in)
	reasons := make([]string, max(1, len(in.TransactItems)))
	codes := make([]string, len(reasons))
	for i := range reasons {
		code := "None"
		if i == at {
			code = reason
		}
		codes[i] = code
		reasons[i] = fmt.Sprintf(`{"Code":%q}`, code)
	}
	writeJSONAnswer(w, http.StatusBadRequest, fmt.Appendf(nil, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled, please refer cancellation reasons for specific reasons [%s]","CancellationReasons":[%s]}`,
		strings.Join(codes, ", "), strings.Join(reasons, ",")))
}
