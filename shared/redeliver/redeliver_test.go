package redeliver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/redeliver"
)

var _ redeliver.Store = (*mem.Store)(nil)

const appID = 1234

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// TestNoAWSServiceDependency: the flow speaks its ports in domain types.
func TestNoAWSServiceDependency(t *testing.T) {
	t.Parallel()
	contract.DepsFree(t, "github.com/ghclaim/ghclaim/shared/redeliver")
}

var (
	keyOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

func appKey(t *testing.T) *rsa.PrivateKey {
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		rsaKey = k
	})
	return rsaKey
}

// clock is a settable injected clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	fake  *ghfake.Server
	store *mem.Store
	clock *clock
	gh    *ghapp.Client
	cfg   redeliver.Config
	url   string // the stand-in's
}

// setup serves ghfake over HTTP and builds the App client on it (JWT, a
// rate-reading transport), a memory store and the injected clock.
// TestAppBudgetKeepsItsReadingThroughABlock: a 429 without rate headers
// (a secondary limit's block alone) never clobbers the App's last budget
// reading, which the pass's floor check reads; the block is kept beside
// it, through later readings, and a shorter block does not cut it.
func TestAppBudgetKeepsItsReadingThroughABlock(t *testing.T) {
	t.Parallel()
	b := &redeliver.AppBudget{}
	rd := ratelimit.Reading{Limit: 5000, Remaining: 3, ResetAt: t0.Add(time.Hour), ObservedAt: t0}
	b.Observe(0, rd)
	b.Observe(0, ratelimit.Reading{BlockedUntil: t0.Add(time.Minute), BlockedFor: time.Minute})
	b.Observe(0, ratelimit.Reading{BlockedUntil: t0.Add(time.Second), BlockedFor: time.Second})
	want := rd
	want.BlockedUntil, want.BlockedFor = t0.Add(time.Minute), time.Minute
	if got, ok := b.Reading(); !ok || !got.Equal(want) {
		t.Errorf("reading %+v (%v), want %+v", got, ok, want)
	}
	later := ratelimit.Reading{Limit: 5000, Remaining: 2, ResetAt: t0.Add(time.Hour), ObservedAt: t0.Add(time.Second)}
	b.Observe(0, later)
	want = later
	want.BlockedUntil, want.BlockedFor = t0.Add(time.Minute), time.Minute
	if got, _ := b.Reading(); !got.Equal(want) {
		t.Errorf("after a later reading %+v, want %+v", got, want)
	}
	if b := (&redeliver.AppBudget{}); func() bool { b.Observe(0, ratelimit.Block(t0, time.Minute)); _, ok := b.Reading(); return !ok }() {
		t.Error("a block alone reads as nothing seen")
	}
}

func setup(t *testing.T, opts ...ghfake.Option) *fixture {
	t.Helper()
	k := appKey(t)
	c := &clock{t: t0}
	fake := ghfake.New(append([]ghfake.Option{ghfake.WithAppID(appID), ghfake.WithPublicKey(&k.PublicKey), ghfake.WithClock(c.now)}, opts...)...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	budget := &redeliver.AppBudget{}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	gh, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemKey, BaseURL: srv.URL, Now: c.now,
		WrapApp: func(base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, 0, budget, c.now)
		}})
	if err != nil {
		t.Fatal(err)
	}
	st := mem.NewStore(job.Timing{})
	return &fixture{fake: fake, store: st, clock: c, gh: gh, url: srv.URL, cfg: redeliver.Config{
		GitHub: gh, Store: st, Rate: budget.Reading, Now: c.now,
	}}
}

