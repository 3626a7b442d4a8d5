package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// resetAt is half an hour after t0, on a whole second as the header is.
var (
	resetAt    = t0.Add(30 * time.Minute)
	resetEpoch = int(resetAt.Unix())
)

func TestExhausted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    ratelimit.Reading
		want bool
	}{
		{"exhausted", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(time.Minute), ObservedAt: t0.Add(-time.Minute)}, true},
		{"budget left", ratelimit.Reading{Limit: 5000, Remaining: 1, ResetAt: t0.Add(time.Minute), ObservedAt: t0.Add(-time.Minute)}, false},
		{"reset passed", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0, ObservedAt: t0.Add(-time.Minute)}, false},
		{"observed 5 min ago is stale", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(time.Hour), ObservedAt: t0.Add(-5 * time.Minute)}, false},
		{"observed just under 5 min ago", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(time.Hour), ObservedAt: t0.Add(-5*time.Minute + time.Millisecond)}, true},
		{"zero reading is not exhausted", ratelimit.Reading{}, false},
		// A reset further ahead than the hour-long window and NowLag is a
		// skewed clock or a garbled header: not trusted (jobs would wait
		// hours; GitHub's next answer tells again).
		{"reset a window and NowLag ahead", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(ratelimit.MaxWindow + ratelimit.NowLag), ObservedAt: t0}, true},
		{"reset further ahead", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(ratelimit.MaxWindow + ratelimit.NowLag + time.Second), ObservedAt: t0}, false},
		{"reset in milliseconds read as seconds", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: time.Unix(t0.UnixMilli(), 0), ObservedAt: t0}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.r.Exhausted(t0); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	full := []string{"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4321", "X-RateLimit-Reset", strconv.Itoa(resetEpoch)}
	tests := []struct {
		name   string
		h      http.Header
		want   ratelimit.Reading
		wantOK bool
	}{
		{"all three", headers(full...), ratelimit.Reading{Limit: 5000, Remaining: 4321, ResetAt: resetAt, ObservedAt: t0}, true},
		{"core bucket", headers(append(full, "X-RateLimit-Resource", "core")...), ratelimit.Reading{Limit: 5000, Remaining: 4321, ResetAt: resetAt, ObservedAt: t0}, true},
		{"runner registration bucket", headers(append(full, "X-RateLimit-Resource", "actions_runner_registration")...), ratelimit.Reading{Limit: 5000, Remaining: 4321, ResetAt: resetAt, ObservedAt: t0}, true},
		{"search bucket ignored", headers(append(full, "X-RateLimit-Resource", "search")...), ratelimit.Reading{}, false},
		{"no headers", http.Header{}, ratelimit.Reading{}, false},
		{"missing reset", headers("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0"), ratelimit.Reading{}, false},
		{"missing limit", headers("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.Itoa(resetEpoch)), ratelimit.Reading{}, false},
		{"malformed remaining", headers("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "lots", "X-RateLimit-Reset", strconv.Itoa(resetEpoch)), ratelimit.Reading{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ratelimit.ParseHeaders(tt.h, t0)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("got (%+v, %v), want (%+v, %v)", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// fakeStore is the rate#<id> item of a hand-written Store: newer wins, as
// the contract says.
type fakeStore struct {
	mu      sync.Mutex
	items   map[int64]ratelimit.Reading
	saves   []ratelimit.Reading
	blocks  []time.Time
	loads   int
	loadErr error
}

func newFakeStore() *fakeStore { return &fakeStore{items: map[int64]ratelimit.Reading{}} }

func (s *fakeStore) LoadRate(_ context.Context, id int64) (ratelimit.Reading, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads++
	if s.loadErr != nil {
		return ratelimit.Reading{}, s.loadErr
	}
	r, ok := s.items[id]
	if !ok {
		return ratelimit.Reading{}, fmt.Errorf("rate of installation %d: %w", id, ratelimit.ErrNoReading)
	}
	return r, nil
}

func (s *fakeStore) SaveRate(_ context.Context, id int64, r ratelimit.Reading) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves = append(s.saves, r)
	old, ok := s.items[id]
	if ok && old.Known() && !r.Equal(old) && !ratelimit.Supersedes(r, old) {
		return nil // as the table's condition decides
	}
	r.BlockedUntil, r.BlockedFor = old.BlockedUntil, old.BlockedFor // the primary fields only
	s.items[id] = r
	return nil
}

func (s *fakeStore) SaveBlock(_ context.Context, id int64, until time.Time, length time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocks = append(s.blocks, until)
	r := s.items[id]
	if !until.After(r.BlockedUntil) {
		return nil
	}
	r.BlockedUntil, r.BlockedFor = until, length
	s.items[id] = r
	return nil
}

// stand-in answers GitHub-style: status, rate headers when given, and a
// real error body.
type answer struct {
	status    int
	remaining int // -1: send no rate headers (a proxy's 5xx)
}

type fixture struct {
	url     string
	client  *http.Client
	tracker *ratelimit.Tracker
	store   *fakeStore
	clock   *clocktest.Clock
}

const installation = 42

// setup starts a GitHub stand-in whose answer to each request is given by
// the X-Test-Answer request header ("<status>,<remaining>"), and a client
// whose transport feeds a Tracker.
func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{store: newFakeStore(), clock: clocktest.New(t0)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a answer
		if _, err := fmt.Sscanf(r.Header.Get("X-Test-Answer"), "%d,%d", &a.status, &a.remaining); err != nil {
			t.Errorf("bad test answer: %v", err)
		}
		if got := r.Header.Get("Authorization"); got != "token ghs_secret" {
			t.Errorf("Authorization reaching GitHub: got %q, want it untouched", got)
		}
		if a.remaining >= 0 {
			w.Header().Set("X-RateLimit-Limit", "5000")
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(a.remaining))
			w.Header().Set("X-RateLimit-Reset", strconv.Itoa(resetEpoch))
			w.Header().Set("X-RateLimit-Used", strconv.Itoa(5000-a.remaining))
			w.Header().Set("X-RateLimit-Resource", "core")
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(a.status)
		switch {
		case a.status == http.StatusForbidden && a.remaining == 0:
			_, _ = io.WriteString(w, `{"message":"API rate limit exceeded for installation ID 42.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`)
		case a.status >= 500:
			_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		default:
			_, _ = io.WriteString(w, `{"total_count":0,"runners":[]}`)
		}
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.tracker = ratelimit.NewTracker(f.store, ratelimit.DefaultPersistRule(), f.clock.Now)
	f.client = &http.Client{Transport: ratelimit.NewTransport(srv.Client().Transport, installation, f.tracker, f.clock.Now)}
	return f
}

// do makes one request that the stand-in answers with a.
func (f *fixture) do(t *testing.T, a answer) int {
	t.Helper()
	status, err := f.try(a)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// try is do for goroutines other than the test's (no t.Fatal there).
func (f *fixture) try(a answer) (int, error) {
	req, err := http.NewRequest(http.MethodGet, f.url+"/repos/octo/repo/actions/runners", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "token ghs_secret")
	req.Header.Set("X-Test-Answer", fmt.Sprintf("%d,%d", a.status, a.remaining))
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestTransport(t *testing.T) {
	t.Parallel()
	type step struct {
		at     time.Duration // clock offset from t0
		answer answer
		want   ratelimit.Reading // Latest after the step
	}
	reading := func(remaining int, at time.Duration) ratelimit.Reading {
		return ratelimit.Reading{Limit: 5000, Remaining: remaining, ResetAt: resetAt, ObservedAt: t0.Add(at)}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"200 is read", []step{{0, answer{200, 4999}, reading(4999, 0)}}},
		{"403 rate limited is read", []step{{time.Second, answer{403, 0}, reading(0, time.Second)}}},
		{"404 is read", []step{{0, answer{404, 4998}, reading(4998, 0)}}},
		{"5xx with headers is read", []step{{0, answer{503, 4997}, reading(4997, 0)}}},
		{"5xx without headers does not clobber", []step{
			{0, answer{200, 17}, reading(17, 0)},
			{time.Second, answer{502, -1}, reading(17, 0)},
		}},
		{"200 without headers does not clobber an exhausted reading", []step{
			{0, answer{403, 0}, reading(0, 0)},
			{time.Second, answer{200, -1}, reading(0, 0)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			for i, s := range tt.steps {
				f.clock.Set(t0.Add(s.at))
				if got := f.do(t, s.answer); got != s.answer.status {
					t.Fatalf("step %d: status %d, want %d passed through", i, got, s.answer.status)
				}
				got, ok := f.tracker.Latest(installation)
				if !ok || !got.Equal(s.want) {
					t.Fatalf("step %d: Latest = (%+v, %v), want %+v", i, got, ok, s.want)
				}
			}
			if _, ok := f.tracker.Latest(installation + 1); ok {
				t.Errorf("another installation got a reading")
			}
		})
	}
}

func TestTransportNoHeadersNoReading(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do(t, answer{502, -1})
	if r, ok := f.tracker.Latest(installation); ok {
		t.Fatalf("got reading %+v from a response without rate headers", r)
	}
}

// Many goroutines share one client; responses finish in any order, and the
// tracker keeps the reading observed last.
func TestTransportConcurrent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var tick atomic.Int64
	// A ticking clock, so every observation differs and the last one is known.
	f.client = &http.Client{Transport: ratelimit.NewTransport(http.DefaultTransport.(*http.Transport).Clone(), installation, f.tracker, func() time.Time {
		return t0.Add(time.Duration(tick.Add(1)) * time.Millisecond)
	})}
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.try(answer{200, 5000 - i}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, ok := f.tracker.Latest(installation)
	if !ok || !got.ObservedAt.Equal(t0.Add(n*time.Millisecond)) {
		t.Fatalf("Latest = (%+v, %v), want the reading observed at tick %d", got, ok, n)
	}
}

func TestShouldPersist(t *testing.T) {
	t.Parallel()
	rule := ratelimit.DefaultPersistRule()
	saved := ratelimit.Reading{Limit: 5000, Remaining: 3000, ResetAt: resetAt, ObservedAt: t0}
	at := func(remaining int, after time.Duration) ratelimit.Reading {
		return ratelimit.Reading{Limit: 5000, Remaining: remaining, ResetAt: resetAt, ObservedAt: t0.Add(after)}
	}
	tests := []struct {
		name  string
		saved ratelimit.Reading
		cur   ratelimit.Reading
		now   time.Duration // since the write (at t0)
		want  bool
	}{
		{"nothing saved yet", ratelimit.Reading{}, at(4999, 0), 0, true},
		{"nothing observed", saved, ratelimit.Reading{}, time.Hour, false},
		{"not newer than saved", saved, at(3000, 0), time.Hour, false},
		{"a higher count observed before the saved one", saved, at(4000, -time.Second), time.Hour, false},
		// The window's budget only falls: a lower count is the newer one,
		// however the answers crossed (a slow success's answer shared
		// after an exhaustion must not stand).
		{"an exhaustion observed just before the saved count", saved, at(0, -time.Second), time.Second, true},
		{"a small drop observed before the saved count", saved, at(2990, -time.Second), time.Second, false},
		{"an exhaustion observed long before the saved count", saved, at(0, -ratelimit.Crossing-time.Second), time.Second, false},
		{"a higher count observed long after: the limit rose", saved, at(4000, ratelimit.Crossing+time.Second), ratelimit.Crossing + time.Second, true},
		{"a higher count observed just after", saved, at(4000, ratelimit.Crossing), time.Hour, false},
		{"small drop, recent write", saved, at(2501, time.Second), time.Second, false},
		{"drop of 10% of the limit", saved, at(2500, time.Second), time.Second, true},
		{"remaining reaches 0", ratelimit.Reading{Limit: 5000, Remaining: 100, ResetAt: resetAt, ObservedAt: t0}, at(0, time.Second), time.Second, true},
		{"still 0, same window", ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0}, at(0, time.Second), time.Second, false},
		{"new window", saved, ratelimit.Reading{Limit: 5000, Remaining: 4999, ResetAt: resetAt.Add(time.Hour), ObservedAt: t0.Add(time.Second)}, time.Second, true},
		{"write 29s old", saved, at(2990, 29*time.Second), 29 * time.Second, false},
		{"write 30s old", saved, at(2990, 30*time.Second), 30 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := rule.ShouldPersist(tt.saved, t0, tt.cur, t0.Add(tt.now)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The tracker writes through the Store only when the rule says so, across
// a run of real responses.
func TestTrackerPersist(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	steps := []struct {
		at        time.Duration
		answer    answer
		wantWrite bool
	}{
		{0, answer{200, 4999}, true},                 // first reading of this process
		{time.Second, answer{200, 4990}, false},      // small drop
		{2 * time.Second, answer{502, -1}, false},    // nothing new
		{3 * time.Second, answer{200, 4499}, true},   // dropped by 500 (10 %)
		{10 * time.Second, answer{200, 4480}, false}, // small drop, write 7 s old
		{33 * time.Second, answer{200, 4470}, true},  // write 30 s old
		{34 * time.Second, answer{403, 0}, true},     // exhausted
		{35 * time.Second, answer{403, 0}, false},    // still exhausted, same window
		{36 * time.Second, answer{200, -1}, false},   // headerless: nothing new
	}
	for i, s := range steps {
		f.clock.Set(t0.Add(s.at))
		f.do(t, s.answer)
		wrote, err := f.tracker.Persist(ctx, installation)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if wrote != s.wantWrite {
			t.Fatalf("step %d (%+v): wrote %v, want %v", i, s.answer, wrote, s.wantWrite)
		}
	}
	got, err := f.store.LoadRate(ctx, installation)
	if err != nil {
		t.Fatal(err)
	}
	want := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0.Add(34 * time.Second)}
	if !got.Equal(want) {
		t.Fatalf("shared reading %+v, want %+v", got, want)
	}
	if !got.Exhausted(t0.Add(40 * time.Second)) {
		t.Errorf("shared reading not exhausted")
	}
}

func TestTrackerCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0.Add(time.Minute)}
	mine := ratelimit.Reading{Limit: 5000, Remaining: 100, ResetAt: resetAt, ObservedAt: t0}
	tests := []struct {
		name      string
		stored    *ratelimit.Reading
		loadErr   error
		observed  *ratelimit.Reading
		want      ratelimit.Reading
		wantErrIs error
		wantWrite bool // whether Persist afterwards writes
	}{
		{name: "shared is newer", stored: &other, observed: &mine, want: other, wantWrite: false},
		{name: "mine is newer", stored: &mine, observed: &other, want: other, wantWrite: true},
		{name: "only mine", observed: &mine, want: mine, wantWrite: true},
		{name: "only shared", stored: &other, want: other, wantWrite: false},
		{name: "nothing anywhere", wantErrIs: ratelimit.ErrNoReading},
		{name: "store down", loadErr: errors.New("dynamodb: throttled"), observed: &mine, want: mine, wantWrite: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeStore()
			if tt.stored != nil {
				s.items[installation] = *tt.stored
			}
			tr := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return t0.Add(2 * time.Minute) })
			if tt.observed != nil {
				tr.Observe(installation, *tt.observed)
			}
			s.loadErr = tt.loadErr
			got, err := tr.Current(ctx, installation)
			switch {
			case tt.wantErrIs != nil:
				if !errors.Is(err, tt.wantErrIs) {
					t.Fatalf("err %v, want %v", err, tt.wantErrIs)
				}
				return
			case tt.loadErr != nil:
				if !errors.Is(err, tt.loadErr) {
					t.Fatalf("err %v, want it to wrap the store's", err)
				}
			case err != nil:
				t.Fatalf("err %v", err)
			}
			if !got.Equal(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			s.loadErr = nil
			wrote, err := tr.Persist(ctx, installation)
			if err != nil || wrote != tt.wantWrite {
				t.Fatalf("Persist = (%v, %v), want (%v, nil)", wrote, err, tt.wantWrite)
			}
		})
	}
}

func TestTrackerObserveKeepsNewest(t *testing.T) {
	t.Parallel()
	tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	newer := ratelimit.Reading{Limit: 5000, Remaining: 10, ResetAt: resetAt, ObservedAt: t0.Add(time.Second)}
	older := ratelimit.Reading{Limit: 5000, Remaining: 20, ResetAt: resetAt, ObservedAt: t0}
	tr.Observe(installation, newer)
	tr.Observe(installation, older)
	tr.Observe(installation, ratelimit.Reading{})
	if got, _ := tr.Latest(installation); !got.Equal(newer) {
		t.Fatalf("got %+v, want %+v", got, newer)
	}
}

// TestTrackerObserveKeepsAnExhaustionALateSuccessFollows: concurrent calls
// near the end of a budget: a 403 (remaining 0) answers first, a slower
// success (remaining 2, the same window) arrives after it. The budget only
// falls within a window, so the exhaustion stands (observed at the later
// arrival). Before, the last arrival won: the process, and every process it
// shared with, called GitHub again for a 403.
func TestTrackerObserveKeepsAnExhaustionALateSuccessFollows(t *testing.T) {
	t.Parallel()
	tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	tr.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0})
	tr.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 2, ResetAt: resetAt, ObservedAt: t0.Add(10 * time.Millisecond)})
	got, _ := tr.Latest(installation)
	// Dated the later answer (freshness), counted at its own.
	if want := (ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0.Add(10 * time.Millisecond), CountedAt: t0}); !got.Equal(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// A new window is a new budget, whatever was left in the old one.
	next := ratelimit.Reading{Limit: 5000, Remaining: 4999, ResetAt: resetAt.Add(time.Hour), ObservedAt: t0.Add(time.Second)}
	tr.Observe(installation, next)
	if got, _ := tr.Latest(installation); !got.Equal(next) {
		t.Fatalf("after the reset: got %+v, want %+v", got, next)
	}
}

