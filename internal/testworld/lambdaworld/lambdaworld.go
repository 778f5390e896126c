// Package lambdaworld runs Lambda functions on this machine as Lambda runs
// them, for tests: callers invoke them through the Lambda Invoke API
// (synchronous invocations, RequestResponse), with the real AWS SDK
// pointed at Endpoint, and each function runs as a process started from
// its executable, which talks to the Lambda Runtime API
// (AWS_LAMBDA_RUNTIME_API) as a custom runtime's bootstrap does on
// provided.al2023: aws-lambda-go's lambda.Start, or the shipped
// ec2runners-broker. No Docker, no emulator: moto's Lambda needs Docker.
//
// Like Lambda, an execution environment (one process, with its own
// Runtime API) runs one invocation at a time, and is reused by later
// ones once it asks for the next; an invocation that finds no idle
// environment starts another process, up to the function's reserved
// concurrency, past which it is throttled (TooManyRequestsException).
// An environment whose invocation timed out, or whose process exited, is
// discarded. Invocations one after another run in one environment: one
// that comes while an environment has answered but not yet asked for its
// next waits for it (a second at most) rather than starting a process.
//
// Not modelled: asynchronous invocations (Event), versions and aliases
// other than $LATEST, log tails (X-Amz-Log-Type), client context, the
// Extensions and Telemetry APIs, request signing (the SDK signs, nothing
// checks).
package lambdaworld

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// The account and region of the functions' ARNs.
const (
	Region  = "us-east-1"
	Account = "123456789012"
)

// Lambda's limits (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html)
// and defaults.
const (
	DefaultTimeout = 3 * time.Second  // a function's timeout when its configuration sets none
	MaxTimeout     = 15 * time.Minute // the longest a function's timeout may be
	// InitTimeout: the init phase (the process starting until it asks for
	// its first invocation) may last this long.
	InitTimeout = 10 * time.Second
	// MaxPayloadBytes bounds a synchronous invocation's request and
	// response (6 MB).
	MaxPayloadBytes = 6 << 20
	defaultMemoryMB = 128
)

// Function is a function's configuration.
type Function struct {
	Name string
	// Executable is the function's bootstrap, started for each execution
	// environment, in its directory (LAMBDA_TASK_ROOT).
	Executable string
	Handler    string // _HANDLER; "": "bootstrap"
	// Env are the function's environment variables, over the ones Lambda
	// sets: the configuration's, and the execution role's credentials.
	Env                 map[string]string
	Timeout             time.Duration // 0: DefaultTimeout; at most MaxTimeout
	MemoryMB            int           // AWS_LAMBDA_FUNCTION_MEMORY_SIZE; 0: 128
	ReservedConcurrency int           // environments running at once; 0: no limit
	// Output receives the processes' stdout and stderr, what Lambda sends
	// to CloudWatch Logs; nil: discarded. Environments running at once
	// write to it concurrently.
	Output io.Writer
}

// World serves the Invoke API for its functions.
type World struct {
	listener  net.Listener
	server    *http.Server
	functions map[string]*function
}

