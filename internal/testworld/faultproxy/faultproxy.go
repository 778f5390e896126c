// Package faultproxy puts a fault-injecting HTTP proxy between AWS SDK clients
// and an AWS endpoint (the emulator), so tests can see how code behaves when
// AWS throttles, fails, or loses a request or its response.
//
// Point a client's BaseEndpoint at Proxy.URL. Every request is identified by
// service ("dynamodb", "sqs", "ec2") and API action, then, by the rules in
// force, either forwarded as is or given one fault:
//
//   - Throttle and ServerError answer with the error the service itself sends,
//     so the SDK's retryer classifies it as it would AWS's;
//   - DropBefore closes the connection without forwarding: AWS never saw it;
//   - DropAfter forwards the request (it takes effect), then closes the
//     connection instead of answering: the client cannot know it succeeded;
//   - Latency waits before forwarding.
//
// Which requests get a fault is drawn from a seeded generator, so a run with
// the same seed and the same sequence of requests injects the same faults.
//
// Realism switches on what AWS does and the emulator does not (see
// SetRealism); SetShortages makes EC2 short of capacity, which the emulator
// never is.
package faultproxy

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/sigv4"
)

// Kind is a kind of fault. The zero value, None, is no fault.
type Kind int

const (
	None        Kind = iota
	Throttle         // the service's throttling error
	ServerError      // HTTP 500 with the service's internal error
	DropBefore       // connection closed, request not forwarded
	DropAfter        // request forwarded, then connection closed unanswered
	Latency          // Rule.Delay added before forwarding
	// Conflict: DynamoDB's answer when another transaction touches the same
	// items: TransactWriteItems cancelled with a TransactionConflict reason,
	// a single write's TransactionConflictException. Only DynamoDB writes
	// get it.
	Conflict
)