// TestTrackerIgnoresALateAnswerOfTheWindowBefore: an answer GitHub gave
// in the window before (plenty left, the old reset) arrives after the
// exhaustion of the current window was observed (a slow call, or another
// process's older reading). A different reset decides by observation
// time, so the older answer never replaces the exhaustion: taken for
// newer, every claimer would call GitHub for a 403 until the reset.
func TestTrackerIgnoresALateAnswerOfTheWindowBefore(t *testing.T) {
	t.Parallel()
	now := resetAt.Add(5 * time.Minute) // in the window after resetAt
	tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return now })
	exhausted := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt.Add(time.Hour), ObservedAt: now}
	before := ratelimit.Reading{Limit: 5000, Remaining: 4000, ResetAt: resetAt, ObservedAt: resetAt.Add(-time.Second)}
	tr.Observe(installation, exhausted)
	tr.Observe(installation, before)
	if got, _ := tr.Latest(installation); !got.Equal(exhausted) {
		t.Fatalf("got %+v, want the exhaustion %+v kept", got, exhausted)
	}
	if ratelimit.Admits(before, exhausted) {
		t.Errorf("a shared item holding %+v admits the older %+v, want it refused", exhausted, before)
	}
}

// TestTrackerRefreshesAnExhaustionItLoadedOld: a process loads an exhausted
// shared reading shortly before it goes stale (Freshness), then, past it,
// learns the same exhaustion from GitHub. It writes it back: the shared
// item's age is its own observation's, not the time of the load. Before,
// the write-age rule counted from the load, nothing was written, and every
// process that trusts no stale item called GitHub once more to learn it.
func TestTrackerRefreshesAnExhaustionItLoadedOld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	now := t0
	tr := ratelimit.NewTracker(store, ratelimit.DefaultPersistRule(), func() time.Time { return now })
	reset := t0.Add(50 * time.Minute)
	store.items[installation] = ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: reset, ObservedAt: t0}

	now = t0.Add(ratelimit.Freshness - 10*time.Second)
	if _, err := tr.Current(ctx, installation); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(ratelimit.Freshness + time.Second)
	tr.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: reset, ObservedAt: now})
	wrote, err := tr.Persist(ctx, installation)
	if err != nil || !wrote {
		t.Fatalf("Persist: wrote %v, %v; want the fresh exhaustion written over the stale one", wrote, err)
	}
	if got := store.items[installation]; !got.ObservedAt.Equal(now) || !got.Exhausted(now) {
		t.Fatalf("shared reading %+v, want the exhaustion observed now", got)
	}
}