// Start serves the functions' Invoke API on a loopback port.
func Start(functions ...Function) (*World, error) {
	w := &World{functions: map[string]*function{}}
	for _, cfg := range functions {
		if !namePattern.MatchString(cfg.Name) {
			return nil, fmt.Errorf("function name %q: Lambda takes 1-64 letters, digits, '-' and '_'", cfg.Name)
		}
		if cfg.Timeout < 0 || cfg.Timeout > MaxTimeout {
			return nil, fmt.Errorf("function %s: timeout %s: Lambda takes 1s to %s", cfg.Name, cfg.Timeout, MaxTimeout)
		}
		if _, dup := w.functions[cfg.Name]; dup {
			return nil, fmt.Errorf("function %s given twice", cfg.Name)
		}
		exe, err := filepath.Abs(cfg.Executable)
		if err != nil {
			return nil, err
		}
		cfg.Executable = exe
		w.functions[cfg.Name] = &function{cfg: cfg}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{function}/invocations", w.invoke)
	w.listener, w.server = l, &http.Server{Handler: mux}
	go func() { _ = w.server.Serve(l) }()
	return w, nil
}

// Endpoint is the Invoke API's URL, for the SDK's BaseEndpoint.
func (w *World) Endpoint() string { return "http://" + w.listener.Addr().String() }

// ARN is a function's ARN in the world.
func ARN(name string) string {
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", Region, Account, name)
}

// Close stops serving and kills every function process.
func (w *World) Close() {
	_ = w.server.Close()
	for _, f := range w.functions {
		f.close()
	}
}

// Lambda's forms of a function to invoke (as broker.ValidateFunction).
var (
	namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	refPattern  = regexp.MustCompile(`^(?:arn:aws[a-zA-Z-]*:lambda:([a-z]{2}(?:-[a-z]+)+-\d+):(\d{12}):function:|(\d{12}):function:)?([A-Za-z0-9_-]{1,64})(?::(\$LATEST|[A-Za-z0-9_-]{1,128}))?$`)
)

// invoke serves Invoke (POST /2015-03-31/functions/{function}/invocations).
func (w *World) invoke(rw http.ResponseWriter, r *http.Request) {
	f, invokedARN, refusal := w.resolve(r.PathValue("function"), r.URL.Query().Get("Qualifier"))
	if refusal != nil {
		refusal.write(rw)
		return
	}
	switch r.Header.Get("X-Amz-Invocation-Type") {
	case "", "RequestResponse":
	case "DryRun":
		rw.WriteHeader(http.StatusNoContent)
		return
	default:
		(&apiError{http.StatusBadRequest, "InvalidParameterValueException", "lambdaworld runs synchronous invocations only (InvocationType RequestResponse)", nil}).write(rw)
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes+1))
	if err != nil {
		return
	}
	if len(payload) > MaxPayloadBytes {
		(&apiError{http.StatusRequestEntityTooLarge, "RequestTooLargeException",
			fmt.Sprintf("Request must be smaller than %d bytes for the InvokeFunction operation", MaxPayloadBytes), nil}).write(rw)
		return
	}
	if len(payload) == 0 {
		payload = []byte("{}") // Lambda's event when the caller sends none
	}
	inv := &invocation{id: newID(), payload: payload, arn: invokedARN, answer: make(chan answer, 1)}
	a, refusal := f.invoke(inv)
	if refusal != nil {
		refusal.write(rw)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("X-Amz-Executed-Version", "$LATEST")
	rw.Header().Set("X-Amzn-Requestid", inv.id)
	if a.functionError {
		rw.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	_, _ = rw.Write(a.payload)
}

// resolve finds the function a path names, as Lambda does: its name, ARN
// or partial ARN, qualified (by the path or Qualifier) by $LATEST or
// nothing.
func (w *World) resolve(ref, qualifier string) (f *function, invokedARN string, refusal *apiError) {
	m := refPattern.FindStringSubmatch(ref)
	if m == nil || len(ref) > 170 {
		return nil, "", &apiError{http.StatusBadRequest, "ValidationException",
			fmt.Sprintf("1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", ref, refPattern), nil}
	}
	region, account, name := m[1], m[2]+m[3], m[4]
	if qualifier == "" {
		qualifier = m[5]
	}
	invokedARN = ARN(name)
	if qualifier != "" {
		invokedARN += ":" + qualifier
	}
	f, found := w.functions[name]
	if !found || (region != "" && region != Region) || (account != "" && account != Account) || (qualifier != "" && qualifier != "$LATEST") {
		return nil, "", &apiError{http.StatusNotFound, "ResourceNotFoundException", "Function not found: " + invokedARN, nil}
	}
	return f, invokedARN, nil
}

// apiError is an Invoke API error, in the REST-JSON shape the SDK reads:
// the code in X-Amzn-Errortype, the message and the exception's fields in
// the body.
type apiError struct {
	status  int
	code    string
	message string
	fields  map[string]any
}

func (e *apiError) write(rw http.ResponseWriter) {
	body := map[string]any{"Type": "User", "message": e.message}
	for k, v := range e.fields {
		body[k] = v
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("X-Amzn-Errortype", e.code)
	rw.WriteHeader(e.status)
	_ = json.NewEncoder(rw).Encode(body)
}

// function is a function and its execution environments.
type function struct {
	cfg Function

	mu     sync.Mutex
	idle   []*environment // waiting in /next for an invocation
	busy   int            // environments reserved for an invocation
	all    map[*environment]bool
	closed bool
}

func (f *function) timeout() time.Duration {
	if f.cfg.Timeout == 0 {
		return DefaultTimeout
	}
	return f.cfg.Timeout
}

// invocation is one invocation on its way through an environment.
type invocation struct {
	id       string
	payload  []byte
	arn      string
	deadline time.Time
	answer   chan answer // the function's answer; buffered, answered once
}

// answer is what the caller gets: the payload, a function error's when
// functionError.
type answer struct {
	payload       []byte
	functionError bool
}

// errorAnswer is a function error Lambda itself reports.
func errorAnswer(errorType, message string) answer {
	payload, _ := json.Marshal(map[string]string{"errorType": errorType, "errorMessage": message})
	return answer{payload: payload, functionError: true}
}

// invoke runs inv in an idle environment, or a new one.
func (f *function) invoke(inv *invocation) (answer, *apiError) {
	env, refusal := f.acquire()
	if refusal != nil {
		return answer{}, refusal
	}
	defer f.done()
	init := time.NewTimer(InitTimeout)
	defer init.Stop()
	select {
	case <-env.ready:
	case <-env.initFailed:
		env.kill()
		return env.failure(inv.id), nil
	case <-env.exited:
		return env.failure(inv.id), nil
	case <-init.C:
		env.kill()
		return errorAnswer("Sandbox.Timedout", fmt.Sprintf("RequestId: %s Error: the init phase took longer than %s", inv.id, InitTimeout)), nil
	}
	inv.deadline = time.Now().Add(f.timeout())
	run := time.NewTimer(time.Until(inv.deadline))
	defer run.Stop()
	select {
	case env.next <- inv:
	case <-env.exited:
		return env.failure(inv.id), nil
	case <-run.C:
		env.kill()
		return errorAnswer("Sandbox.Timedout", fmt.Sprintf("RequestId: %s Error: the runtime did not take the invocation within %.2f seconds", inv.id, f.timeout().Seconds())), nil
	}
	select {
	case a := <-inv.answer:
		return a, nil
	case <-env.exited:
		// A process that answers and then exits (a panic) answered first.
		select {
		case a := <-inv.answer:
			return a, nil
		default:
			return env.failure(inv.id), nil
		}
	case <-run.C:
		env.kill()
		return errorAnswer("Sandbox.Timedout", fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", inv.id, f.timeout().Seconds())), nil
	}
}

// acquire reserves an idle environment, or starts one, within the
// function's reserved concurrency. An environment that answered and is
// about to ask for its next invocation is waited for, briefly, rather
// than started anew: a caller's invocations one after another run in one
// environment, as they do in Lambda.
func (f *function) acquire() (*environment, *apiError) {
	waited := false
	for {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			return nil, &apiError{http.StatusServiceUnavailable, "ServiceException", "lambdaworld is closing", nil}
		}
		if limit := f.cfg.ReservedConcurrency; limit > 0 && f.busy >= limit {
			f.mu.Unlock()
			return nil, &apiError{http.StatusTooManyRequests, "TooManyRequestsException", "Rate Exceeded.",
				map[string]any{"Reason": "ReservedFunctionConcurrentInvocationLimitExceeded"}}
		}
		var env *environment
		if n := len(f.idle); n > 0 {
			env, f.idle = f.idle[n-1], f.idle[:n-1]
		} else if settling := f.settling(); settling != nil && !waited {
			f.mu.Unlock()
			select {
			case <-settling:
			case <-time.After(settleWait):
			}
			waited = true
			continue
		} else {
			var err error
			if env, err = f.start(); err != nil {
				f.mu.Unlock()
				return nil, &apiError{http.StatusBadGateway, "ServiceException", fmt.Sprintf("starting function %s: %v", f.cfg.Name, err), nil}
			}
		}
		env.reserved = true
		f.busy++
		f.mu.Unlock()
		return env, nil
	}
}

// settleWait bounds the wait for an environment that answered to ask for
// its next invocation.
const settleWait = time.Second

// settling is the channel of an environment that answered and has not yet
// asked for its next invocation, closed when it does (or exits); nil when
// there is none. f.mu is held.
func (f *function) settling() chan struct{} {
	for env := range f.all {
		if env.settled != nil {
			return env.settled
		}
	}
	return nil
}

// settle marks env as asking for its next invocation, or gone; f.mu is
// held.
func (env *environment) settle() {
	if env.settled != nil {
		close(env.settled)
		env.settled = nil
	}
}

func (f *function) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy--
}

// close kills every environment; invocations under way end with their
// processes.
func (f *function) close() {
	f.mu.Lock()
	f.closed = true
	envs := make([]*environment, 0, len(f.all))
	for env := range f.all {
		envs = append(envs, env)
	}
	f.mu.Unlock()
	for _, env := range envs {
		env.kill()
		<-env.exited
	}
}

// environment is one execution environment: a process and the Runtime API
// it alone talks to. fields marked so are guarded by function.mu.
type environment struct {
	fn       *function
	listener net.Listener
	server   *http.Server
	cmd      *exec.Cmd

	reserved bool // function.mu: an invocation holds it, or will
	// settled, from the process's answer until it asks for its next
	// invocation or exits, is closed then (function.mu).
	settled chan struct{}

	ready      chan struct{} // closed at the process's first /next
	readyOnce  sync.Once
	next       chan *invocation // to the process's pending /next
	initFailed chan struct{}    // closed when the process posts /init/error
	exited     chan struct{}    // closed once the process has exited
	exitErr    error            // the process's exit, once exited is closed

	mu          sync.Mutex
	current     *invocation // the invocation the process runs
	initPayload []byte      // what /init/error posted
}

// start starts an environment's process; f.mu is held.
func (f *function) start() (*environment, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	env := &environment{fn: f, listener: l, ready: make(chan struct{}), next: make(chan *invocation),
		initFailed: make(chan struct{}), exited: make(chan struct{})}
	mux := http.NewServeMux()
	const api = "/2018-06-01/runtime"
	mux.HandleFunc("GET "+api+"/invocation/next", env.serveNext)
	mux.HandleFunc("POST "+api+"/invocation/{id}/response", func(rw http.ResponseWriter, r *http.Request) { env.serveAnswer(rw, r, false) })
	mux.HandleFunc("POST "+api+"/invocation/{id}/error", func(rw http.ResponseWriter, r *http.Request) { env.serveAnswer(rw, r, true) })
	mux.HandleFunc("POST "+api+"/init/error", env.serveInitError)
	env.server = &http.Server{Handler: mux}
	go func() { _ = env.server.Serve(l) }()

	cfg := f.cfg
	cmd := exec.Command(cfg.Executable)
	cmd.Dir = filepath.Dir(cfg.Executable)
	cmd.Env = f.environ(l.Addr().String())
	out := cfg.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = env.server.Close()
		return nil, err
	}
	env.cmd = cmd
	if f.all == nil {
		f.all = map[*environment]bool{}
	}
	f.all[env] = true
	go env.watch()
	return env, nil
}

// environ is what Lambda sets in a custom runtime's environment
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime),
// then the function's own variables.
func (f *function) environ(runtimeAPI string) []string {
	cfg := f.cfg
	handler, memory := cfg.Handler, cfg.MemoryMB
	if handler == "" {
		handler = "bootstrap"
	}
	if memory == 0 {
		memory = defaultMemoryMB
	}
	vars := map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          runtimeAPI,
		"_HANDLER":                        handler,
		"AWS_LAMBDA_FUNCTION_NAME":        cfg.Name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(memory),
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + cfg.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      time.Now().UTC().Format("2006/01/02") + "/[$LATEST]" + newID(),
		"AWS_REGION":                      Region,
		"AWS_DEFAULT_REGION":              Region,
		"LAMBDA_TASK_ROOT":                filepath.Dir(cfg.Executable),
		"LAMBDA_RUNTIME_DIR":              filepath.Dir(cfg.Executable),
		"TZ":                              ":UTC",
		"PATH":                            os.Getenv("PATH"),
	}
	for k, v := range cfg.Env {
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// watch waits for the process to exit, then retires the environment.
func (env *environment) watch() {
	env.exitErr = env.cmd.Wait()
	close(env.exited)
	_ = env.server.Close()
	f := env.fn
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.all, env)
	env.settle()
	for i, idle := range f.idle {
		if idle == env {
			f.idle = append(f.idle[:i], f.idle[i+1:]...)
			break
		}
	}
}

