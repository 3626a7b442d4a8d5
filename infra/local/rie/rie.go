// Package rie runs a real Lambda `bootstrap` executable on this machine under the AWS Lambda
// Runtime Interface Emulator (aws-lambda-rie, pinned in go.mod as a tool and built by
// infra/local/bootstrap): the Runtime API that `sam local` runs inside its containers. One
// Environment is one execution environment of one function: one aws-lambda-rie process on two
// free 127.0.0.1 ports (--runtime-api-address, --runtime-interface-emulator-address), so several
// run at once. Invoke posts to its invoke endpoint, POST /2015-03-31/functions/function/invocations.
//
// Decisions (the RIE's behaviour read in its source, internal/lambda/rie and rapidcore):
//   - The RIE forwards its whole environment to the runtime, so it is started with only the
//     variables Lambda defines, AWS_LAMBDA_FUNCTION_TIMEOUT and Config.Env: never this process's
//     environment, so a local run cannot pick up the developer's real AWS credentials. (The RIE
//     sets AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN itself, empty unless Env has
//     them.) --log-level is always passed, because the RIE otherwise reads LOG_LEVEL, which is the
//     function's own variable.
//   - The timeout is AWS_LAMBDA_FUNCTION_TIMEOUT, whole seconds (rounded up); the RIE bounds init
//     with it too. On a timeout the RIE answers 200 "Task timed out after N.00 seconds" and kills
//     the runtime: Invoke returns ErrTimeout. The Environment then stops that RIE, and the next
//     Invoke cold-starts a new one, as Lambda's next invocation after a timeout cold-starts. The
//     RIE's own re-init after a timeout races its process watcher (internal/lambda/rapid
//     watchEvents): the killed runtime's exit is handled (handleProcessExit, which lets the reset
//     finish and re-arm the flows) before the watcher cancels the flows with the error it has,
//     nil while shutting down. When the watcher runs late (a busy box), that cancel lands on the
//     next init, which fails with Sandbox.Failure "ErrGateCanceled" (seen in make test; a build
//     of the RIE with 30 ms between those two calls fails the next invocation every time).
//   - How a failure comes back: a runtime crash, an init error or an oversized response is a 502
//     with {"errorType","errorMessage"}; a handler's error is a 200 whose body is that same object
//     (the RIE drops the X-Amz-Function-Error header). Both become *FunctionError; the 200 case is
//     recognised by its shape (exactly errorMessage and errorType, plus stackTrace), as sam local
//     does (LambdaOutputParser.is_lambda_error_response). None of ghclaim's functions answers
//     with that shape.
//   - Cold starts are lazy: no process runs until the first Invoke (or Start) after New or Kill,
//     and the RIE itself inits the runtime on its first invocation, as Lambda does.
//   - One invocation at a time per Environment (the RIE refuses a second one). An Invoke whose
//     ctx ends returns at once, but the environment stays busy until the function answers, as a
//     Lambda execution environment does.
//   - Kill is the fault injector for "the function died mid-invocation". The RIE starts the
//     runtime in a process group of its own and leaves it running when it exits, so Kill stops
//     the RIE, kills its children's groups, then the RIE: the invocation in flight fails with
//     ErrKilled, no code of the killed runtime runs on, and the next Invoke cold-starts. The RIE
//     dies with this process (parent-death signal); a runtime it left then exits at its next
//     Runtime API call.
//
// It must never listen beyond 127.0.0.1 and must never be wired into anything that runs on AWS.
package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxResponseBytes is Lambda's limit on a synchronous response payload, which the RIE enforces.
const MaxResponseBytes = 6 * 1024 * 1024

const (
	invokePath   = "/2015-03-31/functions/function/invocations"
	startTimeout = 10 * time.Second
	tailBytes    = 4096
)

// Named outcomes of Invoke; test them with errors.Is.
var (
	// ErrTimeout: the function did not answer within its timeout; the RIE killed the runtime.
	ErrTimeout = errors.New("rie: task timed out")
	// ErrKilled: Kill or Close ended the environment while the invocation ran.
	ErrKilled = errors.New("rie: execution environment killed")
	// ErrClosed: the Environment was closed.
	ErrClosed = errors.New("rie: environment closed")
)

// FunctionError is a failed invocation as Lambda reports it: the handler returned an error (Type
// is its type), init failed, the runtime exited (Runtime.ExitError), the response was too large
// (Function.ResponseSizeTooLarge).
type FunctionError struct {
	Function string `json:"-"`
	Type     string `json:"errorType"`
	Message  string `json:"errorMessage"`
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("rie: %s: %s: %s", e.Function, e.Type, e.Message)
}