// TestTrackerKeepsAWindowsCountAcrossProcesses: process A shares the
// exhaustion GitHub answered it; process B's slower success of the same
// window, counted before it, answers 100 ms later. B's merge of the shared
// item keeps the exhaustion, B writes nothing over it, and B's write loop
// ends: before, the later observation replaced the exhaustion in the item
// and every process that read it made a call GitHub refused.
func TestTrackerKeepsAWindowsCountAcrossProcesses(t *testing.T) {
	t.Parallel()
	s := newFakeStore()
	ctx := context.Background()
	a := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	a.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0})
	if wrote, err := a.Persist(ctx, installation); err != nil || !wrote {
		t.Fatalf("A's exhaustion: wrote %v, %v", wrote, err)
	}
	b := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return t0.Add(time.Second) })
	b.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 2, ResetAt: resetAt, ObservedAt: t0.Add(100 * time.Millisecond)})
	if _, err := b.Persist(ctx, installation); err != nil {
		t.Fatal(err)
	}
	cur, err := b.Current(ctx, installation)
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Exhausted(t0.Add(time.Second)) {
		t.Errorf("B's reading after the shared one: %+v, want the exhaustion", cur)
	}
	if got := s.items[installation]; got.Remaining != 0 {
		t.Errorf("shared item %+v, want the exhaustion kept", got)
	}
	// Nothing new: B writes nothing more.
	saves := len(s.saves)
	if wrote, err := b.Persist(ctx, installation); err != nil || wrote || len(s.saves) != saves {
		t.Errorf("a second Persist with nothing new: wrote %v (%d saves, was %d), %v", wrote, len(s.saves), saves, err)
	}
}