func (env *environment) kill() { _ = env.cmd.Process.Kill() }

// failure is the error of an invocation whose environment failed before
// answering: what the process posted to /init/error, else its exit (once
// it exited).
func (env *environment) failure(requestID string) answer {
	select {
	case <-env.initFailed:
		env.mu.Lock()
		defer env.mu.Unlock()
		return answer{payload: env.initPayload, functionError: true}
	default:
		return errorAnswer("Runtime.ExitError", fmt.Sprintf("RequestId: %s Error: Runtime exited with error: %v", requestID, env.exitErr))
	}
}

// serveNext hands the process its next invocation, once there is one.
func (env *environment) serveNext(rw http.ResponseWriter, r *http.Request) {
	f := env.fn
	f.mu.Lock()
	if !env.reserved {
		f.idle = append(f.idle, env)
	}
	env.settle()
	f.mu.Unlock()
	env.readyOnce.Do(func() { close(env.ready) })
	var inv *invocation
	select {
	case inv = <-env.next:
	case <-r.Context().Done():
		return // the process is gone; watch retires the environment
	}
	env.mu.Lock()
	env.current = inv
	env.mu.Unlock()
	h := rw.Header()
	h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
	h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
	h.Set("Lambda-Runtime-Invoked-Function-Arn", inv.arn)
	h.Set("Content-Type", "application/json")
	_, _ = rw.Write(inv.payload)
}

