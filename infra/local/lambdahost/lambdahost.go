// Package lambdahost runs a real Lambda `bootstrap` executable on this machine the way AWS Lambda
// runs it: it serves the Lambda Runtime API (version 2018-06-01) on 127.0.0.1, starts the
// bootstrap as a child process with AWS_LAMBDA_RUNTIME_API pointing there plus the function's
// environment, and hands it one event at a time through Invoke. The function code under test is
// the unmodified production binary (built for this machine with -tags lambda.norpc); only the
// host around it is local.
//
// Decisions:
//   - One Runtime API listener per runtime process (per cold start), not per Host. When a runtime
//     dies, its listener closes with it, so a request still in flight from the dead process can
//     never take an event meant for its successor.
//   - Cold starts are lazy: the first Invoke after New, Kill, a crash or a timeout starts a fresh
//     process, as Lambda does when it replaces an execution environment.
//   - One invocation at a time per Host, because an execution environment never runs two. Run
//     several Hosts of the same function for concurrency.
//   - The child gets only the variables Lambda defines and Config.Env, never this process's
//     environment: a local run must not pick up the developer's real AWS credentials.
//   - The deadline (Lambda-Runtime-Deadline-Ms and the timer) counts from the moment the runtime
//     takes the event; init has its own bound (Config.InitTimeout, 10 s like Lambda). A timed-out
//     invocation kills the runtime, as Lambda resets the environment after a timeout.
//   - Kill is the fault injector for "the function died mid-invocation": the invocation in flight
//     fails with an *ExitError and the next one cold-starts.
//
// It must never listen beyond 127.0.0.1 and must never be wired into anything that runs on AWS.
package lambdahost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Lambda's limits and defaults that the host reproduces.
const (
	// DefaultTimeout is Lambda's default function timeout.
	DefaultTimeout = 3 * time.Second
	// DefaultInitTimeout is Lambda's bound on the init phase of an on-demand function.
	DefaultInitTimeout = 10 * time.Second
	// DefaultMemoryMB is reported to the function as AWS_LAMBDA_FUNCTION_MEMORY_SIZE.
	DefaultMemoryMB = 128
	// DefaultRegion is AWS_REGION when Config.Region is empty.
	DefaultRegion = "us-east-1"
	// DefaultAccountID is the account in the invoked function ARN (moto's default account).
	DefaultAccountID = "123456789012"
	// MaxResponseBytes is Lambda's limit on a synchronous response payload.
	MaxResponseBytes = 6 * 1024 * 1024

	apiPrefix = "/2018-06-01/runtime"
	tailBytes = 4096
)

// Named outcomes of Invoke; test them with errors.Is.
var (
	// ErrTimeout: the function did not answer within its timeout (or did not finish init within
	// InitTimeout); the runtime was killed.
	ErrTimeout = errors.New("lambdahost: task timed out")
	// ErrClosed: the Host was closed.
	ErrClosed = errors.New("lambdahost: host closed")
)

// FunctionError is an error the runtime reported through the Runtime API: the handler returned
// an error (POST …/invocation/{id}/error), or init failed (POST …/init/error, Init true).
type FunctionError struct {
	Function   string          `json:"-"`
	Init       bool            `json:"-"`
	Type       string          `json:"errorType"`
	Message    string          `json:"errorMessage"`
	StackTrace json.RawMessage `json:"stackTrace,omitempty"`
}

func (e *FunctionError) Error() string {
	phase := "invocation"
	if e.Init {
		phase = "init"
	}
	return fmt.Sprintf("lambdahost: %s: %s error %s: %s", e.Function, phase, e.Type, e.Message)
}

// ExitError says the runtime process exited (crashed, was killed) before answering: Lambda's
// "Runtime.ExitError". Tail is the end of the process's output, to show why.
type ExitError struct {
	Function string
	Err      error // from exec.Cmd.Wait
	Tail     string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("lambdahost: %s: runtime exited before answering: %v", e.Function, e.Err)
}

func (e *ExitError) Unwrap() error { return e.Err }

