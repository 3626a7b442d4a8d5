package ghapp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// upstream is the tests' transport under their wrappers, their own: the
// httptest servers here close http.DefaultTransport's idle connections
// when they stop, which breaks a request in flight on it in another test.
var upstream = http.DefaultTransport.(*http.Transport).Clone()

// heldTransport holds the answer to the first request whose path holds
// hold until release is closed, telling arrived once GitHub has answered it.
type heldTransport struct {
	hold    string
	once    sync.Once
	arrived chan struct{}
	release chan struct{}
}

func (h *heldTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := upstream.RoundTrip(req)
	if strings.Contains(req.URL.Path, h.hold) {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.arrived)
			<-h.release
		}
	}
	return resp, err
}

// TestConcurrentCallsOfAnAddedRepositoryAllReachIt: a repository is added
// to the installation and its jobs (a matrix) arrive together. Their
// generate-jitconfig calls go out with the cached token, which predates
// the repository, and each is answered 404. The first of them to come back
// drops the token and is asked again with a fresh one (mayRescope); the
// others come back within the minute, find mayRescope refusing, and their
// 404 stands: failed for good (non_retryable), although a token that
// reaches the repository is already cached. A call refused with a token
// that is no longer the cached one costs no exchange to ask again.
func TestConcurrentCallsOfAnAddedRepositoryAllReachIt(t *testing.T) {
	t.Parallel()
	pemBytes, pub := testKey(t)
	clk := clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	fake := ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(pub), ghfake.WithClock(clk.Now))
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	held := &heldTransport{hold: "/repos/octo/web/", arrived: make(chan struct{}), release: make(chan struct{})}
	c, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemBytes, BaseURL: srv.URL, Now: clk.Now, Transport: held})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fake.SetInstallation(inst, "octo", true, "hello")
	if _, err := c.GenerateJIT(ctx, inst, repoJIT("before")); err != nil {
		t.Fatal(err) // caches a token without "web"
	}
	fake.SetInstallation(inst, "octo", true, "hello", "web")

	jit := func(name string) ghapp.JITRequest {
		r := repoJIT(name)
		r.Repo = "web"
		return r
	}
	errB := make(chan error, 1)
	go func() {
		_, err := c.GenerateJIT(ctx, inst, jit("matrix-b"))
		errB <- err
	}()
	<-held.arrived // b's call was answered 404 with the old token
	if _, err := c.GenerateJIT(ctx, inst, jit("matrix-a")); err != nil {
		t.Fatalf("job a: %v; want its runner registered with a fresh token", err)
	}
	close(held.release)
	if err := <-errB; err != nil {
		t.Fatalf("job b, refused with the old token after job a fetched a fresh one: %v (class %s); want its runner registered with the fresh token",
			err, failure.Classify(err).Class)
	}
}
