package rie_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/local/bootstrap"
	"github.com/ghclaim/ghclaim/infra/local/rie"
)

// echofn and emulator are the test function and aws-lambda-rie, built once by TestMain (the
// emulator into the build directory the other packages share).
var echofn, emulator string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rie-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	echofn = filepath.Join(dir, "bootstrap")
	// -trimpath, as make test and infra/local build: other flags would compile the standard
	// library and aws-lambda-go a second time on an empty build cache.
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags=-s -w", "-o", echofn, "./testdata/echofn")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build echofn: %v\n%s", err, out)
		os.Exit(1)
	}
	root, err := bootstrap.ModuleRoot()
	if err == nil {
		emulator, err = bootstrap.BuildRIE(context.Background(), root, bootstrap.Dir(root))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// answer is what echofn returns.
type answer struct {
	Echo       json.RawMessage `json:"echo"`
	DeadlineMS int64           `json:"deadline_ms"`
	ARN        string          `json:"arn"`
	RequestID  string          `json:"request_id"`
	Count      int             `json:"count"`
	Env        *string         `json:"env"`
	PID        int             `json:"pid"`
}

// setup returns an Environment of echofn, closed at the end of t.
func setup(t *testing.T, edit func(*rie.Config)) (*rie.Environment, *watch) {
	t.Helper()
	w := &watch{}
	cfg := rie.Config{
		Name:      "echo",
		Bootstrap: echofn,
		RIE:       emulator,
		Timeout:   5 * time.Second,
		Output:    w,
		Env:       map[string]string{"FROM_CONFIG": "yes"},
	}
	if edit != nil {
		edit(&cfg)
	}
	e, err := rie.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, w
}

func invoke(t *testing.T, e *rie.Environment, payload string) (answer, error) {
	t.Helper()
	out, err := e.Invoke(context.Background(), []byte(payload))
	if err != nil {
		return answer{}, err
	}
	var a answer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("response %q: %v", out, err)
	}
	return a, nil
}

func TestInvokePassesTheEventAndTheDeadline(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, nil)
	before := time.Now()
	a, err := invoke(t, e, `{"echo":{"x":[1,2]}}`)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if got, want := string(a.Echo), `{"x":[1,2]}`; got != want {
		t.Errorf("echo: got %s, want %s", got, want)
	}
	// The RIE stamps the deadline from its own clock: it must be the configured 5 s from the
	// invocation, not its default 300 s (a second of slack for the clocks' rounding).
	lo, hi := before.Add(4*time.Second).UnixMilli(), after.Add(5*time.Second).UnixMilli()
	if a.DeadlineMS < lo || a.DeadlineMS > hi {
		t.Errorf("deadline: got %d, want within [%d, %d] (invocation + the 5 s timeout)", a.DeadlineMS, lo, hi)
	}
	if !strings.HasSuffix(a.ARN, ":function:echo") || a.RequestID == "" {
		t.Errorf("context: ARN %q, request id %q; want the function's ARN and an id", a.ARN, a.RequestID)
	}
}

func TestEnvironment(t *testing.T) {
	// Not parallel: it sets variables in this process to prove they do not leak.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "from-the-developers-shell")
	t.Setenv("GHCLAIM_HOST_ONLY", "from-the-developers-shell")
	e, w := setup(t, func(c *rie.Config) { c.Env["LOG_LEVEL"] = "debug" })
	tests := []struct {
		name string
		env  string
		want *string
	}{
		{name: "the host's credentials do not leak (the RIE sets them empty)", env: "AWS_SECRET_ACCESS_KEY", want: ptr("")},
		{name: "the host's environment does not leak", env: "GHCLAIM_HOST_ONLY", want: nil},
		{name: "the function's own variables", env: "FROM_CONFIG", want: ptr("yes")},
		{name: "the function's LOG_LEVEL", env: "LOG_LEVEL", want: ptr("debug")},
		{name: "Lambda's variables", env: "AWS_LAMBDA_FUNCTION_NAME", want: ptr("echo")},
		{name: "the timeout in seconds", env: "AWS_LAMBDA_FUNCTION_TIMEOUT", want: ptr("5")},
		{name: "region", env: "AWS_REGION", want: ptr("us-east-1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := invoke(t, e, `{"env":"`+tt.env+`"}`)
			if err != nil {
				t.Fatal(err)
			}
			if !equalPtr(a.Env, tt.want) {
				t.Errorf("%s: got %s, want %s", tt.env, show(a.Env), show(tt.want))
			}
		})
	}
	// The RIE reads LOG_LEVEL too; the function's must not turn on the emulator's debug log.
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.Contains(w.buf.String(), "[DEBUG]") {
		t.Errorf("the RIE logs at debug level: it took the function's LOG_LEVEL")
	}
}

func TestInvokeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		payload  string
		wantType string
		wantMsg  string
	}{
		{name: "the handler returns an error", payload: `{"fail":"no such job"}`, wantType: "errorString", wantMsg: "no such job"},
		{name: "the runtime reports an init error", env: map[string]string{"ECHO_INIT_ERROR": "TABLE_NAME not set"}, payload: `{}`,
			wantType: "Runtime.ConfigError", wantMsg: "TABLE_NAME not set"},
		{name: "the runtime exits mid-invocation", payload: `{"exit":3}`, wantType: "Runtime.ExitError", wantMsg: "exit status 3"},
		{name: "the response is larger than Lambda allows", payload: fmt.Sprintf(`{"big":%d}`, rie.MaxResponseBytes),
			wantType: "Function.ResponseSizeTooLarge", wantMsg: "maximum allowed payload size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _ := setup(t, func(c *rie.Config) {
				for k, v := range tt.env {
					c.Env[k] = v
				}
			})
			_, err := e.Invoke(context.Background(), []byte(tt.payload))
			var fe *rie.FunctionError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want *FunctionError", err)
			}
			if fe.Type != tt.wantType || !strings.Contains(fe.Message, tt.wantMsg) {
				t.Errorf("got %s %q, want %s containing %q", fe.Type, fe.Message, tt.wantType, tt.wantMsg)
			}
		})
	}
}