// Config describes one function.
type Config struct {
	// Name is the function name (AWS_LAMBDA_FUNCTION_NAME; the RIE builds the invoked ARN from it).
	Name string
	// Bootstrap is the path of the executable; its directory is LAMBDA_TASK_ROOT and the cwd.
	Bootstrap string
	// RIE is the path of aws-lambda-rie (bootstrap.BuildRIE).
	RIE string
	// Env is the function's environment, as the template's Environment.Variables would set it.
	Env map[string]string
	// Timeout is the function timeout (default 3 s, Lambda's), rounded up to whole seconds.
	Timeout time.Duration
	// MemoryMB is reported to the function only (default 128).
	MemoryMB int
	// Region is AWS_REGION (default us-east-1).
	Region string
	// Output receives the RIE's and the runtime's output (Lambda's log stream). It must be safe
	// for concurrent use when several Environments share it. Nil discards.
	Output io.Writer
}

// Environment is one execution environment of one function. It is safe for concurrent use;
// Invokes are served one at a time.
type Environment struct {
	cfg  Config
	busy chan struct{} // one invocation at a time

	mu     sync.Mutex
	proc   *process
	closed bool
}

// New returns an Environment for cfg. No process runs until the first Invoke or Start.
func New(cfg Config) (*Environment, error) {
	if cfg.Name == "" {
		return nil, errors.New("rie: Config.Name is required")
	}
	for what, p := range map[string]*string{"Bootstrap": &cfg.Bootstrap, "RIE": &cfg.RIE} {
		if *p == "" {
			return nil, fmt.Errorf("rie: %s: Config.%s is required", cfg.Name, what)
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, fmt.Errorf("rie: %s: %s path: %w", cfg.Name, what, err)
		}
		*p = abs
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.MemoryMB <= 0 {
		cfg.MemoryMB = 128
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	return &Environment{cfg: cfg, busy: make(chan struct{}, 1)}, nil
}

// Start starts the RIE if none runs, without invoking: the runtime still inits on the next Invoke.
func (e *Environment) Start(ctx context.Context) error {
	_, err := e.running(ctx)
	return err
}

// Invoke sends payload to the function and returns its response: what Lambda's synchronous
// Invoke (RequestResponse) does. Errors: *FunctionError, ErrTimeout, ErrKilled, ErrClosed,
// ctx's error, or why aws-lambda-rie itself failed.
func (e *Environment) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	select {
	case e.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p, err := e.running(ctx)
	if err != nil {
		<-e.busy
		return nil, err
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-e.busy }() // only once the function has answered or died
		r := p.invoke(payload)
		done <- r
		if errors.Is(r.err, ErrTimeout) {
			// A fresh RIE for the next invocation, not the RIE's racy re-init (see the package
			// comment). Before the environment is free again, so no invocation reaches this one.
			p.kill()
		}
	}()
	select {
	case r := <-done:
		return r.body, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Kill kills the execution environment, if one runs, and waits for it to exit. An invocation in
// flight fails with ErrKilled; the next Invoke cold-starts.
func (e *Environment) Kill() {
	e.mu.Lock()
	p := e.proc
	e.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Close kills the environment and refuses further invocations.
func (e *Environment) Close() {
	e.mu.Lock()
	e.closed = true
	p := e.proc
	e.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// running returns the live RIE, starting one if none is.
func (e *Environment) running(ctx context.Context) (*process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if e.proc != nil && !e.proc.dead() {
		return e.proc, nil
	}
	p, err := start(ctx, e.cfg)
	if err != nil {
		return nil, err
	}
	e.proc = p
	return p, nil
}

type result struct {
	body []byte
	err  error
}

// process is one aws-lambda-rie process.
type process struct {
	cfg    Config
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	tail   *tail

	mu      sync.Mutex
	killed  bool
	waitErr error
}

// client talks to the RIEs: no proxy from the environment, no client timeout (the RIE enforces
// the function's).
var client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}

// start starts an RIE on fresh ports and waits until both listen. Two ports picked free can be
// taken by someone else before the RIE binds them; it then exits at once and start tries again.
func start(ctx context.Context, cfg Config) (*process, error) {
	var err error
	for range 3 {
		var p *process
		if p, err = startOnce(ctx, cfg); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return p, err
		}
	}
	return nil, err
}

func startOnce(ctx context.Context, cfg Config) (*process, error) {
	addrs, err := pickAddrs(2)
	if err != nil {
		return nil, fmt.Errorf("rie: %s: %w", cfg.Name, err)
	}
	apiAddr, invokeAddr := addrs[0], addrs[1]
	p := &process{cfg: cfg, url: "http://" + invokeAddr + invokePath, exited: make(chan struct{}), tail: &tail{}}
	p.cmd = exec.Command(cfg.RIE,
		"--log-level", "warn",
		"--runtime-api-address", apiAddr,
		"--runtime-interface-emulator-address", invokeAddr,
		cfg.Bootstrap)
	p.cmd.Dir = filepath.Dir(cfg.Bootstrap)
	p.cmd.Env = environ(cfg)
	out := io.MultiWriter(cfg.Output, p.tail)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = sysProcAttr()
	// The runtime inherits the output pipe; if it outlives the RIE, Wait must not wait for it.
	p.cmd.WaitDelay = time.Second

	started := make(chan error, 1)
	go p.run(started)
	if err := <-started; err != nil {
		return nil, fmt.Errorf("rie: %s: start %s: %w", cfg.Name, cfg.RIE, err)
	}
	if err := p.awaitListening(ctx, apiAddr, invokeAddr); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// awaitListening polls the RIE's two ports until the RIE listens on both: a child process's
// port offers nothing else to wait on. Where the system says who holds a listening socket
// (Linux's /proc), it must be the RIE: a port picked free can be taken by another process
// before the RIE binds it, a dial then reaches that process, and the RIE exits on its bind
// error a moment after start took it for up (make test once failed an invoke for it).
func (p *process) awaitListening(ctx context.Context, addrs ...string) error {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		up := 0
		for _, a := range addrs {
			if listening(p.cmd.Process.Pid, a) {
				up++
			}
		}
		if up == len(addrs) {
			return nil
		}
		select {
		case <-p.exited:
			return p.exitError()
		case <-deadline.C:
			return fmt.Errorf("rie: %s: aws-lambda-rie did not listen on %v within %s\n%s", p.cfg.Name, addrs, startTimeout, p.tail)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// run starts and waits for the RIE on one locked OS thread (see lockThread).
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
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if proc := p.cmd.Process; proc != nil && !p.dead() {
		killTree(proc.Pid)
	}
	<-p.exited
}

func (p *process) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		return fmt.Errorf("rie: %s: %w", p.cfg.Name, ErrKilled)
	}
	return fmt.Errorf("rie: %s: aws-lambda-rie exited (%v):\n%s", p.cfg.Name, p.waitErr, p.tail)
}

// invoke posts one event and maps the RIE's answer to Invoke's results.
func (p *process) invoke(payload []byte) result {
	resp, err := client.Post(p.url, "application/json", bytes.NewReader(payload))
	if err != nil {
		return result{err: p.lost(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{err: p.lost(err)}
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if bytes.HasPrefix(body, []byte("Task timed out after")) {
			return result{err: fmt.Errorf("rie: %s: %s: %w", p.cfg.Name, body, ErrTimeout)}
		}
		if fe := functionError(p.cfg.Name, body, false); fe != nil {
			return result{err: fe}
		}
		return result{body: body}
	case http.StatusBadGateway:
		return result{err: functionError(p.cfg.Name, body, true)}
	}
	return result{err: fmt.Errorf("rie: %s: aws-lambda-rie answered %d: %s", p.cfg.Name, resp.StatusCode, body)}
}

// lost explains a broken connection to the RIE: it was killed, or it died. A connection can
// break a moment before the process is reaped, so it waits for the exit, within a bound.
func (p *process) lost(err error) error {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.exitError()
	case <-t.C:
		return fmt.Errorf("rie: %s: invoke: %w", p.cfg.Name, err)
	}
}

// functionError reads an error object. Unless always is set (a 502, where every body is an error),
// only a body of exactly Lambda's error shape counts; nil means it is an ordinary response.
func functionError(name string, body []byte, always bool) *FunctionError {
	var fields map[string]json.RawMessage
	shaped := json.Unmarshal(body, &fields) == nil && fields["errorType"] != nil && fields["errorMessage"] != nil &&
		(len(fields) == 2 || len(fields) == 3 && fields["stackTrace"] != nil)
	if !shaped && !always {
		return nil
	}
	fe := &FunctionError{Function: name}
	if err := json.Unmarshal(body, fe); err != nil || fe.Type == "" && fe.Message == "" {
		fe.Message = string(body)
	}
	if fe.Type == "" {
		fe.Type = "Unhandled"
	}
	return fe
}

// environ is the RIE's whole environment, which it forwards to the runtime: what Lambda defines
// for a provided.al2023 function, the timeout the RIE enforces, then the function's own
// variables. Nothing from this process leaks in.
func environ(cfg Config) []string {
	dir := filepath.Dir(cfg.Bootstrap)
	secs := int((cfg.Timeout + time.Second - 1) / time.Second)
	env := map[string]string{
		"AWS_EXECUTION_ENV":               "AWS_Lambda_provided.al2023",
		"AWS_LAMBDA_FUNCTION_NAME":        cfg.Name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(cfg.MemoryMB),
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(secs),
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + cfg.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "local/[$LATEST]" + cfg.Name,
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
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// pickAddrs picks the RIE's addresses: freeAddrs, or a test's taken port.
var pickAddrs = freeAddrs

// dialable reports whether something accepts connections on addr.
func dialable(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// freeAddrs returns n distinct 127.0.0.1 addresses that were free a moment ago.
func freeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer l.Close() // held until all are picked, so they differ
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// tail keeps the last tailBytes of the RIE's output, to say why it exited.
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
