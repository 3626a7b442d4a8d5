// Package emulator owns the AWS emulator that integration tests and local runs talk to: it
// starts a moto_server child process (or adopts the external endpoint named by
// AWS_ENDPOINT_URL, e.g. LocalStack), hands out SDK configurations pointed at it, and creates
// the non-function resources of template.yaml there through the emulator's own CloudFormation
// API, so tests and deployment share one definition of the table, queues and secrets.
//
// It must never talk to real AWS: every configuration it returns carries static test
// credentials and an explicit endpoint, and reads nothing of the host's AWS environment or
// shared config files.
// It must never stop a process it did not start: Close only kills the process group of a
// moto_server this package launched, never an external endpoint.
//
// Decisions:
//   - moto_server runs in its own process group so Close can kill the shell shims (pyenv) and
//     the Python interpreter together. On Linux it also gets a parent-death signal, so a test
//     binary that crashes or is killed does not leave an orphan listening on a port.
//   - ForTest shares one moto_server between the tests of a test binary (reference-counted: the
//     last Cleanup stops it; under RunTests, the end of the binary's tests). Tests stay isolated
//     by unique resource names (DeployForTest gives every call its own stack), never by
//     resetting the emulator, which would break parallel tests.
//   - The moto_server we launch serves a three-image EC2 catalogue (moto_amis.json through
//     MOTO_AMIS_PATH) instead of moto's ~1,200 images: tests need one image id for a launch
//     template, and listing the full catalogue cost 1.5 s of CPU per DescribeImages.
//   - The SDK retries a request whose answer was lost (a cancelled call, a reset; Config's
//     client hands the transport bodies of its own, awsenv.OwnBodies, without which a busy box
//     cut answers now and then), and a retried non-idempotent call acts twice. Tests that count
//     what such calls made send once (SQSOnce), learn how many copies the SDK's retries explain
//     (Retries, WithoutRetried), and cut an answer on purpose to show it (LoseFirstAnswer);
//     moto_atomic.py honours the EC2 ClientTokens that make a retried launch act once, as EC2 does.
//   - Tests that cannot get an emulator fail (t.Fatal) with instructions; they never skip, because
//     a skipped integration test reads as a passing one.
package emulator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go/logging"

	"github.com/ghclaim/ghclaim/shared/awsenv"
)

// EndpointEnv is the SDK's own variable for a custom endpoint; when set, Start adopts that
// emulator instead of launching moto_server.
const EndpointEnv = "AWS_ENDPOINT_URL"

// FactoryEnv names the Unix socket of a moto factory (StartFactory; make test runs the
// suite under one): when it is set, and EndpointEnv is not, Start takes a fresh server of
// its own from the factory instead of launching moto_server.
const FactoryEnv = "GHCLAIM_MOTO_FACTORY"

// Region is the region every emulator configuration uses.
const Region = "us-east-1"

// startTimeout bounds how long Start waits for moto_server to answer: as long as the
// factory's warm-up (factoryStartTimeout), which is the same imports, since a launched server
// often starts while the rest of `make test` compiles on the same cores.
const startTimeout = 60 * time.Second

// ErrNoEmulator is returned (wrapped) when no endpoint is configured and moto_server cannot be
// found or started. Its text tells the reader how to get one.
var ErrNoEmulator = errors.New("no AWS emulator: install moto: pip install 'moto[server]' (provides moto_server), or run LocalStack and set AWS_ENDPOINT_URL")

// Server is a running AWS emulator.
type Server struct {
	// Endpoint is the base URL of the emulator, e.g. http://127.0.0.1:41234.
	Endpoint string

	cmd       *exec.Cmd     // nil for an external endpoint or a factory's server
	lifeline  *net.UnixConn // a factory's server lives while this is open
	exited    chan struct{} // closed when cmd, or the factory's server, has exited
	closeOnce sync.Once
}

