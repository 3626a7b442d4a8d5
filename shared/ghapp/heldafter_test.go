package ghapp_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// beforeAPICall runs hook once, just before the first API request (not a
// token exchange) sent while armed reaches the network.
type beforeAPICall struct {
	next  http.RoundTripper
	mu    sync.Mutex
	armed bool
	hook  func()
}

func (b *beforeAPICall) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	fire := b.armed && !strings.HasSuffix(req.URL.Path, "/access_tokens")
	if fire {
		b.armed = false
	}
	b.mu.Unlock()
	if fire {
		b.hook()
	}
	return b.next.RoundTrip(req)
}

// TestRefusalAfterARequestIsNotHeld: a call whose request reached GitHub
// with the cached token (refused 401: the installation suspended, its
// tokens revoked) and then met the refusal another call's exchange just
// got, held, must not be marked as held (failure.Failure.Remembered): it
// reached GitHub, so it is an attempt (DESIGN.md), and the claimer must
// not defer it as one that made no request.
func TestRefusalAfterARequestIsNotHeld(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	gate := &beforeAPICall{next: upstream}
	f := setup(t, option{
		fake: []ghfake.Option{ghfake.WithClock(clk.Now)},
		cfg:  func(c *ghapp.Config) { c.Now, c.Transport = clk.Now, gate },
	})
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	ctx := context.Background()
	if _, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7); err != nil {
		t.Fatalf("first call: %v", err) // the token is cached now
	}
	clk.Set(clk.Now().Add(time.Minute)) // past the replication window
	f.fake.Suspend(inst)

	// While this call's request is on its way with the cached token,
	// another call of the installation sends it too, is refused, and its
	// exchange is refused: held from then on.
	var other error
	gate.hook = func() { _, other = f.client.FindRunner(ctx, inst, ghapp.ScopeRepo, "octo", "hello", "held") }
	gate.armed = true
	_, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7)

	if fo := failure.Classify(other); !fo.AppRefused || fo.Remembered {
		t.Fatalf("the other call: classified %+v, want GitHub's own refusal (AppRefused, not Remembered)", fo)
	}
	fl := failure.Classify(err)
	if !fl.AppRefused || fl.Status != http.StatusForbidden {
		t.Fatalf("got %v classified %+v, want the App's refusal 403", err, fl)
	}
	if fl.Remembered {
		t.Errorf("got Remembered until %s, want not: this call's own request reached GitHub (401 on the cached token)", fl.ResetAt)
	}
	if got := f.fake.Stats().TokenRequests[inst]; got != 2 {
		t.Errorf("%d token exchanges, want 2 (the first token, the other call's refused one)", got)
	}
}