func (f *fixture) run(t *testing.T) redeliver.Report {
	t.Helper()
	r, err := redeliver.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

// record logs a delivery of guid answered code, age old.
func (f *fixture) record(guid, event string, code int, age time.Duration) ghfake.HookDelivery {
	return f.fake.RecordDelivery(ghfake.HookDelivery{GUID: guid, Event: event, Action: "queued", StatusCode: code,
		DeliveredAt: f.clock.now().Add(-age), Body: []byte(`{"action":"queued"}`)})
}

// answer makes the webhook target answer code.
func answer(code int) ghfake.Target {
	return func(context.Context, http.Header, []byte) (int, []byte, error) { return code, nil, nil }
}

func TestPagingStopsAtTheMark(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.PerPage = 100
	var failed []string
	for i := range 250 {
		guid := fmt.Sprintf("g-%03d", i)
		switch {
		case i%10 == 3:
			f.record(guid, "workflow_job", 503, time.Duration(250-i)*time.Second)
			failed = append(failed, guid)
		case i%10 == 7:
			f.record(guid, "ping", 500, time.Duration(250-i)*time.Second) // not a workflow_job: left
		default:
			f.record(guid, "workflow_job", 200, time.Duration(250-i)*time.Second)
		}
	}
	f.fake.SetWebhook(answer(200), "s")
	rep := f.run(t)
	if rep.Pages != 3 || rep.Read != 250 || rep.Failed != len(failed) || rep.Redelivered != len(failed) || rep.Stopped != "" {
		t.Fatalf("first pass = %+v, want 3 pages, 250 read, %d failed and redelivered", rep, len(failed))
	}
	for _, g := range failed {
		if n := f.fake.Redeliveries(g); n != 1 {
			t.Errorf("redeliveries of %s = %d, want 1", g, n)
		}
	}
	if rep.Mark.ID != 250 {
		t.Errorf("mark = %d, want the newest entry read, 250", rep.Mark.ID)
	}

	// The next pass reads only what is newer than the mark: the 25
	// redeliveries (all OK now: GitHub sent them after its 202s, before
	// this pass) and 5 new deliveries, one failed.
	f.fake.Drain()
	f.clock.add(5 * time.Minute)
	for i := range 5 {
		code := 200
		if i == 2 {
			code = 502
		}
		f.record(fmt.Sprintf("new-%d", i), "workflow_job", code, 0)
	}
	rep = f.run(t)
	if rep.Pages != 1 || rep.Read != len(failed)+5 || rep.Redelivered != 1 {
		t.Fatalf("second pass = %+v, want 1 page, %d read, 1 redelivered", rep, len(failed)+5)
	}
	if n := f.fake.Redeliveries("new-2"); n != 1 {
		t.Errorf("redeliveries of new-2 = %d, want 1", n)
	}
	for _, g := range failed {
		if n := f.fake.Redeliveries(g); n != 1 {
			t.Errorf("after the second pass, redeliveries of %s = %d, want still 1", g, n)
		}
	}
}

func TestWindowEdge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		retention time.Duration // ghfake's; GitHub prunes lazily
		window    time.Duration
		age       time.Duration
		want      int
	}{
		{name: "3 days old is asked", retention: 96 * time.Hour, window: 72 * time.Hour, age: 72 * time.Hour, want: 1},
		{name: "3 days and 1 s old is not asked, even while GitHub still lists it", retention: 96 * time.Hour, window: 72 * time.Hour, age: 72*time.Hour + time.Second, want: 0},
		{name: "GitHub no longer lists it after 3 days", retention: ghfake.DefaultRetention, window: 72 * time.Hour, age: 72*time.Hour + time.Second, want: 0},
		{name: "default window: 3 h", retention: 96 * time.Hour, age: 3*time.Hour + time.Second, want: 0},
		{name: "default window: inside 3 h", retention: 96 * time.Hour, age: 3*time.Hour - time.Second, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, ghfake.WithRetention(tt.retention))
			f.cfg.Window = tt.window
			f.record("old", "workflow_job", 503, tt.age)
			f.fake.SetWebhook(answer(200), "s")
			f.run(t)
			if n := f.fake.Redeliveries("old"); n != tt.want {
				t.Errorf("redeliveries = %d, want %d", n, tt.want)
			}
		})
	}
}

func TestKeepsFailingGetsAtMostMaxAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.MaxAttempts = 3
	f.fake.SetWebhook(answer(503), "s")
	f.record("sick", "workflow_job", 503, time.Minute)
	spent := 0
	for range 12 { // an hour: the attempts are spaced 10 and 20 minutes apart
		spent += f.run(t).Spent
		f.fake.Drain() // GitHub redelivers (and the endpoint fails it) before the next pass
		f.clock.add(5 * time.Minute)
	}
	if n := f.fake.Redeliveries("sick"); n != 3 {
		t.Errorf("redeliveries = %d, want 3 (MaxAttempts)", n)
	}
	// The pass that reads the third failed redelivery leaves the GUID; the
	// mark then moves past it and no later pass reads it again.
	if spent != 1 {
		t.Errorf("passes that left it as spent = %d, want 1", spent)
	}
}