func TestWarmInvocationsReuseTheProcess(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, nil)
	for want := 1; want <= 3; want++ {
		a, err := invoke(t, e, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if a.Count != want {
			t.Errorf("invocation %d: the process served %d, want %d (warm)", want, a.Count, want)
		}
	}
}

func TestTimeoutAndTheNextInvokeColdStarts(t *testing.T) {
	t.Parallel()
	// 3 s: the emulator's timer also runs through the next invoke's cold
	// start, which a box busy compiling can stretch past a second.
	e, _ := setup(t, func(c *rie.Config) { c.Timeout = 3 * time.Second })
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	timedOut := rie.PID(e)
	_, err := e.Invoke(context.Background(), []byte(`{"sleep_ms":60000}`))
	if !errors.Is(err, rie.ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	a, err := invoke(t, e, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 1 {
		t.Errorf("after a timeout: the process served %d, want a fresh one (1)", a.Count)
	}
	// Under a new aws-lambda-rie: the one that timed out re-inits racily and can fail the next
	// invocation with Sandbox.Failure ErrGateCanceled (see the package comment).
	if now := rie.PID(e); now == timedOut || now == 0 {
		t.Errorf("after a timeout: aws-lambda-rie pid %d, before %d; want a new RIE", now, timedOut)
	}
}

func TestKillMidInvocation(t *testing.T) {
	t.Parallel()
	e, w := setup(t, nil)
	running := w.when("echofn invocation 1 pid")
	errc := make(chan error, 1)
	go func() {
		_, err := e.Invoke(context.Background(), []byte(`{"sleep_ms":60000}`))
		errc <- err
	}()
	<-running
	pid := w.pid(t)
	e.Kill()
	if err := <-errc; !errors.Is(err, rie.ErrKilled) {
		t.Fatalf("the invocation in flight: got %v, want ErrKilled", err)
	}
	if runtime.GOOS == "linux" && rie.Running(pid) {
		t.Errorf("the runtime (pid %d) outlived Kill: a killed environment must run no more code", pid)
	}
	a, err := invoke(t, e, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 1 || a.PID == pid {
		t.Errorf("after Kill: count %d in pid %d; want a fresh process (1, not %d)", a.Count, a.PID, pid)
	}
}

func TestTwoEnvironmentsRunAtOnce(t *testing.T) {
	t.Parallel()
	// Each invocation waits at a barrier until both have arrived: served one after the other,
	// the first would time out.
	barrier := t.TempDir()
	payload := `{"barrier":` + strconv.Quote(barrier) + `,"parties":2}`
	envs := []*rie.Environment{}
	for range 2 {
		// A long timeout: the first waits at the barrier while the second
		// cold-starts, which a busy box can stretch to seconds.
		e, _ := setup(t, func(c *rie.Config) { c.Timeout = 30 * time.Second })
		envs = append(envs, e)
	}
	answers := make([]answer, len(envs))
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = invoke(t, e, payload)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("environment %d: %v", i, err)
		}
	}
	if answers[0].PID == answers[1].PID {
		t.Errorf("both answers came from pid %d, want one runtime per environment", answers[0].PID)
	}
}

func TestACancelledInvokeKeepsTheEnvironmentBusy(t *testing.T) {
	t.Parallel()
	e, w := setup(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	running := w.when("echofn invocation 1 pid")
	errc := make(chan error, 1)
	go func() {
		_, err := e.Invoke(ctx, []byte(`{"sleep_ms":300}`))
		errc <- err
	}()
	<-running
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled invocation: got %v, want context.Canceled", err)
	}
	// The next one waits for the first to finish instead of being refused by the RIE.
	a, err := invoke(t, e, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 2 {
		t.Errorf("count %d, want 2: the same warm process, after the first invocation", a.Count)
	}
}

func TestClosedEnvironmentRefuses(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, nil)
	e.Close()
	if _, err := e.Invoke(context.Background(), []byte(`{}`)); !errors.Is(err, rie.ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

// watch is an Output that signals when the runtime prints a line.
type watch struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	waiters []waiter
}

type waiter struct {
	s  string
	ch chan struct{}
}

func (w *watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	kept := w.waiters[:0]
	for _, wt := range w.waiters {
		if strings.Contains(w.buf.String(), wt.s) {
			close(wt.ch)
			continue
		}
		kept = append(kept, wt)
	}
	w.waiters = kept
	return len(p), nil
}

// when returns a channel closed once the output contains s.
func (w *watch) when(s string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(w.buf.String(), s) {
		close(ch)
		return ch
	}
	w.waiters = append(w.waiters, waiter{s: s, ch: ch})
	return ch
}

var pidLine = regexp.MustCompile(`echofn invocation \d+ pid (\d+)`)

// pid is the runtime's pid from its latest "echofn invocation" line.
func (w *watch) pid(t *testing.T) int {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	m := pidLine.FindAllStringSubmatch(w.buf.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no pid in the output:\n%s", w.buf.String())
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

func ptr(s string) *string { return &s }

func equalPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func show(p *string) string {
	if p == nil {
		return "(unset)"
	}
	return fmt.Sprintf("%q", *p)
}