// Config describes one function.
type Config struct {
	// Name is the function name (AWS_LAMBDA_FUNCTION_NAME, the invoked ARN).
	Name string
	// Bootstrap is the path of the executable; its directory is LAMBDA_TASK_ROOT and the cwd.
	Bootstrap string
	// Env is the function's environment, as the template's Environment.Variables would set it.
	// It may override the Lambda-defined variables except AWS_LAMBDA_RUNTIME_API.
	Env map[string]string
	// Timeout is the function timeout (default 3 s, Lambda's default).
	Timeout time.Duration
	// InitTimeout bounds the time from process start to its first request for an event.
	InitTimeout time.Duration
	// MemoryMB is reported to the function only.
	MemoryMB int
	// Region and AccountID make up the function's ARN and AWS_REGION.
	Region    string
	AccountID string
	// Output receives the runtime's stdout and stderr (Lambda's CloudWatch log stream). It must
	// be safe for concurrent use when several Hosts share it. Nil discards.
	Output io.Writer
	// Now is the clock for deadlines (default time.Now).
	Now func() time.Time
	// NewID returns request ids (default: random UUIDs).
	NewID func() string
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.InitTimeout <= 0 {
		c.InitTimeout = DefaultInitTimeout
	}
	if c.MemoryMB <= 0 {
		c.MemoryMB = DefaultMemoryMB
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.AccountID == "" {
		c.AccountID = DefaultAccountID
	}
	if c.Output == nil {
		c.Output = io.Discard
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = randomUUID
	}
	return c
}

// ARN is the function's ARN as the runtime sees it (Lambda-Runtime-Invoked-Function-Arn).
func (c Config) ARN() string {
	c = c.withDefaults()
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", c.Region, c.AccountID, c.Name)
}

// Host is one execution environment of one function. It is safe for concurrent use; Invokes
// are served one at a time.
type Host struct {
	cfg  Config
	busy chan struct{} // one invocation at a time

	mu     sync.Mutex
	proc   *process
	closed bool
	starts int
}

// New returns a Host for cfg. No process runs until the first Invoke.
func New(cfg Config) (*Host, error) {
	if cfg.Name == "" {
		return nil, errors.New("lambdahost: Config.Name is required")
	}
	if cfg.Bootstrap == "" {
		return nil, fmt.Errorf("lambdahost: %s: Config.Bootstrap is required", cfg.Name)
	}
	abs, err := filepath.Abs(cfg.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("lambdahost: %s: bootstrap path: %w", cfg.Name, err)
	}
	cfg.Bootstrap = abs
	return &Host{cfg: cfg.withDefaults(), busy: make(chan struct{}, 1)}, nil
}

// Name is the function's name.
func (h *Host) Name() string { return h.cfg.Name }

// ColdStarts counts the runtime processes this Host has started.
func (h *Host) ColdStarts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.starts
}