// Start returns the emulator named by AWS_ENDPOINT_URL; or else a fresh server from the
// factory named by GHCLAIM_MOTO_FACTORY; or else launches moto_server on a 127.0.0.1 port it
// chooses itself. It waits (at most 60 s) until the server answers. Call Close when done.
func Start(ctx context.Context) (*Server, error) {
	if ep := os.Getenv(EndpointEnv); ep != "" {
		return &Server{Endpoint: ep}, nil
	}
	if path := os.Getenv(FactoryEnv); path != "" {
		s, err := fromFactory(ctx, path)
		if err == nil {
			return s, nil
		}
		// The factory is a speed-up: without it, the test launches its own server.
		fmt.Fprintf(os.Stderr, "emulator: %v; launching moto_server instead\n", err)
	}
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoEmulator, err)
	}
	args, env, err := atomicLauncher(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoEmulator, err)
	}
	s, err := launch(ctx, args, env)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEmulator, err)
	}
	return s, nil
}

// launch starts the server, which binds a port of its own choosing and reports it on stdout
// (moto_atomic.py --port-on-stdout). A port picked free here and handed to moto could be taken
// by another process before moto bound it: the readiness probe then found that process's
// server (another test binary's moto, say) and took it for ours, which exited on its bind error.
func launch(ctx context.Context, argv, env []string) (*Server, error) {
	bin := argv[0]
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	cmd := exec.Command(bin, append(argv[1:], "--port-on-stdout")...)
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stdout, cmd.Stderr = w, nil // moto logs every request (stderr); nobody reads it
	s := &Server{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go s.run(started)
	err = <-started
	w.Close() // the child holds its own copy
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	port := make(chan string, 1)
	unread := make(chan error, 1) // why no port will come
	go func() {
		// Read to the end, past the port: a server writing to a closed pipe would die of it.
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "port "); ok {
				port <- p
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
		if err := sc.Err(); err != nil { // a line too long: the server may still run
			unread <- fmt.Errorf("%s wrote no port line on stdout: %w", bin, err)
			_, _ = io.Copy(io.Discard, r)
			return
		}
		// stdout closed without a port: the server is gone, or going.
		select {
		case <-s.exited:
			unread <- fmt.Errorf("%s exited (%v) before reporting its port", bin, s.cmd.ProcessState)
		case <-time.After(5 * time.Second):
			unread <- fmt.Errorf("%s closed its stdout before reporting its port", bin)
		}
	}()
	wait, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case err := <-unread:
		s.Close()
		return nil, err
	case p := <-port:
		s.Endpoint = "http://127.0.0.1:" + p
	case <-wait.Done():
		s.Close()
		return nil, fmt.Errorf("%s reported no port within %s: %w", bin, startTimeout, wait.Err())
	}
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// run starts and waits for the child on one locked OS thread: Linux delivers the parent-death
// signal when the thread that forked the child exits, so that thread must live as long as the child.
func (s *Server) run(started chan<- error) {
	lockThread()
	err := s.cmd.Start()
	started <- err
	if err != nil {
		close(s.exited)
		return
	}
	_ = s.cmd.Wait()
	close(s.exited)
}

// readyPath is what waitReady asks a server for: moto's config, a few bytes
// of JSON, from the moto_api app the factory builds before it forks. Its
// dashboard (/moto-api/) compiled a Jinja template in every fresh server.
const readyPath = "/moto-api/config"

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+readyPath, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 { // moto answers 201 to a GET of its config
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("moto_server at %s exited before answering", s.Endpoint)
		case <-ctx.Done():
			return fmt.Errorf("moto_server at %s did not answer within %s: %w", s.Endpoint, startTimeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// Config returns an SDK configuration pointed at the emulator: static test credentials, region
// us-east-1, the endpoint as BaseEndpoint, read from Env alone (nothing of the host's
// environment or shared config files) by the functions' own loader, awsenv.Load. The SDK's
// config package (its default chain, with the SSO, SSO-OIDC, sign-in and STS clients) is
// linked into no test binary that only needs this: a fifth of a second of linking each.
func (s *Server) Config(ctx context.Context) (aws.Config, error) {
	env := s.Env()
	cfg, err := awsenv.Load(func(name string) string { return env[name] })
	if err != nil {
		return aws.Config{}, fmt.Errorf("emulator config for %s: %w", s.Endpoint, err)
	}
	// The SDK's warnings go to standard error, as LoadDefaultConfig's logger sends them.
	cfg.Logger = logging.NewStandardLogger(os.Stderr)
	// As the functions' clients (shared/wire): on a busy machine the SDK's
	// own cut an answer now and then (awsenv.OwnBodies says why).
	cfg.HTTPClient = awsenv.OwnBodies(awshttp.NewBuildableClient())
	return cfg, nil
}

// Env returns the environment a process (a function's bootstrap under the Runtime Interface
// Emulator, say) needs so that the SDK's default configuration talks to this emulator.
func (s *Server) Env() map[string]string {
	return map[string]string{
		EndpointEnv:             s.Endpoint,
		"AWS_REGION":            Region,
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
	}
}

// Close stops the moto_server process group that Start launched, or the factory's server it
// was given, and waits for it to exit. It does nothing for an external endpoint and is safe to
// call more than once.
func (s *Server) Close() {
	if s.lifeline != nil {
		s.closeOnce.Do(func() {
			// Half-closed, the server sees EOF and exits; its exit closes its end.
			_ = s.lifeline.CloseWrite()
			select {
			case <-s.exited:
			case <-time.After(5 * time.Second):
			}
			_ = s.lifeline.Close()
		})
		return
	}
	if s.cmd == nil {
		return
	}
	s.closeOnce.Do(func() {
		if p := s.cmd.Process; p != nil {
			killGroup(p.Pid)
		}
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
	})
}

var shared struct {
	mu   sync.Mutex
	srv  *Server
	refs int
}

// ForTest returns an emulator for t: AWS_ENDPOINT_URL's, or a moto_server shared by the tests
// of this binary that stops after the last test using it finishes. It fails t (never skips)
// when no emulator is available.
func ForTest(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		srv, err := Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		shared.srv = srv
	}
	shared.refs++
	srv := shared.srv
	t.Cleanup(func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		shared.refs--
		if shared.refs == 0 && shared.srv == srv {
			srv.Close()
			shared.srv = nil
		}
	})
	return srv
}

// OwnForTest returns an emulator of t's own (AWS_ENDPOINT_URL's when set, which every test
// then shares), stopped when t ends. For a test that scans the whole account, as the janitor
// lists every tagged machine and runner parameter: on the shared server it would judge, and
// end, the machines of the binary's other tests.
func OwnForTest(t testing.TB) *Server {
	t.Helper()
	srv, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// RunTests runs a test binary's tests (call it from TestMain) with the moto_server of ForTest
// kept from the first test that asks for it until the last test has finished: without it the
// server stops whenever no test holds it, and the next sequential test, or the next batch of
// parallel ones, starts another (a second of CPU, and more for the first deploy's imports).
//
//	func TestMain(m *testing.M) { os.Exit(emulator.RunTests(m)) }
func RunTests(m *testing.M) int {
	shared.mu.Lock()
	shared.refs++ // the binary's own hold: no test's Cleanup brings the count to zero
	shared.mu.Unlock()
	defer func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		shared.refs--
		if shared.refs == 0 && shared.srv != nil {
			shared.srv.Close()
			shared.srv = nil
		}
	}()
	return m.Run()
}

// ConfigForTest is ForTest(t).Config with the error turned into t.Fatal.
func (s *Server) ConfigForTest(t testing.TB) aws.Config {
	t.Helper()
	cfg, err := s.Config(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
