package emulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/xml"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/awslimits"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/sigv4"
)

// front is the reverse proxy Ensure puts in front of the emulator: it
// refuses what AWS refuses and the emulator takes (internal/awslimits: EC2
// user data over 16 KB, or not base64), with AWS's own status, code and
// message, and forwards everything else untouched. It reads only the
// requests a rule watches (EC2's, small query-protocol forms); the others,
// DynamoDB's and SQS's included, stream through unread. It relies on
// nothing moto-only, so the tests run the same against a LocalStack.
type front struct {
	url string
	srv *http.Server
}

// startFront starts a front on a loopback port that forwards to target.
func startFront(target string) (*front, error) {
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
	}
	f := &front{url: "http://" + ln.Addr().String()}
	f.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			refusal, err := check(r)
			switch {
			case err != nil:
				hangUp(w) // the client is gone mid-request
			case refusal != nil:
				writeQueryError(w, refusal)
			default:
				// Detached from the client: a request the emulator
				// would have received is carried out even if its client
				// dies meanwhile, as on AWS (the chaos tests kill
				// terraform mid-apply).
				forward.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
			}
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go f.srv.Serve(ln)
	return f, nil
}

func (f *front) close() { f.srv.Close() }

// check applies the rules to a request of the query protocol (a form, as
// EC2 takes it) from a service a rule watches; it leaves the body readable
// again for forwarding. Any other request is not read.
func check(r *http.Request) (*awslimits.Refusal, error) {
	scope, _ := sigv4.ParseScope(r.Header.Get("Authorization"))
	service := scope.Service
	if !awslimits.Watches(service) || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, nil // not a form: the emulator's to answer
	}
	return awslimits.Check(service, form.Get("Action"), func(name string) (string, bool) {
		v := form[name]
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}), nil
}

// writeQueryError answers as EC2's query protocol does
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html#api-error-response).
func writeQueryError(w http.ResponseWriter, refusal *awslimits.Refusal) {
	var msg strings.Builder
	_ = xml.EscapeText(&msg, []byte(refusal.Message)) // a Builder does not fail
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(refusal.Status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
		refusal.Code, msg.String(), requestID())
}

// requestID is a random request id in AWS's form (a UUID).
func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
