package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
)

// forwardReceive forwards a ReceiveMessage and, before its answer reaches
// the client, makes it behave as SQS's does rather than the emulator's:
//
//   - sampling: a receive answers with only some of the messages it got
//     (a short poll asks only some of SQS's servers; a long poll returns
//     as soon as it has one); the others are made visible again at once;
//   - redelivery: every message delivered for the first time is made
//     visible again right away, so the next receive (this client's or
//     another's) delivers it a second time with a new receipt handle (SQS
//     delivers at least once, and a visibility timeout can run out while a
//     consumer holds a message).
func (p *Proxy) forwardReceive(w http.ResponseWriter, r *http.Request, reqBody []byte) {
	p.forwardRewritten(w, r, func(answer []byte) []byte { return p.reshapeReceive(r, reqBody, answer) })
}

// crc32Header carries the CRC32 (IEEE) of an answer's body, as DynamoDB
// sends it; clients check it (botocore retries an answer that does not
// match; the Go SDK's check, as of service/dynamodb v1.73, reports a
// mismatch only as it closes the body, where it goes unseen).
const crc32Header = "X-Amz-Crc32"

// forwardRewritten forwards r and passes the body of its answer, if
// successful, through rewrite before it reaches the client, with a
// checksum that matches the body it gets.
func (p *Proxy) forwardRewritten(w http.ResponseWriter, r *http.Request, rewrite func(answer []byte) []byte) {
	rp := &httputil.ReverseProxy{
		Rewrite:   p.forward.Rewrite,
		Transport: p.transport,
		ModifyResponse: func(resp *http.Response) error {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if resp.StatusCode/100 == 2 {
				body = rewrite(body)
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			resp.ContentLength = int64(len(body))
			resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
			if resp.Header.Get(crc32Header) != "" {
				resp.Header.Set(crc32Header, strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
			}
			return nil
		},
	}
	rp.ServeHTTP(w, r)
}

// receivedMessage is the part of a received message the proxy reads.
type receivedMessage struct{ MessageId, ReceiptHandle string }

// reshapeReceive applies sampling and redelivery to one answer and returns
// the answer the client gets.
func (p *Proxy) reshapeReceive(r *http.Request, reqBody, respBody []byte) []byte {
	var in struct {
		QueueUrl        string
		WaitTimeSeconds int
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(reqBody, &in) != nil || json.Unmarshal(respBody, &out) != nil {
		return respBody
	}
	var raw []json.RawMessage
	if json.Unmarshal(out["Messages"], &raw) != nil || len(raw) == 0 {
		return respBody
	}
	p.mu.Lock()
	sampling, redelivery, handles := p.realism.SQSSampling, p.realism.SQSRedelivery, p.realism.SQSStaleHandles
	var kept []json.RawMessage
	var back []receivedMessage // made visible again
	for i, m := range raw {
		var msg receivedMessage
		_ = json.Unmarshal(m, &msg)
		// Half of them, drawn from the seeded generator; a long poll
		// keeps at least one.
		if sampling && p.rng.IntN(2) == 0 && !(in.WaitTimeSeconds > 0 && len(kept) == 0 && i == len(raw)-1) {
			back = append(back, msg)
			p.stats.Sampled++
			continue
		}
		kept = append(kept, m)
		if handles {
			p.noteReceived(msg)
		}
		if redelivery && !p.redelivered[msg.MessageId] {
			p.redelivered[msg.MessageId] = true
			back = append(back, msg)
			p.stats.Redelivered++
		}
	}
	p.mu.Unlock()
	p.makeVisible(r, in.QueueUrl, back)
	if len(kept) == len(raw) {
		return respBody
	}
	if len(kept) == 0 {
		delete(out, "Messages")
	} else {
		out["Messages"], _ = json.Marshal(kept) // raw JSON values
	}
	reshaped, _ := json.Marshal(out)
	return reshaped
}

// makeVisible makes received messages visible again at once, with the
// client's own credentials.
func (p *Proxy) makeVisible(r *http.Request, queueURL string, msgs []receivedMessage) {
	type entry struct {
		Id, ReceiptHandle string
		VisibilityTimeout int
	}
	for start := 0; start < len(msgs); start += 10 {
		var entries []entry
		for i, m := range msgs[start:min(start+10, len(msgs))] {
			entries = append(entries, entry{Id: strconv.Itoa(i), ReceiptHandle: m.ReceiptHandle})
		}
		body, _ := json.Marshal(map[string]any{"QueueUrl": queueURL, "Entries": entries}) // plain data
		if err := p.send(r, "AmazonSQS.ChangeMessageVisibilityBatch", body); err != nil {
			p.mu.Lock()
			p.stats.RealismErrors = append(p.stats.RealismErrors, err.Error())
			p.mu.Unlock()
		}
	}
}

// send makes a JSON-protocol call of the proxy's own to the target (see
// call) and fails unless it succeeds.
func (p *Proxy) send(r *http.Request, target string, body []byte) error {
	resp, _, err := p.call(r, target, body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: HTTP %d", target, resp.StatusCode)
	}
	return nil
}

// call makes a JSON-protocol call to the target, with the headers that name
// the client who caused it (emulators do not check signatures), and returns
// the answer (its body read and closed) and its body.
func (p *Proxy) call(r *http.Request, target string, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.target.String()+"/", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		req.Header.Set(h, r.Header.Get(h))
	}
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp, answer, err
}
