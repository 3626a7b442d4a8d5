package rie_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"

	"github.com/ghclaim/ghclaim/infra/local/rie"
)

// TestAPortTakenBeforeTheRIEBindsIsPickedAgain hands the first RIE two ports other servers
// hold, as other processes can take ports picked free before the RIE binds them: a dial
// reaches those servers at once, so start must not take the ports for the RIE's, and the
// RIE's exit on its bind error starts another on fresh ports. (With one port taken, the RIE
// never listens on the other and its exit was seen either way.) The thieves answer HTTP, so
// an invoke that reaches one fails rather than waits. Not parallel: the picker is the
// package's.
func TestAPortTakenBeforeTheRIEBindsIsPickedAgain(t *testing.T) {
	api := httptest.NewServer(http.NotFoundHandler())
	defer api.Close()
	invokeThief := httptest.NewServer(http.NotFoundHandler())
	defer invokeThief.Close()
	picks := 0
	rie.SetPickAddrs(t, func(n int) ([]string, error) {
		picks++
		addrs, err := rie.FreeAddrs(n)
		if picks == 1 && err == nil {
			addrs[0], addrs[1] = api.Listener.Addr().String(), invokeThief.Listener.Addr().String()
		}
		return addrs, err
	})
	e, _ := setup(t, nil)
	a, err := invoke(t, e, `{}`)
	if err != nil {
		t.Fatalf("invoke with the first RIE's ports taken: %v", err)
	}
	if a.Count != 1 || picks != 2 {
		t.Errorf("served %d invocation(s) after %d pick(s) of ports; want 1 after 2", a.Count, picks)
	}
}

// TestListeningNamesTheHolder: a listener is this process's, not another's; a closed port is
// nobody's.
func TestListeningNamesTheHolder(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if !rie.Listening(os.Getpid(), addr) {
		t.Errorf("this process's listener on %s is not seen as its", addr)
	}
	if rie.Listening(other.Process.Pid, addr) {
		t.Errorf("this process's listener on %s is seen as pid %d's", addr, other.Process.Pid)
	}
	_ = l.Close()
	if rie.Listening(os.Getpid(), addr) {
		t.Errorf("the closed %s is still seen as listened on", addr)
	}
}

// TestListeningSeesAnIPv6Listener: a listener on [::1] (or a dual-stack one) is in
// /proc/net/tcp6 alone; read only /proc/net/tcp, it was nobody's and start waited out its
// timeout for an RIE that listened.
func TestListeningSeesAnIPv6Listener(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer l.Close()
	if addr := l.Addr().String(); !rie.Listening(os.Getpid(), addr) {
		t.Errorf("this process's listener on %s is not seen as its", addr)
	}
}
