package emulator

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// factoryStartTimeout bounds the factory's imports and warm-up (seconds of CPU on a busy box).
const factoryStartTimeout = 60 * time.Second

// Factory is a running moto factory (moto_atomic.py --factory): a warm Python process that
// forks a fresh moto_server for each Start that names its socket through FactoryEnv. Each
// such server has its own state, as a launched one does, and stops with its Server's Close
// or with the test binary that took it.
type Factory struct {
	// Path is the factory's Unix socket: the value of FactoryEnv for the processes that use it.
	Path string

	dir       string
	cmd       *exec.Cmd
	stdin     io.Closer
	exited    chan struct{}
	closeOnce sync.Once
}

// StartFactory starts a moto factory and waits until it is ready. Call Close when done: it
// stops the factory and every server it forked.
func StartFactory(ctx context.Context) (*Factory, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoEmulator, err)
	}
	argv, env, err := atomicLauncher(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoEmulator, err)
	}
	// A short directory: a Unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "ghclaim-moto-")
	if err != nil {
		return nil, fmt.Errorf("moto factory: %w", err)
	}
	f := &Factory{Path: filepath.Join(dir, "factory.sock"), dir: dir, exited: make(chan struct{})}
	cmd := exec.Command(argv[0], append(argv[1:], "--factory", f.Path)...)
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("moto factory: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("moto factory: %w", err)
	}
	f.cmd, f.stdin = cmd, stdin
	started := make(chan error, 1)
	go func() {
		lockThread() // the parent-death signal follows this thread; see Server.run
		err := cmd.Start()
		started <- err
		if err != nil {
			close(f.exited)
			return
		}
		_ = cmd.Wait()
		close(f.exited)
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("moto factory: start %s: %w", argv[0], err)
	}
	ready := make(chan error, 1)
	go func() {
		var said bytes.Buffer
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
			said.WriteString(sc.Text() + "\n")
		}
		ready <- fmt.Errorf("moto factory exited before it was ready: %s", strings.TrimSpace(said.String()))
	}()
	ctx, cancel := context.WithTimeout(ctx, factoryStartTimeout)
	defer cancel()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = fmt.Errorf("moto factory not ready within %s: %w", factoryStartTimeout, ctx.Err())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Env returns the environment that points Start at this factory.
func (f *Factory) Env() map[string]string { return map[string]string{FactoryEnv: f.Path} }

// Close stops the factory and every server it forked (one process group), waits for it, and
// removes its socket. Safe to call more than once.
func (f *Factory) Close() {
	f.closeOnce.Do(func() {
		_ = f.stdin.Close() // the factory's signal to stop taking clients
		if p := f.cmd.Process; p != nil {
			killGroup(p.Pid) // its servers too, whoever still holds them
		}
		select {
		case <-f.exited:
		case <-time.After(5 * time.Second):
		}
		os.RemoveAll(f.dir)
	})
}

// fromFactory takes a fresh server from the factory listening on path.
func fromFactory(ctx context.Context, path string) (*Server, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("moto factory %s: %w", path, err)
	}
	conn := c.(*net.UnixConn)
	_ = conn.SetReadDeadline(time.Now().Add(startTimeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("moto factory %s: no server: %w", path, err)
	}
	line = strings.TrimSpace(line)
	port, err := strconv.Atoi(line)
	if err != nil || port <= 0 || port > 65535 {
		conn.Close()
		return nil, fmt.Errorf("moto factory %s: no server: %s", path, line)
	}
	_ = conn.SetReadDeadline(time.Time{})
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), lifeline: conn, exited: make(chan struct{})}
	go func() {
		// The server never writes again: EOF (or an error) is its exit.
		_, _ = io.Copy(io.Discard, conn)
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
