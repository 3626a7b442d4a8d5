package redeliver_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/redeliver"
)

// TestRateLimitedRedeliveryKeepsItsAttempt: a redelivery GitHub refuses
// with a rate limit (429) was never performed, so it gives its attempt
// back. Three passes that met a secondary limit on that POST used to leave
// the GUID "spent": once GitHub answered again, the failed delivery was
// never redelivered and its job waited 24 h.
func TestRateLimitedRedeliveryKeepsItsAttempt(t *testing.T) {
	t.Parallel()
	f := oneFailedDelivery(t)
	for pass := range 3 {
		f.fake.Fail(ghfake.RouteRedeliver, 1, ghfake.TooManyRequests(time.Minute))
		rep := f.run(t)
		if rep.Stopped != redeliver.StopRateLimit || rep.Redelivered != 0 {
			t.Fatalf("pass %d = %+v, want stopped by the 429, nothing redelivered", pass+1, rep)
		}
		f.clock.add(5 * time.Minute) // past the block
	}
	rep := f.run(t) // GitHub answers again
	if n := f.fake.Redeliveries("g"); n != 1 {
		t.Errorf("after GitHub's limit ended: g performed redeliveries = %d, want 1; pass %+v (spent %d)", n, rep, rep.Spent)
	}
}

// TestServerErrorRedeliveryKeepsItsAttempt: the same with GitHub
// answering 502 to POST .../attempts for 15 minutes (three 5-minute
// passes): the refusals spend no attempt, and each failed delivery is
// redelivered once GitHub answers again.
func TestServerErrorRedeliveryKeepsItsAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.MaxAttempts = 3
	f.fake.SetWebhook(answer(200), "s")
	f.record("a", "workflow_job", 503, 2*time.Minute)
	f.record("b", "workflow_job", 503, time.Minute)
	for range 3 {
		f.fake.Fail(ghfake.RouteRedeliver, 2, ghfake.ServerError(http.StatusBadGateway))
		f.run(t)
		f.clock.add(5 * time.Minute)
	}
	f.run(t) // GitHub healthy again
	for _, g := range []string{"a", "b"} {
		if n := f.fake.Redeliveries(g); n != 1 {
			t.Errorf("%s: performed redeliveries = %d, want 1 (asked once GitHub answered again)", g, n)
		}
	}
}

// TestUnreadableLogIsAnError: a pass whose log read is refused outright
// (here a 401: the App key is wrong) returns an error, so the function's
// Errors and RedelivererErrorsAlarm say so; it used to return nil while no
// delivery was ever redelivered.
func TestUnreadableLogIsAnError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	f.record("g", "workflow_job", 503, time.Minute)
	wrong := wrongKey(t, f)
	f.cfg.GitHub = wrong
	r, err := redeliver.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, rerr := r.Run(context.Background())
	t.Logf("Run = %+v, %v", rep, rerr)
	herr := r.Handle(context.Background(), events.CloudWatchEvent{})
	if herr == nil {
		t.Errorf("Handle = nil although the delivery log could not be read at all (401); g redelivered %d times", f.fake.Redeliveries("g"))
	}
}

// TestOutageOfHalfAnHourLosesNoJob: the webhook endpoint is down for 25
// minutes (a bad deploy). With the default schedule (5 min) and
// MaxAttempts (3), attempts asked every pass were all spent while the
// endpoint was still down; spaced (10, then 20 minutes), the last comes
// after it is back, and the failed `queued` is delivered.
func TestOutageOfHalfAnHourLosesNoJob(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var down atomic.Bool
	down.Store(true)
	f.fake.SetWebhook(func(context.Context, http.Header, []byte) (int, []byte, error) {
		if down.Load() {
			return 503, nil, nil
		}
		return 200, nil, nil
	}, "s")
	f.record("g", "workflow_job", 503, 0)
	for elapsed := 5 * time.Minute; elapsed <= 40*time.Minute; elapsed += 5 * time.Minute {
		f.clock.add(5 * time.Minute)
		if elapsed > 25*time.Minute {
			down.Store(false)
		}
		f.run(t)
		f.fake.Drain() // what the pass asked reaches the endpoint before the next pass
	}
	ok := false
	for _, d := range f.fake.Deliveries() {
		if d.GUID == "g" && d.OK() {
			ok = true
		}
	}
	if !ok {
		t.Errorf("g never reached the endpoint after it came back (redeliveries asked: %d, all while it was down)", f.fake.Redeliveries("g"))
	}
}