func (k Kind) String() string {
	switch k {
	case None:
		return "None"
	case Throttle:
		return "Throttle"
	case ServerError:
		return "ServerError"
	case DropBefore:
		return "DropBefore"
	case DropAfter:
		return "DropAfter"
	case Latency:
		return "Latency"
	case Conflict:
		return "Conflict"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rule injects Kind into a fraction Rate (0..1) of the requests for Service
// ("" = any) and Action ("" = any). Delay is the Latency rule's delay.
type Rule struct {
	Service string
	Action  string
	Kind    Kind
	Rate    float64
	Delay   time.Duration
}

// Request is what a hook learns about a request before it is acted on.
type Request struct {
	Seq     int    // 1 for the proxy's first request, in order of arrival
	Service string // "dynamodb", "sqs", "ec2", another signing name, or "" if unknown
	Action  string // e.g. "UpdateItem", "ReceiveMessage", "CreateFleet"
	Fault   Kind   // the fault about to be injected, None if forwarded as is
	Body    []byte // the request body; do not modify
}

// Op is a service and action.
type Op struct{ Service, Action string }

func (o Op) String() string { return o.Service + " " + o.Action }

// Fault is a kind of fault injected into an Op.
type Fault struct {
	Op
	Kind Kind
}

func (f Fault) String() string { return f.Op.String() + " " + f.Kind.String() }

// Stats counts requests by Op and injected faults by Op and Kind.
type Stats struct {
	Requests map[Op]int
	Faults   map[Fault]int
	// Realism's counts: SQS messages delivered again, and held back by a
	// sampled receive; RealismErrors says why making messages visible
	// again failed. StaleHandles counts the superseded receipt handles
	// seen in deletes and visibility changes. InstancesNotFound counts the
	// EC2 requests answered InvalidInstanceID.NotFound for naming an
	// instance launched less than EC2Lag ago, InstancesHidden the instances
	// left out of DescribeInstances answers for it. VisibilityCut counts
	// the receives whose visibility timeout SQSVisibilityExpiry cut,
	// WriteConflicts the DynamoDB writes refused for DynamoDBConflicts.
	// FleetsShort counts the CreateFleet requests a Shortage cut.
	Redelivered, Sampled, StaleHandles, VisibilityCut, WriteConflicts int
	InstancesNotFound, InstancesHidden, FleetsShort                   int
	RealismErrors                                                     []string
}

// TotalFaults counts the injected faults of kind k (None: of any kind).
func (s Stats) TotalFaults(k Kind) int {
	n := 0
	for f, c := range s.Faults {
		if k == None || f.Kind == k {
			n += c
		}
	}
	return n
}

// String lists the counts in a stable order, for logs.
func (s Stats) String() string {
	var b strings.Builder
	for _, op := range slices.SortedFunc(maps.Keys(s.Requests), func(a, b Op) int {
		return strings.Compare(a.String(), b.String())
	}) {
		fmt.Fprintf(&b, "%s: %d", op, s.Requests[op])
		for k := Throttle; k <= Conflict; k++ {
			if n := s.Faults[Fault{op, k}]; n > 0 {
				fmt.Fprintf(&b, " %s=%d", k, n)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	URL string // http://127.0.0.1:port, for the clients' BaseEndpoint

	srv       *http.Server
	forward   *httputil.ReverseProxy // forwards and answers
	forwardNR *httputil.ReverseProxy // forwards, then drops the answer (DropAfter)
	done      chan struct{}          // closed by Close, ends Latency waits
	closeOnce sync.Once

	transport http.RoundTripper
	target    *url.URL

	mu      sync.Mutex
	rng     *rand.Rand
	rules   []Rule
	paused  bool
	hook    func(Request) Kind
	seq     int
	stats   Stats
	realism Realism
	tokens  map[string]*tokenAnswer // by ClientToken, with realism.ClientTokens
	// redelivered: SQS message ids delivered again, with realism.SQSRedelivery
	redelivered map[string]bool
	// With realism.SQSStaleHandles: each received message's latest receipt
	// handle, and the message of every handle received.
	handleOf, messageOf map[string]string
	// launched: when each instance launched less than realism.EC2Lag ago
	// was (its launch answer arrived)
	launched map[string]time.Time
	// With realism.DynamoDBConflicts: the items of the writes under way,
	// and the key attributes of each table written.
	writing    map[string]*holders
	keySchemas map[string][]string
	// shortages: the capacity EC2 lacks (SetShortages)
	shortages []Shortage
}

// Realism is what AWS does that the emulator does not; each is off until
// switched on.
type Realism struct {
	// ClientTokens: an EC2 request that repeats the ClientToken of one EC2
	// has already carried out (a retry, or another attempt with the same
	// token) launches nothing and gets the first request's answer, or, when
	// its parameters differ from the first's, fails with
	// IdempotentParameterMismatch, as AWS documents for idempotent
	// requests; moto carries out both.
	ClientTokens bool
	// SQSRedelivery: every message a ReceiveMessage returns is delivered
	// once more, with a new receipt handle, right after (see
	// forwardReceive); the emulator delivers each once.
	SQSRedelivery bool
	// SQSSampling: a ReceiveMessage answers with about half the messages
	// it could (a long poll with at least one), as SQS's sampled receives
	// do; the emulator answers with every one.
	SQSSampling bool
	// SQSStaleHandles: a receipt handle is superseded once its message is
	// received again, as SQS documents: a DeleteMessage with it succeeds
	// but deletes nothing ("If you use an old ReceiptHandle, the request
	// will succeed, but the message might not be deleted"), a
	// ChangeMessageVisibility with it fails with
	// ReceiptHandleIsInvalid (in a batch, that entry fails); the emulator
	// accepts every handle a message ever had. Handles are those of the
	// ReceiveMessage answers the proxy passed on while this was on.
	SQSStaleHandles bool
	// SQSVisibilityExpiry: a visibility timeout runs out while its
	// consumer still holds the message (a long claim, a slow consumer):
	// every ReceiveMessage hides what it receives for at most this long,
	// whatever it asked for, so the message is delivered again mid-claim,
	// to this consumer or another, with a new receipt handle (the old one
	// superseded, with SQSStaleHandles). 0: off.
	SQSVisibilityExpiry time.Duration
	// DynamoDBConflicts: DynamoDB refuses a write that meets a transaction
	// on one of its items (TransactionConflict), as the emulator, which
	// serializes requests, never does: see forwardWrite.
	DynamoDBConflicts bool
	// EC2Lag: EC2's eventual consistency. An instance launched through the
	// proxy (RunInstances, CreateFleet) is unknown to EC2 for EC2Lag
	// after its launch, as AWS documents ("eventual consistency"): a
	// DescribeInstances listing instances leaves it out (and a
	// reservation with only such instances), and a request naming it
	// (DescribeInstances, TerminateInstances, StopInstances,
	// StartInstances, CreateTags, DeleteTags, ModifyInstanceAttribute)
	// fails with InvalidInstanceID.NotFound ("The instance ID 'i-…' does
	// not exist") and is not carried out. The emulator knows an instance
	// at once. 0: off.
	EC2Lag time.Duration
}

// WholeRealism switches on everything AWS does that the emulator does not,
// with durations AWS shows: a visibility timeout that runs out 3 s into a
// claim (a shorter one would only make claims launch needlessly), and EC2
// knowing a new instance 5 s after its launch.
func WholeRealism() Realism {
	return Realism{ClientTokens: true, SQSRedelivery: true, SQSSampling: true, SQSStaleHandles: true,
		SQSVisibilityExpiry: 3 * time.Second, DynamoDBConflicts: true, EC2Lag: 5 * time.Second}
}

// tokenAnswer is the answer to the first request with a ClientToken; done
// is closed once it is known (ok: the target answered).
type tokenAnswer struct {
	done    chan struct{}
	request string // the first request's parameters (canonicalForm)
	ok      bool
	status  int
	header  http.Header
	body    []byte
}

// canonicalForm is a query-protocol request's parameters in a stable
// order, to compare requests that carry the same ClientToken.
func canonicalForm(body []byte) string {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return string(body)
	}
	return form.Encode()
}

// errDropAfter makes the DropAfter reverse proxy hand its response to the
// error handler, which drops it.
var errDropAfter = errors.New("faultproxy: response dropped")

// New starts a proxy on a loopback port that forwards to target (e.g. the
// emulator's endpoint) and draws its faults from seed. It injects nothing
// until SetRules. Close it when done.
func New(target string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: bad target %q", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	// The emulator closes every connection anyway; no pool to go stale.
	transport := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	p := &Proxy{
		URL:       "http://" + ln.Addr().String(),
		done:      make(chan struct{}),
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stats:     Stats{Requests: map[Op]int{}, Faults: map[Fault]int{}},
		transport: transport,
		target:    u,
		tokens:    map[string]*tokenAnswer{},

		redelivered: map[string]bool{},
		handleOf:    map[string]string{},
		messageOf:   map[string]string{},
		launched:    map[string]time.Time{},
		writing:     map[string]*holders{},
		keySchemas:  map[string][]string{},
	}
	rewrite := func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		// Keep the Host the client signed (SigV4 signs it), so a proxy or
		// endpoint that checks signatures still accepts the request.
		pr.Out.Host = pr.In.Host
	}
	p.forward = &httputil.ReverseProxy{Rewrite: rewrite, Transport: transport}
	p.forwardNR = &httputil.ReverseProxy{
		Rewrite:   rewrite,
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			// Read the whole answer: the target has done its work
			// (and a launch's instances are as new as if answered).
			if answer, err := io.ReadAll(resp.Body); err == nil {
				p.noteLaunches(answer)
			}
			return errDropAfter
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, errDropAfter) {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			hangUp(w)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the proxy and closes its connections. Hooks still blocked are
// the caller's to release.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() { close(p.done) })
	p.srv.Close()
}

// SetRules replaces the rules. For each request the matching rules are tried
// in order, each with its own draw; the first that fires gives the fault.
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = slices.Clone(rules)
}

// Pause stops (true) or resumes (false) fault injection, e.g. around a test's
// setup and its final audit. Requests are still counted and hooked, and no
// draws are made while paused.
func (p *Proxy) Pause(paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = paused
}

// OnRequest sets the hook (nil: none) called for every request, after the
// fault is chosen and before anything is forwarded or answered. The hook may
// return a fault for its own request, instead of the one drawn (None keeps
// that one). The hook may block: the request waits (in flight for its
// client) until it returns, while other requests proceed, so it must be
// safe for concurrent calls.
//
// Forwarding does not depend on the client staying connected: a request the
// proxy has received reaches the target even if its client dies meanwhile
// (as a request AWS has received is carried out), unless its fault is
// DropBefore. So a hook that kills the client and then returns simulates a
// crash after the call took effect, and with a DropBefore rule, before; a
// hook that returns DropAfter, a crash before the answer arrived.
func (p *Proxy) OnRequest(hook func(Request) Kind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = hook
}

// SetRealism switches AWS behaviours on and off.
func (p *Proxy) SetRealism(r Realism) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.realism = r
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Requests: maps.Clone(p.stats.Requests), Faults: maps.Clone(p.stats.Faults),
		Redelivered: p.stats.Redelivered, Sampled: p.stats.Sampled, StaleHandles: p.stats.StaleHandles, VisibilityCut: p.stats.VisibilityCut, WriteConflicts: p.stats.WriteConflicts,
		InstancesNotFound: p.stats.InstancesNotFound, InstancesHidden: p.stats.InstancesHidden, FleetsShort: p.stats.FleetsShort,
		RealismErrors: slices.Clone(p.stats.RealismErrors)}
}

// ServeHTTP handles one request from a client.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	service, action := identify(r, body)

	req, rule, exceeded, hook := p.decide(service, action, body)
	if hook != nil {
		if k := hook(req); k != None {
			rule = Rule{Kind: k}
			p.mu.Lock()
			exceeded = p.drawExceeded(service, k)
			p.mu.Unlock()
		}
	}
	if rule.Kind != None {
		p.mu.Lock()
		p.stats.Faults[Fault{Op{service, action}, rule.Kind}]++
		p.mu.Unlock()
	}
	// Detached from the client: see OnRequest.
	r = r.WithContext(context.WithoutCancel(r.Context()))
	// EC2 short of capacity: the emulator is asked for what EC2 has, and
	// its answer gets the errors for the rest; when EC2 has nothing, the
	// proxy answers (own).
	var answer func([]byte) []byte
	var own []byte
	asked := body
	if rule.Kind != Throttle && rule.Kind != ServerError && rule.Kind != DropBefore && rule.Kind != Conflict {
		if short, ok := p.shortFleet(service, action, body); ok {
			if short.forward == nil {
				own = short.none()
			} else {
				body = short.forward
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
				answer = short.withErrors
			}
		}
	}
	if token := p.clientToken(service, asked); token != "" && rule.Kind != Throttle && rule.Kind != ServerError && rule.Kind != DropBefore {
		p.forwardOnce(w, r, token, asked, rule, answer, own)
		return
	}
	if own != nil {
		p.answerOwn(w, rule, own)
		return
	}
	switch rule.Kind {
	case Throttle, ServerError:
		if service == "dynamodb" && rule.Kind == Throttle {
			writeThrottle(w, action, body, exceeded)
			return
		}
		writeError(w, service, rule.Kind)
	case Conflict:
		writeConflict(w, action, body, 0)
	case DropBefore:
		hangUp(w)
	case DropAfter:
		p.forwardNR.ServeHTTP(w, r)
	case Latency:
		t := time.NewTimer(rule.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.done:
		}
		p.forwardRealistic(w, r, service, action, body, answer)
	default:
		p.forwardRealistic(w, r, service, action, body, answer)
	}
}

