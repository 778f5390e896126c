package awsrecord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/faultproxy"
	"github.com/ec2runners/terraform-provider-ec2runners/internal/testworld/sigv4"
)

// Start puts a recorder in front of endpoint when EnvDir names a directory,
// writing the calls to <dir>/<name>.jsonl, and returns the URL to use
// instead of endpoint; otherwise it returns endpoint. Call stop when done.
func Start(ctx context.Context, endpoint, name string) (url string, stop func(), err error) {
	return StartFor(ctx, endpoint, endpoint, name)
}

// StartFor is Start for target, an endpoint of a service the emulator at
// emulator does not serve (lambdaworld's Lambda): the calls name the
// emulator's account and partition, as the calls of the other services.
func StartFor(ctx context.Context, target, emulator, name string) (url string, stop func(), err error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		return target, func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("awsrecord: %w", err)
	}
	r, err := newRecorder(ctx, target, emulator, filepath.Join(dir, name+".jsonl"))
	if err != nil {
		return "", nil, err
	}
	return r.url, r.close, nil
}

type recorder struct {
	url       string
	srv       *http.Server
	forward   *httputil.ReverseProxy
	lookup    *tagLookup
	partition string
	account   string

	mu   sync.Mutex
	out  *os.File
	seen map[string]bool
}

// newRecorder forwards to endpoint; the emulator at emulator tells the
// account and the resources' tags.
func newRecorder(ctx context.Context, endpoint, emulator, path string) (*recorder, error) {
	target, err := url.Parse(endpoint)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("awsrecord: bad endpoint %q", endpoint)
	}
	// The emulator's account and partition, as the pool resource learns them.
	creds := credentials.NewStaticCredentialsProvider("test", TestSecret, "")
	who, err := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(emulator), Credentials: creds}).
		GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return nil, fmt.Errorf("awsrecord: the emulator's account: %w", err)
	}
	a, err := arn.Parse(aws.ToString(who.Arn))
	if err != nil {
		return nil, fmt.Errorf("awsrecord: the caller's ARN: %w", err)
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("awsrecord: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("awsrecord: %w", err)
	}
	r := &recorder{
		url:       "http://" + ln.Addr().String(),
		lookup:    newTagLookup(emulator, creds),
		partition: a.Partition,
		account:   aws.ToString(who.Account),
		out:       out,
		seen:      map[string]bool{},
	}
	r.forward = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // signed by the client
		},
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *recorder) close() {
	r.srv.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out.Close()
}

// ServeHTTP records a request's calls before forwarding it: AWS authorizes
// a request before carrying it out, whatever its outcome.
func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	if scope, ok := sigv4.ParseScope(req.Header.Get("Authorization")); ok {
		key, region := scope.AccessKeyID, scope.Region
		if role, instance := role(key); role != "" {
			service, action := faultproxy.Identify(req, body)
			if service == "" && scope.Service == "lambda" && req.Method == http.MethodPost && lambdaInvoke.MatchString(req.URL.EscapedPath()) {
				service, action = "lambda", "Invoke" // a REST API: the action is in the path
			}
			rq := request{service: service, action: action, body: body, url: req.URL, base: Call{
				Role: role, Partition: r.partition, Region: region, Account: r.account,
			}}
			if instance != "" {
				rq.sourceInstance = r.arn(region, "ec2", "instance/"+instance)
			}
			r.write(rq.calls(req.Context(), r))
		}
	}
	r.forward.ServeHTTP(w, req)
}

func (r *recorder) write(calls []Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range calls {
		line, err := json.Marshal(c)
		if err != nil || r.seen[string(line)] {
			continue
		}
		r.seen[string(line)] = true
		_, _ = r.out.Write(append(line, '\n'))
	}
}

// arn is an ARN of the emulator's account.
func (r *recorder) arn(region, service, resource string) string {
	return arn.ARN{Partition: r.partition, Service: service, Region: region, AccountID: r.account, Resource: resource}.String()
}
