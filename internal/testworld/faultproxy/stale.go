package faultproxy

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
)

// checksHandles tells whether a request carries receipt handles the proxy
// checks for staleness (realism.SQSStaleHandles).
func (p *Proxy) checksHandles(service, action string) bool {
	p.mu.Lock()
	on := p.realism.SQSStaleHandles
	p.mu.Unlock()
	if !on || service != "sqs" {
		return false
	}
	switch action {
	case "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch":
		return true
	}
	return false
}

// noteReceived records the handle a message was just received with: its
// earlier handles are stale from now on. p.mu is held.
func (p *Proxy) noteReceived(msg receivedMessage) {
	p.handleOf[msg.MessageId] = msg.ReceiptHandle
	p.messageOf[msg.ReceiptHandle] = msg.MessageId
}

// stale tells whether handle was superseded by a later receive of its
// message, and counts it if so. Handles the proxy never saw are not.
func (p *Proxy) stale(handle string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, seen := p.messageOf[handle]
	if seen && p.handleOf[id] != handle {
		p.stats.StaleHandles++
		return true
	}
	return false
}

// forwardHandles forwards a request with receipt handles as SQS answers it
// when some are stale: a delete with one succeeds and deletes nothing, a
// visibility change with one fails with ReceiptHandleIsInvalid; a batch
// forwards only its entries with current handles and merges the answers.
func (p *Proxy) forwardHandles(w http.ResponseWriter, r *http.Request, action string, body []byte) {
	deletes := action == "DeleteMessage" || action == "DeleteMessageBatch"
	if action == "DeleteMessage" || action == "ChangeMessageVisibility" {
		var in struct{ ReceiptHandle string }
		switch {
		case json.Unmarshal(body, &in) != nil || !p.stale(in.ReceiptHandle):
			p.forward.ServeHTTP(w, r)
		case deletes:
			writeJSON(w, map[string]any{})
		default:
			writeJSONError(w, http.StatusBadRequest, "com.amazonaws.sqs#ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid;Sender", invalidHandle(in.ReceiptHandle))
		}
		return
	}
	var in map[string]json.RawMessage
	var entries []json.RawMessage
	if json.Unmarshal(body, &in) != nil || json.Unmarshal(in["Entries"], &entries) != nil {
		p.forward.ServeHTTP(w, r)
		return
	}
	var current []json.RawMessage
	out := batchAnswer{Successful: []json.RawMessage{}, Failed: []json.RawMessage{}}
	for _, e := range entries {
		var entry struct{ Id, ReceiptHandle string }
		_ = json.Unmarshal(e, &entry)
		switch {
		case !p.stale(entry.ReceiptHandle):
			current = append(current, e)
		case deletes:
			out.Successful = append(out.Successful, mustJSON(map[string]string{"Id": entry.Id}))
		default:
			out.Failed = append(out.Failed, mustJSON(map[string]any{"Id": entry.Id, "Code": "ReceiptHandleIsInvalid",
				"SenderFault": true, "Message": invalidHandle(entry.ReceiptHandle)}))
		}
	}
	if len(current) == len(entries) {
		p.forward.ServeHTTP(w, r)
		return
	}
	if len(current) > 0 {
		in["Entries"] = mustJSON(current)
		resp, answer, err := p.call(r, r.Header.Get("X-Amz-Target"), mustJSON(in))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var theirs batchAnswer
		if resp.StatusCode/100 != 2 || json.Unmarshal(answer, &theirs) != nil {
			// The whole batch failed (e.g. no such queue): as it would
			// have with every entry.
			maps.Copy(w.Header(), resp.Header)
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(answer)
			return
		}
		out.Successful = append(theirs.Successful, out.Successful...)
		out.Failed = append(theirs.Failed, out.Failed...)
	}
	writeJSON(w, out)
}

// batchAnswer is the answer to SQS's batch actions.
type batchAnswer struct{ Successful, Failed []json.RawMessage }

// invalidHandle is SQS's message for a receipt handle it rejects.
func invalidHandle(handle string) string {
	return fmt.Sprintf("The input receipt handle %q is not a valid receipt handle.", handle)
}

// writeJSON answers 200 with v in SQS's JSON protocol.
func writeJSON(w http.ResponseWriter, v any) { writeJSONAnswer(w, http.StatusOK, mustJSON(v)) }

// mustJSON marshals plain data, which cannot fail.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