func TestSucceededRedeliveryStopsFurtherAttempts(t *testing.T) {
	t.Parallel()
	t.Run("our redelivery succeeded", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.record("g", "workflow_job", 503, time.Minute)
		f.fake.SetWebhook(answer(200), "s")
		for range 3 {
			f.run(t)
			f.fake.Drain() // the next pass reads the redelivery that succeeded
			f.clock.add(5 * time.Minute)
		}
		if n := f.fake.Redeliveries("g"); n != 1 {
			t.Errorf("redeliveries = %d, want 1", n)
		}
	})
	t.Run("someone's redelivery succeeded", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.record("g", "workflow_job", 503, 2*time.Minute)
		f.fake.RecordDelivery(ghfake.HookDelivery{GUID: "g", Event: "workflow_job", StatusCode: 200, Redelivery: true, DeliveredAt: t0.Add(-time.Minute)})
		rep := f.run(t)
		if n := f.fake.Redeliveries("g"); n != 0 || rep.Failed != 0 {
			t.Errorf("redeliveries = %d, failed = %d, want 0, 0", n, rep.Failed)
		}
	})
}

func TestRateLimitStopsThePass(t *testing.T) {
	t.Parallel()
	t.Run("budget below the floor", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.cfg.MinRemaining = 50
		f.fake.SetAppRateLimit(5000, 60, t0.Add(30*time.Minute))
		f.fake.SetWebhook(answer(200), "s")
		for i := range 20 {
			f.record(fmt.Sprintf("g-%02d", i), "workflow_job", 503, time.Duration(20-i)*time.Second)
		}
		rep := f.run(t)
		// 60 left: the list costs 1, then 10 redeliveries bring it to 49.
		// The read ended: the mark moves to its newest entry and the 10
		// deliveries not asked are carried to the next pass.
		if rep.Stopped != redeliver.StopRateFloor || rep.Redelivered != 10 || rep.Mark.ID != 20 || len(rep.Mark.Retry) != 10 {
			t.Fatalf("pass = %+v, want stopped at the floor after 10 redeliveries, mark 20, 10 carried", rep)
		}
		// After the reset the next pass finishes, each GUID asked once.
		f.fake.Drain()
		f.clock.add(31 * time.Minute)
		rep = f.run(t)
		if rep.Stopped != "" || rep.Redelivered != 10 {
			t.Fatalf("pass after the reset = %+v, want complete with the 10 left", rep)
		}
		for i := range 20 {
			if n := f.fake.Redeliveries(fmt.Sprintf("g-%02d", i)); n != 1 {
				t.Errorf("redeliveries of g-%02d = %d, want 1", i, n)
			}
		}
	})
	t.Run("403 on the log", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.fake.SetAppRateLimit(5000, 0, t0.Add(30*time.Minute))
		f.record("g", "workflow_job", 503, time.Minute)
		rep := f.run(t)
		if rep.Stopped != redeliver.StopRateLimit || rep.Pages != 0 {
			t.Errorf("pass = %+v, want stopped by the rate limit before any page", rep)
		}
	})
	t.Run("a secondary limit's block outlasts the pass", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.fake.SetWebhook(answer(200), "s")
		f.record("g", "workflow_job", 503, time.Minute)
		f.fake.Fail(ghfake.RouteDeliveries, 1, ghfake.TooManyRequests(30*time.Minute))
		if rep := f.run(t); rep.Stopped != redeliver.StopRateLimit || rep.Pages != 0 {
			t.Fatalf("pass 1 = %+v, want stopped by the 429", rep)
		}
		// The next pass, five minutes on, is inside the 30-minute block:
		// no call at all (GitHub may ban an integration that goes on).
		f.clock.add(5 * time.Minute)
		lists := f.fake.Stats().Calls[ghfake.RouteDeliveries]
		if rep := f.run(t); rep.Stopped != redeliver.StopRateLimit || f.fake.Stats().Calls[ghfake.RouteDeliveries] != lists {
			t.Fatalf("pass 2 = %+v, %d more log reads; want stopped by the block before any call", rep, f.fake.Stats().Calls[ghfake.RouteDeliveries]-lists)
		}
		f.clock.add(26 * time.Minute)
		if rep := f.run(t); rep.Stopped != "" || f.fake.Redeliveries("g") != 1 {
			t.Fatalf("pass after the block = %+v, g redelivered %d times; want it asked", rep, f.fake.Redeliveries("g"))
		}
	})
	t.Run("429 on a redelivery", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.fake.SetWebhook(answer(200), "s")
		f.record("a", "workflow_job", 503, 2*time.Minute)
		f.record("b", "workflow_job", 503, time.Minute)
		f.fake.Fail(ghfake.RouteRedeliver, 1, ghfake.TooManyRequests(time.Minute))
		rep := f.run(t)
		if rep.Stopped != redeliver.StopRateLimit || rep.Redelivered != 0 || f.fake.Redeliveries("b") != 0 {
			t.Errorf("pass = %+v, b redelivered %d times; want stopped at the 429, nothing more asked", rep, f.fake.Redeliveries("b"))
		}
	})
}

