package lambdahost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/local/lambdahost"
)

// echofn is the path of the test function, built once by TestMain.
var echofn string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lambdahost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	echofn = filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", echofn, "./testdata/echofn")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build echofn: %v\n%s", err, out)
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
}

var epoch = time.Unix(1_700_000_000, 0)

// setup returns a Host of echofn with a fixed request id, closed at the end of t.
func setup(t *testing.T, edit func(*lambdahost.Config)) (*lambdahost.Host, *watch) {
	t.Helper()
	w := &watch{}
	cfg := lambdahost.Config{
		Name:      "echo",
		Bootstrap: echofn,
		Timeout:   5 * time.Second,
		Output:    w,
		NewID:     func() string { return "11111111-2222-4333-8444-555555555555" },
		Env:       map[string]string{"FROM_CONFIG": "yes"},
	}
	if edit != nil {
		edit(&cfg)
	}
	h, err := lambdahost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, w
}

func invoke(t *testing.T, h *lambdahost.Host, payload string) (answer, error) {
	t.Helper()
	out, err := h.Invoke(context.Background(), []byte(payload))
	if err != nil {
		return answer{}, err
	}
	var a answer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("response %q: %v", out, err)
	}
	return a, nil
}

func TestInvokePassesTheRuntimeAPIHeaders(t *testing.T) {
	t.Parallel()
	h, _ := setup(t, func(c *lambdahost.Config) { c.Now = func() time.Time { return epoch } })
	a, err := invoke(t, h, `{"echo":{"x":[1,2]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(a.Echo), `{"x":[1,2]}`; got != want {
		t.Errorf("echo: got %s, want %s", got, want)
	}
	if got, want := a.DeadlineMS, epoch.Add(5*time.Second).UnixMilli(); got != want {
		t.Errorf("deadline: got %d, want %d (now + timeout)", got, want)
	}
	if got, want := a.ARN, "arn:aws:lambda:us-east-1:123456789012:function:echo"; got != want {
		t.Errorf("invoked ARN: got %q, want %q", got, want)
	}
	if got, want := a.RequestID, "11111111-2222-4333-8444-555555555555"; got != want {
		t.Errorf("request id: got %q, want %q", got, want)
	}
}

func TestEnvironment(t *testing.T) {
	// Not parallel: it sets a variable in this process to prove it does not leak.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "from-the-developers-shell")
	h, _ := setup(t, nil)
	tests := []struct {
		name string
		env  string
		want *string
	}{
		{name: "the host's environment does not leak", env: "AWS_SECRET_ACCESS_KEY", want: nil},
		{name: "the function's own variables", env: "FROM_CONFIG", want: ptr("yes")},
		{name: "Lambda's variables", env: "AWS_LAMBDA_FUNCTION_NAME", want: ptr("echo")},
		{name: "region", env: "AWS_REGION", want: ptr("us-east-1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := invoke(t, h, `{"env":"`+tt.env+`"}`)
			if err != nil {
				t.Fatal(err)
			}
			if !equalPtr(a.Env, tt.want) {
				t.Errorf("%s: got %s, want %s", tt.env, show(a.Env), show(tt.want))
			}
		})
	}
}

func TestInvokeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		payload string
		check   func(t *testing.T, err error)
	}{
		{
			name:    "the handler returns an error",
			payload: `{"fail":"no such job"}`,
			check: func(t *testing.T, err error) {
				var fe *lambdahost.FunctionError
				if !errors.As(err, &fe) {
					t.Fatalf("got %v, want *FunctionError", err)
				}
				if fe.Message != "no such job" || fe.Type != "errorString" || fe.Init {
					t.Errorf("got %+v, want errorString %q in the invocation phase", fe, "no such job")
				}
			},
		},
		{
			name:    "the runtime reports an init error",
			env:     map[string]string{"ECHO_INIT_ERROR": "TABLE_NAME not set"},
			payload: `{}`,
			check: func(t *testing.T, err error) {
				var fe *lambdahost.FunctionError
				if !errors.As(err, &fe) {
					t.Fatalf("got %v, want *FunctionError", err)
				}
				if !fe.Init || fe.Type != "Runtime.ConfigError" || fe.Message != "TABLE_NAME not set" {
					t.Errorf("got %+v, want an init Runtime.ConfigError", fe)
				}
			},
		},
		{
			name:    "the runtime exits mid-invocation",
			payload: `{"exit":3}`,
			check: func(t *testing.T, err error) {
				var ee *lambdahost.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("got %v, want *ExitError", err)
				}
				if !strings.Contains(ee.Err.Error(), "exit status 3") || !strings.Contains(ee.Tail, "echofn exiting on request") {
					t.Errorf("got %v with output %q, want exit status 3 and the runtime's last words", ee.Err, ee.Tail)
				}
			},
		},
		{
			name:    "the response is larger than Lambda allows",
			payload: fmt.Sprintf(`{"big":%d}`, lambdahost.MaxResponseBytes),
			check: func(t *testing.T, err error) {
				var fe *lambdahost.FunctionError
				if !errors.As(err, &fe) || fe.Type != "Function.ResponseSizeTooLarge" {
					t.Fatalf("got %v, want Function.ResponseSizeTooLarge", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _ := setup(t, func(c *lambdahost.Config) {
				for k, v := range tt.env {
					c.Env[k] = v
				}
			})
			_, err := h.Invoke(context.Background(), []byte(tt.payload))
			tt.check(t, err)
		})
	}
}

func TestWarmInvocationsReuseTheProcess(t *testing.T) {
	t.Parallel()
	h, _ := setup(t, nil)
	for want := 1; want <= 3; want++ {
		a, err := invoke(t, h, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if a.Count != want {
			t.Errorf("invocation %d: the process served %d, want %d (warm)", want, a.Count, want)
		}
	}
	if got := h.ColdStarts(); got != 1 {
		t.Errorf("cold starts: got %d, want 1", got)
	}
}

func TestTimeoutKillsTheRuntimeAndTheNextInvokeColdStarts(t *testing.T) {
	t.Parallel()
	h, _ := setup(t, func(c *lambdahost.Config) { c.Timeout = 200 * time.Millisecond })
	_, err := h.Invoke(context.Background(), []byte(`{"sleep_ms":60000}`))
	if !errors.Is(err, lambdahost.ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	a, err := invoke(t, h, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 1 || h.ColdStarts() != 2 {
		t.Errorf("after a timeout: count %d, cold starts %d; want a fresh process (1, 2)", a.Count, h.ColdStarts())
	}
}

func TestKillMidInvocation(t *testing.T) {
	t.Parallel()
	h, w := setup(t, nil)
	running := w.when("echofn invocation 1")
	errc := make(chan error, 1)
	go func() {
		_, err := h.Invoke(context.Background(), []byte(`{"sleep_ms":60000}`))
		errc <- err
	}()
	<-running
	h.Kill()
	var ee *lambdahost.ExitError
	if err := <-errc; !errors.As(err, &ee) {
		t.Fatalf("the invocation in flight: got %v, want *ExitError", err)
	}
	a, err := invoke(t, h, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 1 || h.ColdStarts() != 2 {
		t.Errorf("after Kill: count %d, cold starts %d; want a fresh process (1, 2)", a.Count, h.ColdStarts())
	}
}

func TestClosedHostRefuses(t *testing.T) {
	t.Parallel()
	h, _ := setup(t, nil)
	h.Close()
	if _, err := h.Invoke(context.Background(), []byte(`{}`)); !errors.Is(err, lambdahost.ErrClosed) {
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