// serveAnswer takes the process's response, or its error, to the
// invocation it runs; the environment is then free for the next.
func (env *environment) serveAnswer(rw http.ResponseWriter, r *http.Request, isError bool) {
	env.mu.Lock()
	inv := env.current
	if inv == nil || inv.id != r.PathValue("id") {
		env.mu.Unlock()
		runtimeError(rw, http.StatusBadRequest, "InvalidRequestID", "Invalid request ID")
		return
	}
	env.current = nil
	env.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes+1))
	var a answer
	switch {
	case err != nil:
		a = errorAnswer("Runtime.InvalidResponse", fmt.Sprintf("RequestId: %s Error: reading the runtime's answer: %v", inv.id, err))
	case len(body) > MaxPayloadBytes:
		a = errorAnswer("Function.ResponseSizeTooLarge", fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", MaxPayloadBytes))
	case r.Trailer.Get("Lambda-Runtime-Function-Error-Type") != "":
		// The runtime failed while streaming the response (aws-lambda-go
		// sends the error in trailers).
		a = trailerError(r.Trailer)
	case isError:
		a = reportedError(body, r.Header.Get("Lambda-Runtime-Function-Error-Type"))
	default:
		a = answer{payload: body}
	}
	env.fn.mu.Lock()
	env.reserved = false
	env.settled = make(chan struct{})
	env.fn.mu.Unlock()
	inv.answer <- a
	if len(body) > MaxPayloadBytes {
		runtimeError(rw, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", fmt.Sprintf("Exceeded maximum allowed payload size (%d bytes).", MaxPayloadBytes))
		return
	}
	rw.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(rw, `{"status":"OK"}`)
}

// serveInitError takes the process's failure to initialize: the pending
// invocation fails with it, and the environment is discarded.
func (env *environment) serveInitError(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes))
	env.mu.Lock()
	env.initPayload = reportedError(body, r.Header.Get("Lambda-Runtime-Function-Error-Type")).payload
	env.mu.Unlock()
	select {
	case <-env.initFailed:
	default:
		close(env.initFailed)
	}
	rw.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(rw, `{"status":"OK"}`)
}

// reportedError is a runtime's error as the caller gets it: the
// {"errorMessage", "errorType"} the runtime posted, else one made of its
// error type header and body.
func reportedError(body []byte, errorType string) answer {
	var reported map[string]any
	if json.Unmarshal(body, &reported) == nil && reported != nil {
		return answer{payload: body, functionError: true}
	}
	if errorType == "" {
		errorType = "Runtime.Unknown"
	}
	return errorAnswer(errorType, string(bytes.TrimSpace(body)))
}

// trailerError is the error aws-lambda-go sends in trailers: its type, and
// its {"errorMessage", "errorType"} base64-encoded.
func trailerError(trailer http.Header) answer {
	if body, err := base64.StdEncoding.DecodeString(trailer.Get("Lambda-Runtime-Function-Error-Body")); err == nil && len(body) > 0 {
		return answer{payload: body, functionError: true}
	}
	return errorAnswer(trailer.Get("Lambda-Runtime-Function-Error-Type"), "the runtime failed while sending its response")
}

// runtimeError is a Runtime API error answer.
func runtimeError(rw http.ResponseWriter, status int, errorType, message string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(map[string]string{"errorType": errorType, "errorMessage": message})
}

// newID is a request id, as random as Lambda's.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