// TestRefusedRedeliveryIsReadAgain: a redelivery GitHub refused (a 500,
// not a rate limit) is asked again by the next pass. The pass that met the
// refusal must not move its mark past the delivery, or no pass ever reads
// it again and the job waits 24 h.
func TestRefusedRedeliveryIsReadAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	f.record("refused", "workflow_job", 503, 2*time.Minute)
	f.record("asked", "workflow_job", 503, time.Minute)
	f.fake.Fail(ghfake.RouteRedeliver, 1, ghfake.ServerError(http.StatusInternalServerError))
	if rep := f.run(t); rep.Errors != 1 || rep.Redelivered != 1 {
		t.Fatalf("pass 1: errors %d, redelivered %d; want 1, 1", rep.Errors, rep.Redelivered)
	}
	f.fake.Drain()
	f.clock.add(5 * time.Minute)
	f.run(t)
	if n := f.fake.Redeliveries("refused"); n != 1 {
		t.Errorf("redeliveries of the refused delivery = %d, want 1 (asked again by pass 2)", n)
	}
	if n := f.fake.Redeliveries("asked"); n != 1 {
		t.Errorf("redeliveries of the asked delivery = %d, want 1", n)
	}
}

// pageFaults fails every read of the delivery log after the first of a
// pass with a 502 from ghfake: each pass reads one page.
type pageFaults struct {
	redeliver.GitHub
	fake  *ghfake.Server
	calls int
}

func (p *pageFaults) ListHookDeliveries(ctx context.Context, cursor string, perPage int) (ghapp.DeliveryPage, error) {
	if p.calls++; p.calls > 1 {
		p.fake.Fail(ghfake.RouteDeliveries, 1, ghfake.ServerError(http.StatusBadGateway))
	}
	return p.GitHub.ListHookDeliveries(ctx, cursor, perPage)
}

// TestFailedPageKeepsTheRead: a page of the log that cannot be read ends
// the read like a stop, not like a failed pass. What was read is
// redelivered and the next pass goes on from the page not read, so a log
// longer than what one pass can read between faults is still read to its
// end, each failed delivery asked once. Before, any failed page threw the
// whole pass away (nothing asked, no mark), and with no mark yet every
// pass started again from the newest entry (found by make chaos).
func TestFailedPageKeepsTheRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.PerPage = 100
	f.fake.SetWebhook(answer(200), "s")
	// "twice" failed long ago and someone's redelivery of it succeeded
	// since: its old entry is on the last page, its redelivery on the first.
	f.record("twice", "workflow_job", 503, 300*time.Second)
	var failed []string
	for i := range 250 {
		guid := fmt.Sprintf("g-%03d", i)
		code := 200
		if i%10 == 3 {
			code = 503
			failed = append(failed, guid)
		}
		f.record(guid, "workflow_job", code, time.Duration(251-i)*time.Second)
	}
	f.fake.RecordDelivery(ghfake.HookDelivery{GUID: "twice", Event: "workflow_job", StatusCode: 200, Redelivery: true, DeliveredAt: t0})

	gh := &pageFaults{GitHub: f.gh, fake: f.fake}
	f.cfg.GitHub = gh
	for pass := range 4 {
		gh.calls = 0
		r, err := redeliver.New(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(context.Background())
		t.Logf("pass %d: %+v, err %v", pass+1, rep, err)
		if pass < 2 && (err != nil || rep.Stopped != redeliver.StopReadError || rep.Pages != 1) {
			t.Errorf("pass %d = %+v, %v; want one page read, stopped by the read error, no error", pass+1, rep, err)
		}
		f.fake.Drain() // the pass's redeliveries are logged before the next
		f.clock.add(5 * time.Second)
	}
	for _, g := range failed {
		if n := f.fake.Redeliveries(g); n != 1 {
			t.Errorf("redeliveries of %s = %d, want 1", g, n)
		}
	}
	if n := f.fake.Redeliveries("twice"); n != 0 {
		t.Errorf("redeliveries of twice = %d, want 0 (its redelivery succeeded, read two passes before its old entry)", n)
	}
	m, err := f.store.LoadMark(context.Background())
	if err != nil || m.ID < 252 || m.Resuming() {
		t.Errorf("mark after 4 passes = %+v, %v; want at least 252 (the newest entry of the first read), no read under way", m, err)
	}
}

