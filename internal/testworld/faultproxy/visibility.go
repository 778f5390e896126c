package faultproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
)

// expiresSooner tells whether a request is a receive whose visibility
// timeout realism.SQSVisibilityExpiry cuts.
func (p *Proxy) expiresSooner(service, action string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.realism.SQSVisibilityExpiry > 0 && service == "sqs" && action == "ReceiveMessage"
}

// cutVisibility rewrites a ReceiveMessage so that the messages it receives
// are hidden for at most SQSVisibilityExpiry (in SQS's whole seconds, at
// least one), also when it asked for none (the queue's default), and
// returns the body forwarded. A body it cannot read is forwarded as is.
func (p *Proxy) cutVisibility(r *http.Request, body []byte) []byte {
	p.mu.Lock()
	limit := int(max(1, math.Ceil(p.realism.SQSVisibilityExpiry.Seconds())))
	p.mu.Unlock()
	var in map[string]json.RawMessage
	if json.Unmarshal(body, &in) != nil {
		return body
	}
	var asked int
	if v, ok := in["VisibilityTimeout"]; ok && (json.Unmarshal(v, &asked) != nil || asked <= limit) {
		return body
	}
	in["VisibilityTimeout"] = mustJSON(limit)
	cut := mustJSON(in)
	r.Body = io.NopCloser(bytes.NewReader(cut))
	r.ContentLength = int64(len(cut))
	p.mu.Lock()
	p.stats.VisibilityCut++
	p.mu.Unlock()
	return cut
}