// Invoke sends payload to the function and returns its response: what Lambda's synchronous
// Invoke (RequestResponse) does. Errors: *FunctionError, *ExitError, ErrTimeout, ErrClosed, or
// ctx's error. When ctx ends first, the function keeps running; its answer is dropped.
func (h *Host) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	select {
	case h.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-h.busy }()

	p, err := h.running()
	if err != nil {
		return nil, err
	}
	inv := &invocation{
		id:      h.cfg.NewID(),
		payload: payload,
		taken:   make(chan struct{}),
		done:    make(chan result, 1),
	}
	initTimer := time.NewTimer(h.cfg.InitTimeout)
	defer initTimer.Stop()
	select {
	case p.next <- inv:
	case <-p.exited:
		return nil, p.exitError()
	case <-initTimer.C:
		p.kill()
		return nil, fmt.Errorf("lambdahost: %s: runtime did not ask for an event within %s: %w", h.cfg.Name, h.cfg.InitTimeout, ErrTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-inv.taken // the handler registered it and computed the deadline

	timer := time.NewTimer(h.cfg.Timeout)
	defer timer.Stop()
	select {
	case r := <-inv.done:
		return r.body, r.err
	case <-p.exited:
		// An answer that arrived just before the exit still counts.
		select {
		case r := <-inv.done:
			return r.body, r.err
		default:
		}
		return nil, p.exitError()
	case <-timer.C:
		p.kill()
		return nil, fmt.Errorf("lambdahost: %s: request %s after %s: %w", h.cfg.Name, inv.id, h.cfg.Timeout, ErrTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Kill kills the runtime process, if one runs, and waits for it to exit. An invocation in
// flight fails with *ExitError; the next Invoke cold-starts.
func (h *Host) Kill() {
	h.mu.Lock()
	p := h.proc
	h.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Close kills the runtime and refuses further invocations.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	p := h.proc
	h.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// running returns the live runtime, starting one if none is.
func (h *Host) running() (*process, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.proc != nil && !h.proc.dead() {
		return h.proc, nil
	}
	p, err := start(h.cfg)
	if err != nil {
		return nil, err
	}
	h.proc = p
	h.starts++
	return p, nil
}

type result struct {
	body []byte
	err  error
}

// invocation is one event on its way through the Runtime API.
type invocation struct {
	id      string
	payload []byte
	taken   chan struct{} // closed once the runtime has the event
	done    chan result   // buffered: the answer, if the runtime sends one
}

// process is one runtime process with its own Runtime API listener.
type process struct {
	cfg    Config
	srv    *http.Server
	cmd    *exec.Cmd
	next   chan *invocation
	exited chan struct{}
	tail   *tail

	mu      sync.Mutex
	pending map[string]*invocation
	initErr *FunctionError
	waitErr error
}

func start(cfg Config) (*process, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lambdahost: %s: runtime API listener: %w", cfg.Name, err)
	}
	p := &process{
		cfg:     cfg,
		next:    make(chan *invocation),
		exited:  make(chan struct{}),
		tail:    &tail{},
		pending: map[string]*invocation{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+apiPrefix+"/invocation/next", p.serveNext)
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/response", p.serveResponse)
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/error", p.serveError)
	mux.HandleFunc("POST "+apiPrefix+"/init/error", p.serveInitError)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()

	dir := filepath.Dir(cfg.Bootstrap)
	p.cmd = exec.Command(cfg.Bootstrap)
	p.cmd.Dir = dir
	p.cmd.Env = environ(cfg, ln.Addr().String())
	out := io.MultiWriter(cfg.Output, p.tail)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = sysProcAttr()

	started := make(chan error, 1)
	go p.run(started)
	if err := <-started; err != nil {
		_ = p.srv.Close()
		return nil, fmt.Errorf("lambdahost: %s: start %s: %w", cfg.Name, cfg.Bootstrap, err)
	}
	return p, nil
}

// run starts and waits for the child on one locked OS thread (see lockThread), then closes the
// runtime's listener so nothing of this process outlives it.
func (p *process) run(started chan<- error) {
	lockThread()
	if err := p.cmd.Start(); err != nil {
		started <- err
		close(p.exited)
		return
	}
	started <- nil
	err := p.cmd.Wait()
	p.mu.Lock()
	p.waitErr = err
	p.mu.Unlock()
	_ = p.srv.Close()
	close(p.exited)
}

func (p *process) dead() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *process) kill() {
	if proc := p.cmd.Process; proc != nil {
		killGroup(proc.Pid)
	}
	<-p.exited
}

func (p *process) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.initErr != nil {
		return p.initErr
	}
	err := p.waitErr
	if err == nil {
		err = errors.New("exit status 0")
	}
	return &ExitError{Function: p.cfg.Name, Err: err, Tail: p.tail.String()}
}

// serveNext is GET /invocation/next: it blocks until Invoke hands over an event.
func (p *process) serveNext(w http.ResponseWriter, r *http.Request) {
	var inv *invocation
	select {
	case inv = <-p.next:
	case <-r.Context().Done():
		return
	case <-p.exited:
		return
	}
	deadline := p.cfg.Now().Add(p.cfg.Timeout)
	p.mu.Lock()
	p.pending[inv.id] = inv
	p.mu.Unlock()
	close(inv.taken)

	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
	h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(deadline.UnixMilli(), 10))
	h.Set("Lambda-Runtime-Invoked-Function-Arn", p.cfg.ARN())
	h.Set("Lambda-Runtime-Trace-Id", traceID(deadline, inv.id))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(inv.payload)
}

// take removes and returns the pending invocation id, or answers 400 as the Runtime API does.
func (p *process) take(w http.ResponseWriter, r *http.Request) *invocation {
	id := r.PathValue("id")
	p.mu.Lock()
	inv := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if inv == nil {
		writeStatus(w, http.StatusBadRequest, "InvalidRequestID", "Invalid request ID")
	}
	return inv
}

// serveResponse is POST /invocation/{id}/response.
func (p *process) serveResponse(w http.ResponseWriter, r *http.Request) {
	inv := p.take(w, r)
	if inv == nil {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxResponseBytes+1))
	switch {
	case err != nil:
		inv.done <- result{err: fmt.Errorf("lambdahost: %s: read response: %w", p.cfg.Name, err)}
		writeStatus(w, http.StatusBadRequest, "InvalidResponse", err.Error())
		return
	case len(body) > MaxResponseBytes:
		inv.done <- result{err: &FunctionError{Function: p.cfg.Name, Type: "Function.ResponseSizeTooLarge",
			Message: fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", MaxResponseBytes)}}
		writeStatus(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
			fmt.Sprintf("Exceeded maximum allowed payload size (%d bytes).", MaxResponseBytes))
		return
	}
	// aws-lambda-go streams the response and reports a failure while streaming in trailers.
	if t := r.Trailer.Get("Lambda-Runtime-Function-Error-Type"); t != "" {
		inv.done <- result{err: &FunctionError{Function: p.cfg.Name, Type: t, Message: r.Trailer.Get("Lambda-Runtime-Function-Error-Body")}}
	} else {
		inv.done <- result{body: body}
	}
	writeStatus(w, http.StatusAccepted, "", "")
}

// serveError is POST /invocation/{id}/error.
func (p *process) serveError(w http.ResponseWriter, r *http.Request) {
	inv := p.take(w, r)
	if inv == nil {
		return
	}
	inv.done <- result{err: p.readError(r, false)}
	writeStatus(w, http.StatusAccepted, "", "")
}

// serveInitError is POST /init/error: remembered and returned by the Invoke waiting for init.
func (p *process) serveInitError(w http.ResponseWriter, r *http.Request) {
	fe := p.readError(r, true)
	p.mu.Lock()
	p.initErr = fe
	p.mu.Unlock()
	writeStatus(w, http.StatusAccepted, "", "")
}

func (p *process) readError(r *http.Request, init bool) *FunctionError {
	fe := &FunctionError{}
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxResponseBytes))
	if err := json.Unmarshal(body, fe); err != nil || fe.Type == "" && fe.Message == "" {
		fe.Message = string(body)
	}
	if t := r.Header.Get("Lambda-Runtime-Function-Error-Type"); t != "" && fe.Type == "" {
		fe.Type = t
	}
	if fe.Type == "" {
		fe.Type = "Unhandled"
	}
	fe.Function, fe.Init = p.cfg.Name, init
	return fe
}

// writeStatus answers the runtime the way the Runtime API does: {"status":"OK"} on 202, an
// {"errorMessage","errorType"} body otherwise.
func writeStatus(w http.ResponseWriter, status int, errType, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status == http.StatusAccepted {
		_, _ = io.WriteString(w, `{"status":"OK"}`)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"errorMessage": msg, "errorType": errType})
}