// TestRefusedCursorReadsFromTheTop: a stored cursor GitHub refuses (a 400)
// does not stall the redeliverer: the read starts again from the newest
// entry.
func TestRefusedCursorReadsFromTheTop(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(answer(200), "s")
	f.record("g", "workflow_job", 503, time.Minute)
	if err := f.store.SaveMark(context.Background(), job.DeliveryMark{Resume: job.DeliveryResume{Cursor: "zz", Top: 1, TopAt: t0}}, t0); err != nil {
		t.Fatal(err)
	}
	rep := f.run(t)
	if n := f.fake.Redeliveries("g"); n != 1 || rep.Mark.ID != 1 || rep.Mark.Resuming() {
		t.Errorf("redeliveries = %d, pass %+v; want 1, mark 1, no read under way", n, rep)
	}
}

// countFailsOnce fails the first attempt count of one GUID, as a write to
// the table that met a fault.
type countFailsOnce struct {
	redeliver.Store
	guid   string
	failed bool
}

func (c *countFailsOnce) CountRedelivery(ctx context.Context, guid string, id int64, max int, now time.Time) (int, error) {
	if guid == c.guid && !c.failed {
		c.failed = true
		return 0, errors.New("count: connection reset")
	}
	return c.Store.CountRedelivery(ctx, guid, id, max, now)
}

// TestNotAskedIsCarried: a failed delivery whose redelivery a pass could
// not ask (its count write failed) is asked by the next pass without the
// next pass reading the log again down to it. Before, the mark stayed
// below it, so every later pass read every page above it again (at 20 %
// faults per page a long read rarely ends) and each pass moved the mark
// only up to the next count write that failed (found by make chaos).
func TestNotAskedIsCarried(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.PerPage = 100
	f.fake.SetWebhook(answer(200), "s")
	for i := range 250 {
		code := 200
		if i%10 == 3 {
			code = 503
		}
		f.record(fmt.Sprintf("g-%03d", i), "workflow_job", code, time.Duration(251-i)*time.Second)
	}
	f.cfg.Store = &countFailsOnce{Store: f.store, guid: "g-003"}
	if rep := f.run(t); rep.Errors != 1 || rep.Redelivered != 24 || rep.Pages != 3 {
		t.Fatalf("pass 1 = %+v, want 3 pages, 24 redelivered, 1 error", rep)
	}
	f.fake.Drain() // GitHub sends the 24 before the next pass
	f.clock.add(5 * time.Second)
	rep := f.run(t)
	if n := f.fake.Redeliveries("g-003"); n != 1 {
		t.Errorf("redeliveries of g-003 = %d, want 1 (asked by pass 2)", n)
	}
	if rep.Pages != 1 || rep.Read != 24 || rep.Redelivered != 1 || len(rep.Mark.Retry) != 0 {
		t.Errorf("pass 2 = %+v, want 1 page (the 24 redeliveries since) read, 1 redelivered, nothing carried", rep)
	}
	for i := 13; i < 250; i += 10 {
		if n := f.fake.Redeliveries(fmt.Sprintf("g-%03d", i)); n != 1 {
			t.Errorf("redeliveries of g-%03d = %d, want 1", i, n)
		}
	}
}