// TestMinRemainingZeroIsHonoured: REDELIVERY_MIN_REMAINING accepts 0
// (config.LoadRedeliverer's minimum), which wire/redeliverer passes as
// Config.MinRemaining 0; New used to turn it into the default 50.
func TestMinRemainingZeroIsHonoured(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.MinRemaining = 0 // what REDELIVERY_MIN_REMAINING=0 wires
	f.fake.SetAppRateLimit(5000, 20, t0.Add(30*time.Minute))
	f.fake.SetWebhook(answer(200), "s")
	f.record("a", "workflow_job", 503, 2*time.Minute)
	f.record("b", "workflow_job", 503, time.Minute)
	rep := f.run(t)
	if rep.Stopped != "" || rep.Redelivered != 2 {
		t.Errorf("pass = %+v, want both redelivered with 19 calls left and a floor of 0", rep)
	}
}

// TestBrokenConnectionRedeliveryKeepsItsAttempt: the same with the
// connection to GitHub reset on POST .../attempts for three passes: no
// redelivery was asked, so none spends an attempt.
func TestBrokenConnectionRedeliveryKeepsItsAttempt(t *testing.T) {
	t.Parallel()
	f := oneFailedDelivery(t)
	for pass := range 3 {
		f.fake.Fail(ghfake.RouteRedeliver, 1, ghfake.ConnectionReset())
		if rep := f.run(t); rep.Redelivered != 0 || rep.Errors != 1 {
			t.Fatalf("pass %d = %+v, want the ask failed, nothing redelivered", pass+1, rep)
		}
		f.clock.add(5 * time.Minute)
	}
	rep := f.run(t)
	if n := f.fake.Redeliveries("g"); n != 1 || rep.Spent != 0 {
		t.Errorf("once the connection held: g redelivered %d times, spent %d; want 1, 0", n, rep.Spent)
	}
}

// TestWrongKeyRedeliveryKeepsItsAttempt: the endpoint is down (a bad
// deploy) and a queued delivery fails; its first redelivery fails too.
// Then the App's key goes wrong for 45 minutes (rotated on GitHub, not
// yet in Secrets Manager): every read of the log and every ask is a 401,
// and the passes still ask the carried delivery. GitHub redelivered
// nothing, so none of those asks spends an attempt: once the key and the
// endpoint are mended, the delivery is redelivered and its job claimed.
// Counted, the 401s spent its three attempts and its job waited 24 h.
func TestWrongKeyRedeliveryKeepsItsAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.MaxAttempts = 3
	f.fake.SetWebhook(answer(503), "s")
	f.record("g", "workflow_job", 503, 0)
	f.run(t) // asks once: GitHub redelivers, the endpoint fails it again
	f.fake.Drain()
	f.clock.add(5 * time.Minute)
	f.run(t) // the failed redelivery is carried, waiting for its spacing
	good := f.cfg.GitHub
	wrong := wrongKey(t, f)
	f.cfg.GitHub = wrong
	for _, d := range []time.Duration{5 * time.Minute, 20 * time.Minute, 20 * time.Minute} {
		f.clock.add(d)
		r, err := redeliver.New(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep, _ := r.Run(context.Background()); rep.Spent != 0 {
			t.Fatalf("a pass with the wrong key = %+v: attempts spent on 401s", rep)
		}
	}
	f.cfg.GitHub = good
	f.fake.SetWebhook(answer(200), "s")
	f.clock.add(20 * time.Minute)
	rep := f.run(t)
	if n := f.fake.Redeliveries("g"); n != 2 || rep.Spent != 0 {
		t.Errorf("once mended: g redelivered %d times, pass %+v; want 2 (the first, then this pass's), none spent", n, rep)
	}
}

