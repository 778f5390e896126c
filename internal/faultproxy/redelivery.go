package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
)

// forwardRedelivering forwards a ReceiveMessage and, before its answer
// reaches the client, makes every message in it that the proxy has not
// redelivered yet visible again, so that the next receive (this client's or
// another's) delivers it a second time with a new receipt handle. That is
// SQS's at-least-once delivery, and a visibility timeout that runs out
// while a consumer holds the message; the emulator delivers each once.
func (p *Proxy) forwardRedelivering(w http.ResponseWriter, r *http.Request, reqBody []byte) {
	rp := &httputil.ReverseProxy{
		Rewrite:   p.forward.Rewrite,
		Transport: p.transport,
		ModifyResponse: func(resp *http.Response) error {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if resp.StatusCode/100 == 2 {
				p.redeliver(r, reqBody, body)
			}
			return nil
		},
	}
	rp.ServeHTTP(w, r)
}

// redeliver makes the messages of one ReceiveMessage answer visible again,
// each once in the proxy's life.
func (p *Proxy) redeliver(r *http.Request, reqBody, respBody []byte) {
	var in struct{ QueueUrl string }
	var out struct {
		Messages []struct{ MessageId, ReceiptHandle string }
	}
	if json.Unmarshal(reqBody, &in) != nil || json.Unmarshal(respBody, &out) != nil {
		return
	}
	type entry struct {
		Id, ReceiptHandle string
		VisibilityTimeout int
	}
	var entries []entry
	p.mu.Lock()
	for _, m := range out.Messages {
		if !p.redelivered[m.MessageId] {
			p.redelivered[m.MessageId] = true
			entries = append(entries, entry{Id: strconv.Itoa(len(entries)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	p.stats.Redelivered += len(entries)
	p.mu.Unlock()
	if len(entries) == 0 {
		return
	}
	body, _ := json.Marshal(map[string]any{"QueueUrl": in.QueueUrl, "Entries": entries}) // plain data
	change, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.target.String()+"/", bytes.NewReader(body))
	if err != nil {
		return
	}
	// Emulators do not check signatures; the client's headers name the caller.
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		change.Header.Set(h, r.Header.Get(h))
	}
	change.Header.Set("X-Amz-Target", "AmazonSQS.ChangeMessageVisibilityBatch")
	change.Header.Set("Content-Type", "application/x-amz-json-1.0")
	if resp, err := p.transport.RoundTrip(change); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			p.noteRedeliveryFailure(fmt.Errorf("HTTP %d", resp.StatusCode))
		}
	} else {
		p.noteRedeliveryFailure(err)
	}
}

func (p *Proxy) noteRedeliveryFailure(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.RedeliveryErrors = append(p.stats.RedeliveryErrors, err.Error())
}