// TestCarriedRedeliveryOfAReadUnderWay: a failed redelivery entry read by
// a read that then stops part-way, and whose own redelivery could not be
// asked, is asked by the next pass. Its GUID is among those the read
// carries (their older entries are not their latest), and that must not
// hide the carried entry itself: before, it was dropped as superseded, the
// read went on below it and no later read reached it again (make chaos: a
// job with no record).
func TestCarriedRedeliveryOfAReadUnderWay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.PerPage = 100
	f.fake.SetWebhook(answer(200), "s")
	f.record("g", "workflow_job", 0, 300*time.Second) // unreached, on the last page
	for i := range 250 {
		f.record(fmt.Sprintf("ok-%03d", i), "workflow_job", 200, time.Duration(251-i)*time.Second)
	}
	// The redelivery of g failed too: the newest entry, on the first page.
	f.fake.RecordDelivery(ghfake.HookDelivery{GUID: "g", Event: "workflow_job", Action: "queued", StatusCode: 500, Redelivery: true, DeliveredAt: t0})

	gh := &pageFaults{GitHub: f.gh, fake: f.fake}
	f.cfg.GitHub, f.cfg.Store = gh, &countFailsOnce{Store: f.store, guid: "g"}
	for range 5 {
		gh.calls = 0
		r, err := redeliver.New(f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.fake.Drain()
		f.clock.add(5 * time.Second)
	}
	if n := f.fake.Redeliveries("g"); n != 1 {
		t.Errorf("redeliveries of g = %d, want 1 (its failed redelivery carried to the next pass)", n)
	}
}

// loadMarkFails fails the mark's read with text that quotes a credential,
// as an upstream error may.
type loadMarkFails struct{ redeliver.Store }

func (loadMarkFails) LoadMark(context.Context) (job.DeliveryMark, error) {
	return job.DeliveryMark{}, errors.New("get mark: refused (Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiI3In0.c2lnbmF0dXJl)")
}

// TestHandleRedactsItsError: Lambda logs a returned error as it is, so
// Handle passes it through the redaction every log line gets; errors.Is
// still sees the cause.
func TestHandleRedactsItsError(t *testing.T) {
	f := setup(t)
	f.cfg.Store = loadMarkFails{f.store}
	r, err := redeliver.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	herr := r.Handle(context.Background(), events.CloudWatchEvent{})
	if herr == nil {
		t.Fatal("Handle returned no error though the mark could not be read")
	}
	if strings.Contains(herr.Error(), "eyJ") || !strings.Contains(herr.Error(), "load mark") {
		t.Errorf("Handle's error %q: want the cause named and the JWT redacted", herr)
	}
}

// TestCarriedDeliveryAgedOutIsReported: failed deliveries a stopped pass
// carried, which then age past the window before a pass can ask them, are
// dropped (GitHub refuses older ones) but counted and logged by GUID, so
// the alarm and the operator learn of a job nothing will bring in. Before,
// they were dropped without a trace.
func TestCarriedDeliveryAgedOutIsReported(t *testing.T) {
	t.Parallel()
	f, first := carriedAtTheFloor(t)
	carried := first.Mark.Retry
	if first.Stopped != redeliver.StopRateFloor || len(carried) == 0 {
		t.Fatalf("first pass = %+v, want stopped at the floor with deliveries carried", first)
	}
	var logs bytes.Buffer
	f.cfg.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	f.clock.add(redeliver.DefaultWindow + time.Minute) // the redeliverer was down meanwhile
	rep := f.run(t)
	if rep.Expired != len(carried) || rep.Redelivered != 0 || len(rep.Mark.Retry) != 0 {
		t.Fatalf("pass after the window = %+v, want the %d carried counted expired, none asked", rep, len(carried))
	}
	for _, d := range carried {
		if !strings.Contains(logs.String(), `"delivery_id":"`+d.GUID+`"`) {
			t.Errorf("no log line names expired delivery %s:\n%s", d.GUID, logs.String())
		}
	}
}

// carriedAtTheFloor is a redeliverer whose first pass read eight failed
// deliveries and stopped at the App's rate floor (55 left, floor 50) after
// a few redeliveries, carrying the rest to the next pass; and that pass's
// report.
func carriedAtTheFloor(t *testing.T) (*fixture, redeliver.Report) {
	t.Helper()
	f := setup(t)
	f.cfg.MinRemaining = 50
	f.fake.SetAppRateLimit(5000, 55, t0.Add(30*time.Minute))
	f.fake.SetWebhook(answer(200), "s")
	for i := range 8 {
		f.record(fmt.Sprintf("g-%02d", i), "workflow_job", 503, time.Duration(8-i)*time.Second)
	}
	rep := f.run(t)
	f.fake.Drain() // GitHub sends what the pass asked
	return f, rep
}
