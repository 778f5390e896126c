package emulator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/sigv4"
)

// front is the reverse proxy Ensure puts in front of the emulator: it
// refuses what AWS refuses and the emulator takes (internal/awslimits: EC2
// user data over 16 KB, 11 entries in an SQS batch, 26 writes in a
// BatchWriteItem, a table named "a"...), with AWS's own status, code and
// message in the service's protocol, and forwards everything else
// untouched, but for the answers a quirk of the emulator behind it fixes
// (quirks.go), and the batches whose entries AWS fails alone (an SQS
// message of characters SQS does not take): those go on without the
// failed entries, and the answer lists them as Failed, as SQS's does. It reads only the requests a rule or a quirk watches: EC2's (small
// query-protocol forms, whose action is in the body), and the SQS,
// DynamoDB and CloudWatch Logs actions some rule reads (told by
// X-Amz-Target, before the body);
// the others stream through unread. It relies on nothing moto-only, so the
// tests run the same against a LocalStack.
type front struct {
	url string
	srv *http.Server
}

// startFront starts a front on a loopback port that forwards to target,
// working around quirks, the bugs of the emulator there (quirks.go).
func startFront(target string, quirks []quirk) (*front, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("emulator: bad endpoint %q", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	var reported sync.Map // errors logged
	forward := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // SigV4 signs the Host the client sent
		},
		// moto closes every connection anyway; no pool to go stale. No
		// proxy from the environment, and no Accept-Encoding of the
		// transport's own: the client's request goes out as it came.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true},
		// A failed exchange fails the client's the same way: its
		// connection drops, as it would have talking to the emulator. The
		// client then sees only an EOF: the cause goes to stderr, once.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if _, seen := reported.LoadOrStore(err.Error(), true); !seen {
				log.Printf("emulator: forwarding to %s failed (the client's connection is dropped): %v", target, err)
			}
			hangUp(w)
		},
		ErrorLog: log.New(io.Discard, "", 0),
		// The answer of a request a quirk applies to is fixed on its way.
		ModifyResponse: func(resp *http.Response) error {
			if fix, ok := resp.Request.Context().Value(fixKey{}).(func([]byte) []byte); ok {
				return fixAnswer(resp, fix)
			}
			return nil
		},
	}
	f := &front{url: "http://" + ln.Addr().String()}
	f.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			service, refusal, failures, fix, err := check(r, quirks)
			switch {
			case err != nil:
				hangUp(w) // the client is gone mid-request
			case refusal != nil:
				awslimits.WriteRefusal(w, service, refusal)
			case failures != nil && r.ContentLength == 0:
				// Every entry of the batch failed alone: nothing to forward.
				awslimits.WriteEntryFailures(w, service, failures)
			default:
				// Detached from the client: a request the emulator
				// would have received is carried out even if its client
				// dies meanwhile, as on AWS (the chaos tests kill
				// terraform mid-apply).
				ctx := context.WithoutCancel(r.Context())
				if fix != nil {
					ctx = context.WithValue(ctx, fixKey{}, fix)
				}
				forward.ServeHTTP(w, r.WithContext(ctx))
			}
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go f.srv.Serve(ln)
	return f, nil
}

func (f *front) close() { f.srv.Close() }

// fixKey carries the fix of a request's answer (quirk.fix) to the proxy.
type fixKey struct{}

// check applies the rules to a request of a service and action a rule
// watches (its SigV4 signing name, and its action as X-Amz-Target names it
// for the JSON protocols), and returns the refusal, if it breaks one, or
// else the entries of a batch AWS fails alone and the fix of its answer,
// if a quirk applies or entries failed; it leaves the body readable again
// for forwarding, without the failed entries (empty when none is left:
// the caller answers). Any other request is not read.
//
// A batch without its failed entries is forwarded with the client's
// signature, which no longer matches its body: the emulators this front
// serves (moto, LocalStack) do not check signatures.
func check(r *http.Request, quirks []quirk) (string, *awslimits.Refusal, []awslimits.EntryFailure, func([]byte) []byte, error) {
	scope, _ := sigv4.ParseScope(r.Header.Get("Authorization"))
	service := scope.Service
	if !awslimits.Watches(service, awslimits.Action(service, r.Header)) && !quirked(quirks, service) {
		return service, nil, nil, nil, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return service, nil, nil, nil, err
	}
	if refusal := awslimits.CheckHTTP(service, r.Header, body); refusal != nil {
		return service, refusal, nil, nil, nil
	}
	fix := fixOf(quirks, service, r.Header, body)
	failures, rest := awslimits.EntryFailuresHTTP(service, r.Header, body)
	if failures != nil {
		quirkFix := fix
		fix = func(answer []byte) []byte {
			if quirkFix != nil {
				answer = quirkFix(answer)
			}
			return awslimits.MergeEntryFailures(answer, failures)
		}
		body = rest
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return service, nil, failures, fix, nil
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