// TestTrackerLimitRisesPastAReDatedCount: a count kept within a window is
// re-dated by later answers (its freshness), but a higher count GitHub
// counted more than Crossing after it is a limit that rose and replaces
// it. Before, the re-dated low count looked as new as every answer and
// nothing higher ever won until the window reset.
func TestTrackerLimitRisesPastAReDatedCount(t *testing.T) {
	t.Parallel()
	tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	tr.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 10, ResetAt: resetAt, ObservedAt: t0})
	for i := 1; i <= 30; i++ {
		// Answers a second apart, each a slow one counted earlier.
		tr.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 12, ResetAt: resetAt, ObservedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	got, _ := tr.Latest(installation)
	if got.Remaining != 10 || !got.ObservedAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("after answers counted before: %+v, want remaining 10 dated the last answer", got)
	}
	risen := ratelimit.Reading{Limit: 15000, Remaining: 9000, ResetAt: resetAt, ObservedAt: t0.Add(ratelimit.Crossing + time.Second)}
	tr.Observe(installation, risen)
	if got, _ := tr.Latest(installation); got.Remaining != 9000 || got.Limit != 15000 {
		t.Errorf("after a count %v after the kept one: %+v, want the risen limit's 9000", ratelimit.Crossing+time.Second, got)
	}
}