// environ is the runtime's whole environment: what Lambda defines for a provided.al2023
// function, then the function's own variables. Nothing from this process leaks in.
func environ(cfg Config, runtimeAPI string) []string {
	dir := filepath.Dir(cfg.Bootstrap)
	env := map[string]string{
		"AWS_EXECUTION_ENV":               "AWS_Lambda_provided.al2023",
		"AWS_LAMBDA_FUNCTION_NAME":        cfg.Name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(cfg.MemoryMB),
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + cfg.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "local/[$LATEST]" + cfg.NewID(),
		"AWS_REGION":                      cfg.Region,
		"AWS_DEFAULT_REGION":              cfg.Region,
		"LAMBDA_TASK_ROOT":                dir,
		"LAMBDA_RUNTIME_DIR":              dir,
		"_HANDLER":                        "bootstrap",
		"LANG":                            "en_US.UTF-8",
		"TZ":                              ":UTC",
		"PATH":                            "/usr/local/bin:/usr/bin:/bin",
	}
	for k, v := range cfg.Env {
		env[k] = v
	}
	env["AWS_LAMBDA_RUNTIME_API"] = runtimeAPI
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func traceID(t time.Time, id string) string {
	n := strings.ReplaceAll(id, "-", "") + strings.Repeat("0", 24)
	return fmt.Sprintf("Root=1-%08x-%s;Parent=0000000000000000;Sampled=0", t.Unix(), n[:24])
}

func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	s := hex.EncodeToString(b[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// tail keeps the last tailBytes of the runtime's output for ExitError.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
