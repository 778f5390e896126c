package faultproxy

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// holders counts the DynamoDB writes under way on one item: transactions
// and single writes.
type holders struct{ transactions, writes int }

// detectsConflicts tells whether a request is a DynamoDB write that
// realism.DynamoDBConflicts checks against the writes under way.
func (p *Proxy) detectsConflicts(service, action string) bool {
	p.mu.Lock()
	on := p.realism.DynamoDBConflicts
	p.mu.Unlock()
	return on && conflicts(service, action)
}

// forwardWrite forwards a DynamoDB write unless an item it touches is
// being written by another request meeting it as DynamoDB's transactions
// do: a transaction conflicts with any write under way on one of its
// items, a single write with a transaction under way on its item (two
// single writes to one item are serialized, not refused). The later
// request gets the conflict: writeConflict's answer, the transaction's
// reason on its first conflicting item. A write whose items the proxy
// cannot tell is forwarded as is.
func (p *Proxy) forwardWrite(w http.ResponseWriter, r *http.Request, action string, body []byte) {
	items, ok := p.writtenItems(r, action, body)
	if !ok {
		p.forward.ServeHTTP(w, r)
		return
	}
	transaction := action == "TransactWriteItems"
	if at := p.enterWrite(items, transaction); at >= 0 {
		writeConflict(w, action, body, at)
		return
	}
	defer p.leaveWrite(items, transaction)
	p.forward.ServeHTTP(w, r)
}

// enterWrite registers a write's items as under way and returns -1, or
// returns the index of the first item that conflicts (registering none).
func (p *Proxy) enterWrite(items []string, transaction bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, item := range items {
		if h := p.writing[item]; h != nil && (h.transactions > 0 || (transaction && h.writes > 0)) {
			p.stats.WriteConflicts++
			return i
		}
	}
	for _, item := range items {
		h := p.writing[item]
		if h == nil {
			h = &holders{}
			p.writing[item] = h
		}
		if transaction {
			h.transactions++
		} else {
			h.writes++
		}
	}
	return -1
}

func (p *Proxy) leaveWrite(items []string, transaction bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, item := range items {
		h := p.writing[item]
		if transaction {
			h.transactions--
		} else {
			h.writes--
		}
		if *h == (holders{}) {
			delete(p.writing, item)
		}
	}
}

// tableItem is a table and an item or key, as a write names them.
type tableItem struct {
	TableName string
	Item, Key map[string]json.RawMessage
}

// writtenItems names the items a write touches, in its order (a
// transaction's condition checks too), each as its table and key.
func (p *Proxy) writtenItems(r *http.Request, action string, body []byte) ([]string, bool) {
	var targets []tableItem
	if action == "TransactWriteItems" {
		var in struct {
			TransactItems []map[string]tableItem // by Put, Update, Delete, ConditionCheck
		}
		if json.Unmarshal(body, &in) != nil {
			return nil, false
		}
		for _, op := range in.TransactItems {
			for _, target := range op {
				targets = append(targets, target)
			}
		}
	} else {
		var in tableItem
		if json.Unmarshal(body, &in) != nil {
			return nil, false
		}
		targets = []tableItem{in}
	}
	items := make([]string, len(targets))
	for i, target := range targets {
		key := target.Key
		if key == nil { // a Put names its item, not its key
			names, ok := p.keyNames(r, target.TableName)
			if !ok {
				return nil, false
			}
			key = map[string]json.RawMessage{}
			for _, name := range names {
				key[name] = target.Item[name]
			}
		}
		items[i] = target.TableName + "\x00" + string(mustJSON(key)) // map keys sorted: one spelling per key
	}
	return items, true
}

// keyNames returns a table's key attributes, asked of the target once
// (DescribeTable) and remembered. The proxy asks under an access key of its
// own: the look-up is not a call of the client's, and a recorder of the
// client's calls (the policy check's) must not count it.
func (p *Proxy) keyNames(r *http.Request, table string) ([]string, bool) {
	p.mu.Lock()
	names, ok := p.keySchemas[table]
	p.mu.Unlock()
	if ok {
		return names, true
	}
	own := r.Clone(r.Context())
	own.Header.Set("Authorization", ownCredential(r.Header.Get("Authorization")))
	resp, answer, err := p.call(own, "DynamoDB_20120810.DescribeTable", mustJSON(map[string]string{"TableName": table}))
	var out struct {
		Table struct {
			KeySchema []struct{ AttributeName string }
		}
	}
	if err != nil || resp.StatusCode/100 != 2 || json.Unmarshal(answer, &out) != nil || len(out.Table.KeySchema) == 0 {
		return nil, false
	}
	for _, k := range out.Table.KeySchema {
		names = append(names, k.AttributeName)
	}
	slices.SortFunc(names, strings.Compare)
	p.mu.Lock()
	p.keySchemas[table] = names
	p.mu.Unlock()
	return names, true
}

// ownAccessKey signs the proxy's own requests (emulators check no
// signatures).
const ownAccessKey = "faultproxy"

// ownCredential is a SigV4 Authorization header with the access key
// replaced by the proxy's own ("Credential=AKID/date/region/service/...").
func ownCredential(auth string) string {
	before, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return auth
	}
	_, scope, _ := strings.Cut(cred, "/")
	return before + "Credential=" + ownAccessKey + "/" + scope
}