// answerOwn answers, as rule has it, with the proxy's own EC2 answer (a
// fleet EC2 launched nothing for).
func (p *Proxy) answerOwn(w http.ResponseWriter, rule Rule, own []byte) {
	switch rule.Kind {
	case DropAfter:
		hangUp(w)
		return
	case Latency:
		t := time.NewTimer(rule.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.done:
		}
	}
	writeEC2Answer(w, own)
}

// writeEC2Answer answers with a successful answer of EC2's query protocol.
func writeEC2Answer(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// forwardRealistic forwards a request, and its answer, as AWS would carry
// them out with the realism in force; answer (nil: none) rewrites a
// successful answer first.
func (p *Proxy) forwardRealistic(w http.ResponseWriter, r *http.Request, service, action string, body []byte, answer func([]byte) []byte) {
	if p.expiresSooner(service, action) {
		body = p.cutVisibility(r, body)
	}
	switch {
	case answer != nil:
		lagging := p.lagging(service, action)
		p.forwardRewritten(w, r, func(a []byte) []byte {
			a = answer(a)
			if lagging {
				p.noteLaunches(a)
			}
			return a
		})
	case p.reshapingReceives(service, action):
		p.forwardReceive(w, r, body)
	case p.checksHandles(service, action):
		p.forwardHandles(w, r, action, body)
	case p.detectsConflicts(service, action):
		p.forwardWrite(w, r, action, body)
	case p.lagging(service, action):
		p.forwardLagging(w, r, action, body)
	default:
		p.forward.ServeHTTP(w, r)
	}
}

func (p *Proxy) reshapingReceives(service, action string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return (p.realism.SQSRedelivery || p.realism.SQSSampling || p.realism.SQSStaleHandles) && service == "sqs" && action == "ReceiveMessage"
}

// clientToken is the request's EC2 ClientToken when repeated tokens are to
// be answered as AWS does, else "".
func (p *Proxy) clientToken(service string, body []byte) string {
	p.mu.Lock()
	on := p.realism.ClientTokens
	p.mu.Unlock()
	if !on || service != "ec2" {
		return ""
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return ""
	}
	return form.Get("ClientToken")
}

// forwardOnce carries out the first request with token and answers every
// later one asking the same (asked, the request as the client sent it)
// with its answer, once it is known, as AWS does; a later one asking
// otherwise fails with IdempotentParameterMismatch. The first request's
// answer is the target's, rewritten by answer unless nil, or own when not
// nil (the target is not asked). Rule's DropAfter and Latency apply to
// each as usual. A first request that failed leaves the token free for the
// next; those waiting on it get its answer.
func (p *Proxy) forwardOnce(w http.ResponseWriter, r *http.Request, token string, asked []byte, rule Rule, answer func([]byte) []byte, own []byte) {
	if rule.Kind == Latency {
		t := time.NewTimer(rule.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.done:
		}
	}
	p.mu.Lock()
	ans, repeated := p.tokens[token]
	if !repeated {
		ans = &tokenAnswer{done: make(chan struct{}), request: canonicalForm(asked)}
		p.tokens[token] = ans
	}
	p.mu.Unlock()
	switch {
	case repeated:
		select {
		case <-ans.done:
		case <-p.done:
			hangUp(w)
			return
		}
		if ans.ok && ans.request != canonicalForm(asked) {
			writeEC2Error(w, http.StatusBadRequest, "IdempotentParameterMismatch",
				"Arguments on this idempotent request are inconsistent with arguments used in previous request(s).")
			return
		}
	case own != nil:
		ans.ok, ans.status, ans.body = true, http.StatusOK, own
		ans.header = http.Header{"Content-Type": {"text/xml;charset=UTF-8"}}
		close(ans.done)
	default:
		p.roundTrip(r, token, ans, answer)
	}
	if !ans.ok {
		http.Error(w, "faultproxy: the target did not answer", http.StatusBadGateway)
		return
	}
	if rule.Kind == DropAfter {
		hangUp(w)
		return
	}
	maps.Copy(w.Header(), ans.header)
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
}

// roundTrip sends r, the first request with token, to the target and
// records its answer in ans, rewritten by answer (nil: as it came) when
// successful.
func (p *Proxy) roundTrip(r *http.Request, token string, ans *tokenAnswer, answer func([]byte) []byte) {
	defer close(ans.done)
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.RequestURI = ""
	resp, err := p.transport.RoundTrip(out)
	if err == nil {
		ans.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	ans.ok = err == nil
	if ans.ok {
		ans.status, ans.header = resp.StatusCode, resp.Header.Clone()
		if answer != nil && ans.status/100 == 2 {
			ans.body = answer(ans.body)
			ans.header.Del("Content-Length")
		}
		p.noteLaunches(ans.body)
	}
	// Only a request that succeeded is remembered: AWS carries out again a
	// retry of one that failed.
	if !ans.ok || ans.status/100 != 2 {
		p.mu.Lock()
		delete(p.tokens, token)
		p.mu.Unlock()
	}
}

// decide numbers the request and draws its fault (and for a DynamoDB
// throttle, its code: see drawExceeded), under one lock so that the draws
// follow the order of arrival.
func (p *Proxy) decide(service, action string, body []byte) (Request, Rule, bool, func(Request) Kind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	op := Op{service, action}
	p.stats.Requests[op]++
	var fired Rule
	// Unidentified requests (e.g. the emulator's own /moto-api/) never fail.
	if !p.paused && service != "" {
		for _, rule := range p.rules {
			if (rule.Service == "" || rule.Service == service) &&
				(rule.Action == "" || rule.Action == action) &&
				rule.Kind != None && (rule.Kind != Conflict || conflicts(service, action)) && p.rng.Float64() < rule.Rate {
				fired = rule
				break
			}
		}
	}
	req := Request{Seq: p.seq, Service: service, Action: action, Fault: fired.Kind, Body: body}
	return req, fired, p.drawExceeded(service, fired.Kind), p.hook
}

// drawExceeded draws, for a DynamoDB throttle, whether it is answered as the
// table's capacity exceeded rather than the account's rate (see
// writeThrottle); p.mu is held.
func (p *Proxy) drawExceeded(service string, k Kind) bool {
	return service == "dynamodb" && k == Throttle && p.rng.IntN(2) == 0
}

// identify names a request's service and action: from X-Amz-Target for the
// JSON protocols (DynamoDB, SQS), else from the form's Action (EC2's query
// protocol); the service falls back to the SigV4 credential scope.
func identify(r *http.Request, body []byte) (service, action string) {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		prefix, name, _ := strings.Cut(target, ".")
		action = name
		switch {
		case strings.HasPrefix(prefix, "DynamoDB_"):
			service = "dynamodb"
		case prefix == "AmazonSQS":
			service = "sqs"
		}
	} else if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if form, err := url.ParseQuery(string(body)); err == nil {
			action = form.Get("Action")
		}
	}
	if service == "" && action != "" {
		scope, _ := sigv4.ParseScope(r.Header.Get("Authorization"))
		service = scope.Service
	}
	return service, action
}

