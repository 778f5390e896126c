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
// the same items: a transaction is cancelled with TransactionConflict as the
// reason of its first write and None for the others (cancelled because of
// it); a single write fails with TransactionConflictException.
func writeConflict(w http.ResponseWriter, action string, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	if action != "TransactWriteItems" {
		fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}`)
		return
	}
	var in struct{ TransactItems []json.RawMessage }
	_ = json.Unmarshal(body, &in)
	reasons := make([]string, max(1, len(in.TransactItems)))
	codes := make([]string, len(reasons))
	for i := range reasons {
		code := "None"
		if i == 0 {
			code = "TransactionConflict"
		}
		codes[i] = code
		reasons[i] = fmt.Sprintf(`{"Code":%q}`, code)
	}
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled, please refer cancellation reasons for specific reasons [%s]","CancellationReasons":[%s]}`,
		strings.Join(codes, ", "), strings.Join(reasons, ","))
}
