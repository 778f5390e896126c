package awslimits

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A request as the rules read it: its parameters decoded from the wire into
// a document of map[string]any (structures and maps), []any (lists) and
// leaves (string, json.Number, bool), named as the service's protocol names
// them. For the JSON protocols (SQS, DynamoDB, CloudWatch Logs, SSM, Secrets Manager) that is the JSON body; for
// EC2's query protocol, the form's flattened keys nested again
// (TagSpecification.1.Tag.2.Key becomes TagSpecification[0].Tag[1].Key),
// with every leaf a string.

// targetPrefixes are the X-Amz-Target prefixes of the JSON services, by
// SigV4 signing name.
var targetPrefixes = map[string]string{"sqs": "AmazonSQS.", "dynamodb": "DynamoDB_20120810.", "logs": "Logs_20140328.", "ssm": "AmazonSSM.", "secretsmanager": "secretsmanager."}

// Action is the action of a request to service: X-Amz-Target's for the JSON
// protocols, "" for the query protocol (whose action is in the body).
func Action(service string, h http.Header) string {
	prefix, ok := targetPrefixes[service]
	if !ok {
		return ""
	}
	action, _ := strings.CutPrefix(h.Get("X-Amz-Target"), prefix)
	return action
}

// CheckHTTP applies the rules to a request to service (its SigV4 signing
// name) with header h and body, and returns AWS's answer to the first rule
// it breaks, or nil. Callers that can tell the action from the header
// (Action) skip the body of requests no rule watches.
func CheckHTTP(service string, h http.Header, body []byte) *Refusal {
	if _, ok := targetPrefixes[service]; ok {
		action := Action(service, h)
		if !Watches(service, action) {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var doc map[string]any
		if dec.Decode(&doc) != nil {
			return nil // not JSON: the emulator's to answer
		}
		return Check(service, action, doc)
	}
	if !strings.HasPrefix(h.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil // not a form: the emulator's to answer
	}
	action := form.Get("Action")
	if !Watches(service, action) {
		return nil
	}
	return Check(service, action, FormDocument(form))
}

// EntryFailuresHTTP applies the per-entry rules (CheckEntries) to a batch
// request to service of the JSON protocols that CheckHTTP takes, and
// returns the entries AWS fails alone and the request's body without them,
// for the others to be carried out: nil when no entry is left (nil and the
// body when none fails). The caller answers the failures:
// WriteEntryFailures when no entry is left, MergeEntryFailures into the
// answer to the others.
func EntryFailuresHTTP(service string, h http.Header, body []byte) ([]EntryFailure, []byte) {
	if _, ok := targetPrefixes[service]; !ok {
		return nil, body
	}
	action := Action(service, h)
	if !Watches(service, action) {
		return nil, body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil {
		return nil, body
	}
	failures := CheckEntries(service, action, doc)
	if len(failures) == 0 {
		return nil, body
	}
	failed := map[string]bool{}
	for _, f := range failures {
		failed[f.ID] = true
	}
	var rest []any
	for _, e := range list(doc, "Entries") {
		if id, _ := str(field(e, "Id")); !failed[id] {
			rest = append(rest, e)
		}
	}
	if len(rest) == 0 {
		return failures, nil
	}
	doc["Entries"] = rest
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, body
	}
	return failures, out
}

// entryFailureJSON is an entry failure as SQS's JSON protocol writes it
// (BatchResultErrorEntry).
func entryFailureJSON(failures []EntryFailure) []any {
	out := make([]any, len(failures))
	for i, f := range failures {
		out[i] = map[string]any{"Id": f.ID, "Code": f.Code, "Message": f.Message, "SenderFault": f.SenderFault}
	}
	return out
}

// WriteEntryFailures answers a batch request to service (SQS) all of whose
// entries failed alone: HTTP 200, no entry successful, each failed.
func WriteEntryFailures(w http.ResponseWriter, service string, failures []EntryFailure) {
	body, _ := json.Marshal(map[string]any{"Successful": []any{}, "Failed": entryFailureJSON(failures)})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", requestID())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// MergeEntryFailures adds failures to the Failed entries of a JSON batch
// answer (an answer it cannot read is returned as it is).
func MergeEntryFailures(answer []byte, failures []EntryFailure) []byte {
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil {
		return answer
	}
	failed, _ := doc["Failed"].([]any)
	doc["Failed"] = append(failed, entryFailureJSON(failures)...)
	out, err := json.Marshal(doc)
	if err != nil {
		return answer
	}
	return out
}

// FormDocument nests a query-protocol form: numbered segments (1-based)
// become list elements, in order.
func FormDocument(form url.Values) map[string]any {
	root := map[string]any{}
	for key, values := range form {
		if len(values) == 0 {
			continue
		}
		insert(root, strings.Split(key, "."), values[0])
	}
	return normalize(root).(map[string]any)
}

// indexed holds a list's elements by their 1-based index until normalize
// orders them.
type indexed map[int]any

func insert(node map[string]any, path []string, value string) {
	name := path[0]
	if len(path) == 1 {
		node[name] = value
		return
	}
	if n, err := strconv.Atoi(path[1]); err == nil {
		list, _ := node[name].(indexed)
		if list == nil {
			list = indexed{}
			node[name] = list
		}
		if len(path) == 2 {
			list[n] = value
			return
		}
		child, _ := list[n].(map[string]any)
		if child == nil {
			child = map[string]any{}
			list[n] = child
		}
		insert(child, path[2:], value)
		return
	}
	child, _ := node[name].(map[string]any)
	if child == nil {
		child = map[string]any{}
		node[name] = child
	}
	insert(child, path[1:], value)
}

func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			v[k] = normalize(c)
		}
		return v
	case indexed:
		keys := make([]int, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = normalize(v[k])
		}
		return out
	}
	return v
}

// Reading documents.

// field is v's member name, or nil.
func field(v any, name string) any {
	m, _ := v.(map[string]any)
	return m[name]
}

// list is v's member name as a list (nil when absent or not a list).
func list(v any, name string) []any {
	l, _ := field(v, name).([]any)
	return l
}

// str is a leaf as text.
func str(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return string(v), true
	}
	return "", false
}

// integer is a leaf as an integer (a query form's text or a JSON number).
func integer(v any) (int64, bool) {
	s, ok := str(v)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Answering.

// WriteRefusal answers a request to service with refusal, as the service's
// protocol does: EC2's XML error document
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html#api-error-response),
// or the JSON error of SQS, with the query-compatible code in
// x-amzn-query-error, which the SDKs report
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-json-api-responses.html),
// of DynamoDB, and of CloudWatch Logs, Systems Manager and Secrets Manager (JSON 1.1).
func WriteRefusal(w http.ResponseWriter, service string, refusal *Refusal) {
	id := requestID()
	switch service {
	case "sqs", "dynamodb", "logs", "ssm", "secretsmanager":
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if service != "sqs" && service != "dynamodb" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		}
		w.Header().Set("X-Amzn-Requestid", id)
		if service == "sqs" {
			w.Header().Set("X-Amzn-Query-Error", refusal.Code+";Sender")
		}
		w.WriteHeader(refusal.Status)
		body, _ := json.Marshal(map[string]string{"__type": refusal.Type, "message": refusal.Message})
		_, _ = w.Write(body)
	default:
		var msg strings.Builder
		_ = xml.EscapeText(&msg, []byte(refusal.Message)) // a Builder does not fail
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(refusal.Status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
			refusal.Code, msg.String(), id)
	}
}

// requestID is a random request id in AWS's form (a UUID).
func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