// hangUp closes the client's connection without a response.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // not hijackable (HTTP/2): abort the stream
	}
	conn.Close()
}

// writeError answers as the service does when throttled or failing. The SDK
// classifies errors by code: every throttle code used here is in
// aws/retry.DefaultThrottleErrorCodes, and HTTP 500 is retryable by status.
// DynamoDB's throttling is writeThrottle's.
func writeError(w http.ResponseWriter, service string, kind Kind) {
	throttle := kind == Throttle
	switch service {
	case "dynamodb":
		writeJSONError(w, 500, "com.amazonaws.dynamodb.v20120810#InternalServerError", "", "Internal server error")
	case "sqs":
		if throttle {
			writeJSONError(w, 400, "com.amazonaws.sqs#RequestThrottled", "RequestThrottled;Sender", "Request is throttled.")
		} else {
			writeJSONError(w, 500, "com.amazonaws.sqs#InternalError", "InternalError;Receiver", "We encountered an internal error. Please try again.")
		}
	default: // EC2's query protocol (also used for any other service)
		if throttle {
			writeEC2Error(w, 503, "RequestLimitExceeded", "Request limit exceeded.")
		} else {
			writeEC2Error(w, 500, "InternalError", "An internal error has occurred.")
		}
	}
}

// writeJSONError answers with an error of the JSON protocols (DynamoDB,
// SQS); queryErr ("Code;Sender") is SQS's.
func writeJSONError(w http.ResponseWriter, status int, typ, queryErr, msg string) {
	if queryErr != "" {
		// SQS's JSON protocol is query-compatible: the SDK takes the
		// code from this header.
		w.Header().Set("X-Amzn-Query-Error", queryErr)
	}
	writeJSONAnswer(w, status, fmt.Appendf(nil, `{"__type":%q,"message":%q}`, typ, msg))
}

// writeJSONAnswer answers with a body of the JSON protocols, and its CRC32
// as DynamoDB sends it (the Go SDK checks a DynamoDB answer against the
// header even when it is missing, and logs each mismatch; SQS ignores it).
func writeJSONAnswer(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", requestID())
	w.Header().Set(crc32Header, strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeEC2Error answers with an error of EC2's query protocol.
func writeEC2Error(w http.ResponseWriter, status int, code, msg string) {
	var text strings.Builder
	_ = xml.EscapeText(&text, []byte(msg)) // a Builder does not fail
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
		code, text.String(), requestID())
}

func requestID() string { return fmt.Sprintf("faultproxy-%016x", rand.Uint64()) }