// wrongKey is a client of f's App signing with a key GitHub does not
// have: every call is a 401.
func wrongKey(t *testing.T, f *fixture) *ghapp.Client {
	t.Helper()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	c, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemKey, BaseURL: f.url, Now: f.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLastingAskFailureStopsThePass: every ask for a redelivery fails
// for want of a connection for 50 minutes, with five failed deliveries
// carried. Each failed ask gives its attempt back, so the pass stops after
// maxUnreached (3) in a row, not one ask per delivery (refunded, each would
// be asked on every pass for the whole window), and is an error, so
// RedelivererErrorsAlarm says so. Once GitHub answers, each is redelivered.
func TestLastingAskFailureStopsThePass(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	guids := []string{"a", "b", "c", "d", "e"}
	for i, g := range guids {
		f.record(g, "workflow_job", 503, time.Duration(len(guids)-i)*time.Minute)
	}
	const passes = 10
	f.fake.Fail(ghfake.RouteRedeliver, 3*passes, ghfake.ConnectionReset())
	for pass := range passes {
		r, err := redeliver.New(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(context.Background())
		if err == nil || rep.Stopped != redeliver.StopAskRefused || rep.Redelivered != 0 {
			t.Fatalf("pass %d = %+v, %v; want an error, stopped by the failed asks, nothing redelivered", pass+1, rep, err)
		}
		f.clock.add(5 * time.Minute)
	}
	if asks := f.fake.Stats().Calls[ghfake.RouteRedeliver]; asks != 3*passes {
		t.Errorf("%d asks in %d passes, want 3 a pass", asks, passes)
	}
	f.run(t)
	for _, g := range guids {
		if n := f.fake.Redeliveries(g); n != 1 {
			t.Errorf("%s: redelivered %d times once GitHub answered, want 1", g, n)
		}
	}
}

// refusesOne refuses the redelivery of one log id with an answer about
// that delivery alone.
type refusesOne struct {
	redeliver.GitHub
	id     int64
	status int
}

func (h refusesOne) RedeliverHookDelivery(ctx context.Context, id int64) error {
	if id == h.id {
		return fmt.Errorf("redeliver hook delivery %d: %w", id, &github.ErrorResponse{
			Response: &http.Response{StatusCode: h.status, Header: http.Header{}}, Message: "refused"})
	}
	return h.GitHub.RedeliverHookDelivery(ctx, id)
}

// TestOneDeliverysRefusalAsksTheRest: GitHub refuses the oldest failed
// delivery's redelivery with an answer about it alone (409, 451). The
// others are asked in the same pass, and the refused one keeps its
// attempts: stopping the pass at it, or giving its attempt back, kept it
// first and asked nothing behind it, pass after pass, until they aged out
// (a review found it).
func TestOneDeliverysRefusalAsksTheRest(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusConflict, http.StatusUnavailableForLegalReasons} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.cfg.MaxAttempts = 3
			f.fake.SetWebhook(answer(200), "s")
			head := f.record("head", "workflow_job", 503, 5*time.Minute)
			for i, g := range []string{"b", "c", "d", "e"} {
				f.record(g, "workflow_job", 503, time.Duration(4-i)*time.Minute)
			}
			f.cfg.GitHub = refusesOne{GitHub: f.gh, id: head.ID, status: status}
			if rep := f.run(t); rep.Stopped != "" || rep.Redelivered != 4 {
				t.Fatalf("pass = %+v, want the four behind the refused one redelivered", rep)
			}
			f.fake.Drain()
			spent := 0
			for range 8 { // its attempts, spaced 10 and 20 minutes
				f.clock.add(10 * time.Minute)
				spent += f.run(t).Spent
				f.fake.Drain()
			}
			if spent != 1 {
				t.Errorf("the refused delivery spent %d times, want once: its attempts bound its asks", spent)
			}
		})
	}
}

// blips fails every k-th ask with a reset connection.
type blips struct {
	redeliver.GitHub
	k, n int
}

func (b *blips) RedeliverHookDelivery(ctx context.Context, id int64) error {
	if b.n++; b.n%b.k == 0 {
		return fmt.Errorf("redeliver hook delivery %d: %w", id, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
	}
	return b.GitHub.RedeliverHookDelivery(ctx, id)
}

// TestBlipsDoNotThrottleABacklog: 200 failed deliveries and one ask in
// five meeting a reset connection. A pass goes on past a blip (it stops
// only at maxUnreached in a row), so the backlog drains and none ages out
// of the window; stopping at the first blip asked about four a pass.
func TestBlipsDoNotThrottleABacklog(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	const n = 200
	for i := range n {
		f.record(fmt.Sprintf("g-%03d", i), "workflow_job", 503, time.Duration(n-i)*time.Second)
	}
	f.cfg.GitHub = &blips{GitHub: f.gh, k: 5}
	expired := 0
	for range 40 {
		expired += f.run(t).Expired
		f.fake.Drain()
		f.clock.add(5 * time.Minute)
	}
	if expired > 0 {
		t.Errorf("%d of %d failed deliveries expired unasked with one ask in five blipping", expired, n)
	}
}

// slow401 answers every ask with a 401 and, doing so, uses the pass's
// budget (the injected clock moves past it).
type slow401 struct {
	redeliver.GitHub
	f *fixture
}

func (s slow401) RedeliverHookDelivery(ctx context.Context, id int64) error {
	s.f.clock.add(time.Minute)
	return fmt.Errorf("redeliver %d: %w", id, &github.ErrorResponse{
		Response: &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}}, Message: "bad credentials"})
}

// TestAskRefusedIsAnErrorEvenAtTheBudget: a 401 stops the pass
// (StopAskRefused, an error); the next candidate's shouldStop then
// overwrites Stopped with "budget" and Run returns nil.
func TestAskRefusedIsAnErrorEvenAtTheBudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	f.record("a", "workflow_job", 503, 2*time.Minute)
	f.record("b", "workflow_job", 503, time.Minute)
	f.cfg.GitHub = slow401{GitHub: f.gh, f: f}
	r, err := redeliver.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err == nil {
		t.Fatalf("Run = %+v, nil; want an error: every ask met a 401", rep)
	}
}

// gh408 answers asks with GitHub's 408 (a timeout on GitHub's side: it
// redelivered nothing).
type gh408 struct{ redeliver.GitHub }

func (g gh408) RedeliverHookDelivery(ctx context.Context, id int64) error {
	return fmt.Errorf("redeliver %d: %w", id, &github.ErrorResponse{
		Response: &http.Response{StatusCode: http.StatusRequestTimeout, Header: http.Header{}}, Message: "timeout"})
}

// Test408GivesTheAttemptBack: three passes meeting GitHub's 408
// (classified Network, "found no GitHub") spend the delivery's attempts,
// so once GitHub answers it is never redelivered.
func Test408GivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.MaxAttempts = 3
	f.fake.SetWebhook(answer(200), "s")
	f.record("a", "workflow_job", 503, time.Minute)
	f.cfg.GitHub = gh408{f.gh}
	spent := 0
	for range 4 {
		r, err := redeliver.New(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep, _ := r.Run(context.Background()) // an error: no GitHub
		spent += rep.Spent
		f.clock.add(20 * time.Minute)
	}
	if spent != 0 {
		t.Fatalf("attempts spent by 408s alone (%d passes reported Spent): GitHub redelivered nothing", spent)
	}
}

// mixed: odd asks a reset connection, even asks GitHub's refusal of the
// delivery (422).
type mixed struct {
	redeliver.GitHub
	n int
}

func (m *mixed) RedeliverHookDelivery(ctx context.Context, id int64) error {
	if m.n++; m.n%2 == 1 {
		return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return &github.ErrorResponse{Response: &http.Response{StatusCode: http.StatusUnprocessableEntity, Header: http.Header{}}, Message: "Validation Failed"}
}

// TestUnreachedIsInARow: reset, 422, reset, 422, reset…: GitHub answered
// between the resets, so no three in a row found no GitHub, and every
// delivery is asked.
func TestUnreachedIsInARow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	for i := range 8 {
		f.record(fmt.Sprintf("g-%d", i), "workflow_job", 503, time.Duration(8-i)*time.Minute)
	}
	m := &mixed{GitHub: f.gh}
	f.cfg.GitHub = m
	r, err := redeliver.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if rep.Stopped == redeliver.StopAskRefused || m.n != 8 {
		t.Fatalf("Run = %+v, %v after %d asks; want all 8 asked (never 3 in a row unreached)", rep, err, m.n)
	}
}

// TestGitHubFailingStopsThePass: GitHub answers 500 to every ask, with
// 200 failed deliveries carried. Each 5xx gives its attempt back, so a
// pass that went on asked all 200 on every pass of the outage (2,400 asks
// an hour, spending the App's budget, which the claimers' token exchanges
// draw on, to its floor; a review found it). It stops after three in a
// row, as an error.
func TestGitHubFailingStopsThePass(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	for i := range 200 {
		f.record(fmt.Sprintf("g-%03d", i), "workflow_job", 503, time.Duration(200-i)*time.Second+time.Minute)
	}
	const passes = 12
	f.fake.Fail(ghfake.RouteRedeliver, 100000, ghfake.ServerError(http.StatusInternalServerError))
	for pass := range passes {
		r, err := redeliver.New(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := r.Run(context.Background()); err == nil || rep.Stopped != redeliver.StopAskRefused {
			t.Fatalf("pass %d = %+v, %v; want stopped by GitHub failing, an error", pass+1, rep, err)
		}
		f.clock.add(5 * time.Minute)
	}
	if n := f.fake.Stats().Calls[ghfake.RouteRedeliver]; n != 3*passes {
		t.Errorf("%d asks in %d passes of a GitHub-wide 500, want 3 a pass", n, passes)
	}
}

// oneFailedDelivery is a fixture with one failed queued delivery, "g", a
// minute old, an endpoint that answers again, and three attempts a GUID.
func oneFailedDelivery(t *testing.T) *fixture {
	t.Helper()
	f := setup(t)
	f.cfg.MaxAttempts = 3
	f.fake.SetWebhook(answer(200), "s")
	f.record("g", "workflow_job", 503, time.Minute)
	return f
}
