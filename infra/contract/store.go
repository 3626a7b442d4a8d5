// Package contract holds the contract suites of the flows' ports: one
// suite per port, run against the in-memory implementation (infra/mem) and
// against the real adapter on the emulator (shared/store, shared/queue), so
// the fakes the flow tests use cannot drift from what runs on AWS.
//
// It is a test kit: nothing under functions/ or shared/ imports it outside
// their _test files.
package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// Store is the job store as the flows see it: the union of the ports of
// shared/claim, shared/webhook and shared/reclaim.
type Store interface {
	Core
	Shards() []string
	Stale(ctx context.Context, shard string, now time.Time, limit int32, cursor string) (job.Page, error)
	Postpone(ctx context.Context, read job.Record, until time.Time) (job.Record, error)
}

// Core is Store without the sweep's listing (Shards, Stale, Postpone), whose
// contract TestStoreSweep holds on its own: an adapter can be held to the
// rest while its cursor type is converted.
type Core interface {
	CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error)
	MarkDone(ctx context.Context, d job.Report, now time.Time) (job.State, error)
	Get(ctx context.Context, id int64) (job.Record, error)
	Acquire(ctx context.Context, id, version int64, owner string, until, now time.Time) (job.Lease, job.Record, error)
	Takeover(ctx context.Context, id, held int64, owner string, until, now time.Time) (job.Lease, job.Record, error)
	Release(ctx context.Context, l job.Lease, r job.Retry, now time.Time) error
	Finish(ctx context.Context, l job.Lease, o job.Outcome, now time.Time) error
	Move(ctx context.Context, l job.Lease, pool, scope string, now time.Time) error
	TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, reason string, now time.Time) (job.Record, error)
	Recheck(ctx context.Context, read job.Record, due time.Time, check job.Check, now time.Time) (job.Record, error)
	Swap(ctx context.Context, read job.Record, due time.Time, reason string, now time.Time) (job.Record, error)
	LoadRate(ctx context.Context, installationID int64) (ratelimit.Reading, error)
	SaveRate(ctx context.Context, installationID int64, r ratelimit.Reading) error
	SaveBlock(ctx context.Context, installationID int64, until time.Time, length time.Duration) error
	Requeue(ctx context.Context, q job.Requeue, now time.Time) (job.Record, error)
}

// T0 is the suite's "now".
var T0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Rec is a record of job id as the webhook would create it.
func Rec(id int64) job.Record {
	return job.Record{JobID: id, Repo: "octo/app", InstallationID: 42, Labels: []string{"self-hosted", "linux"}, Pool: "linux", RunID: 9}
}

// TestStore runs the whole store contract (TestStoreCore and
// TestStoreSweep) against the store open returns. Every subtest uses job
// ids of its own (from base up), so one table serves the whole suite; the
// store must use the default job.Timing. The sweep subtests look only at
// the ids they wrote (base must be a multiple of 8), so other tests may
// share the table.
func TestStore(t *testing.T, base int64, open func(t *testing.T) Store) {
	TestStoreCore(t, base, func(t *testing.T) Core { return open(t) })
	TestStoreSweep(t, base, open)
}

// helpers of one suite run over s.
type suite struct {
	ctx context.Context
	tm  job.Timing
	get func(t *testing.T, id int64) job.Record
}

func newSuite(s interface {
	Get(ctx context.Context, id int64) (job.Record, error)
}) suite {
	ctx := context.Background()
	return suite{ctx: ctx, tm: job.Timing{}.WithDefaults(), get: func(t *testing.T, id int64) job.Record {
		t.Helper()
		r, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("get %d: %v", id, err)
		}
		return r
	}}
}

// creator is what leased needs of a store.
type creator interface {
	CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error)
	Acquire(ctx context.Context, id, version int64, owner string, until, now time.Time) (job.Lease, job.Record, error)
}

// leased creates job j's record at T0 and takes its lease there, for
// owner, until T0 + 1 min: the start of most cases.
func leased(t *testing.T, s creator, j int64, owner string) job.Lease {
	t.Helper()
	_, err := s.CreateJob(context.Background(), Rec(j), T0)
	must(t, err)
	l, _, err := s.Acquire(context.Background(), j, 1, owner, T0.Add(time.Minute), T0)
	must(t, err)
	return l
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// conflict checks that err is a refusal carrying the current record.
func conflict(t *testing.T, what string, err error, wantState job.State, wantVersion int64) {
	t.Helper()
	if !errors.Is(err, job.ErrConflict) {
		t.Fatalf("%s: got %v, want ErrConflict", what, err)
	}
	cur, ok := job.CurrentOf(err)
	if !ok || cur.State != wantState || cur.Version != wantVersion {
		t.Fatalf("%s: conflict carries %+v (found %v), want the current record %s v%d", what, cur, ok, wantState, wantVersion)
	}
}

// oneWins runs write n times at once (i numbers the writer) and checks
// that exactly one succeeded and every other was refused (ErrConflict).
func oneWins(t *testing.T, what string, n int, write func(i int) error) {
	t.Helper()
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := write(i); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, job.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("%s: %v", what, err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || int(conflicts.Load()) != n-1 {
		t.Fatalf("%d concurrent %s: %d won, %d conflicted; want 1 and %d", n, what, wins.Load(), conflicts.Load(), n-1)
	}
}

// noRecord checks that err is a refusal for want of a record.
func noRecord(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, job.ErrConflict) {
		t.Fatalf("%s of an unknown job: got %v, want ErrConflict", what, err)
	}
	if _, found := job.CurrentOf(err); found {
		t.Fatalf("%s of an unknown job: the conflict carries a record", what)
	}
}

// TestStoreCore runs the contract of every method but the sweep's listing
// (see TestStore for base). Subtests named in pending are skipped, saying
// so: an adapter lists there what it does not meet yet, and the list is the
// to-do, visible in every run.
func TestStoreCore(t *testing.T, base int64, open func(t *testing.T) Core, pending ...string) {
	s := open(t)
	su := newSuite(s)
	ctx, tm, get := su.ctx, su.tm, su.get
	id := func(n int64) int64 { return base + n }
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			for _, p := range pending {
				if p == name {
					t.Skip("pending: this store does not meet this part of the contract yet")
				}
			}
			f(t)
		})
	}

	run("create once, the conflict carries the record", func(t *testing.T) {
		j := id(1)
		r, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		if r.State != job.Pending || r.Version != 1 || r.Attempt != 0 {
			t.Fatalf("created %s v%d attempt %d, want pending v1 attempt 0", r.State, r.Version, r.Attempt)
		}
		_, err = s.CreateJob(ctx, Rec(j), T0.Add(time.Hour))
		conflict(t, "second create", err, job.Pending, 1)
		got := get(t, j)
		if got.SweepShard != job.Shard(j, tm.Shards) || got.SweepAt != T0.Add(tm.PendingGrace).UnixMilli() {
			t.Errorf("sweep %q at %d, want %q at %d", got.SweepShard, got.SweepAt, job.Shard(j, tm.Shards), T0.Add(tm.PendingGrace).UnixMilli())
		}
		if got.ExpiresAt != T0.Add(tm.RecordTTL).Unix() {
			t.Errorf("expires_at %d, want creation + record TTL %d (the record is the dedup key)", got.ExpiresAt, T0.Add(tm.RecordTTL).Unix())
		}
		if got.Repo != "octo/app" || got.InstallationID != 42 || len(got.Labels) != 2 || got.Pool != "linux" || got.RunID != 9 {
			t.Errorf("identity not round-tripped: %+v", got)
		}
	})

	run("a record past its TTL counts as absent", func(t *testing.T) {
		j := id(2)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		late := T0.Add(tm.RecordTTL + time.Hour)
		r, err := s.CreateJob(ctx, Rec(j), late)
		if err != nil {
			t.Fatalf("create over an expired record: %v", err)
		}
		if r.CreatedAt != late.UnixMilli() || get(t, j).CreatedAt != late.UnixMilli() {
			t.Fatalf("created_at %d, want the new creation %d", get(t, j).CreatedAt, late.UnixMilli())
		}
	})

	run("get of an unknown job", func(t *testing.T) {
		if _, err := s.Get(ctx, id(3)); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})

	run("a done context writes nothing", func(t *testing.T) {
		j := id(23)
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.CreateJob(done, Rec(j), T0); !errors.Is(err, context.Canceled) {
			t.Fatalf("create with a done context: %v, want context.Canceled", err)
		}
		if _, err := s.Get(ctx, j); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("after a create with a done context: %v, want ErrNotFound", err)
		}
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		if _, err := s.MarkDone(done, job.Report{JobID: j}, T0); !errors.Is(err, context.Canceled) {
			t.Fatalf("done with a done context: %v, want context.Canceled", err)
		}
		if got := get(t, j); got.State != job.Pending {
			t.Fatalf("record %s after a done with a done context, want pending", got.State)
		}
	})

	run("lease fencing", func(t *testing.T) {
		j := id(4)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		until := T0.Add(3 * time.Minute)
		lease, got, err := s.Acquire(ctx, j, 1, "a", until, T0)
		must(t, err)
		if got.State != job.Claiming || got.Version != 2 || lease.Version != 2 || got.LeaseOwner != "a" || got.LeaseExpiresAt != until.UnixMilli() {
			t.Fatalf("after acquire: %+v lease %+v", got, lease)
		}
		_, _, err = s.Acquire(ctx, j, 1, "b", until, T0)
		conflict(t, "acquire of a leased record", err, job.Claiming, 2)

		thief := job.Lease{JobID: j, Owner: "b", Version: 2}
		if err := s.Release(ctx, thief, job.Retry{Version: 3, Due: T0}, T0); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("release by another owner: got %v, want ErrLeaseLost", err)
		}
		ff := T0.Add(time.Second)
		must(t, s.Release(ctx, lease, job.Retry{Version: 3, Attempt: 1, FirstFailureAt: ff, Due: T0.Add(30 * time.Second), ErrorClass: "server_side", Error: strings.Repeat("x", 5000)}, T0))
		got = get(t, j)
		if got.State != job.Queued || got.Version != 3 || got.Attempt != 1 || got.FirstFailureAt != ff.UnixMilli() || got.LeaseOwner != "" || got.LastErrorClass != "server_side" {
			t.Fatalf("after release: %+v", got)
		}
		if len(got.LastError) != 1024 {
			t.Errorf("error text kept %d bytes, want 1024", len(got.LastError))
		}
		if got.SweepAt != T0.Add(30*time.Second+tm.QueuedGrace).UnixMilli() {
			t.Errorf("sweep_at after release %d, want due + queued grace", got.SweepAt)
		}
		lease2, _, err := s.Acquire(ctx, j, 3, "c", T0.Add(4*time.Minute), T0)
		must(t, err)
		if err := s.Release(ctx, lease, job.Retry{Version: 5, Due: T0}, T0); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("stale lease after re-acquire: got %v, want ErrLeaseLost", err)
		}
		must(t, s.Finish(ctx, lease2, job.Outcome{State: job.Claimed, Attempt: 2, RunnerName: "linux-7", Scope: "org"}, T0))
		got = get(t, j)
		if got.State != job.Claimed || got.RunnerName != "linux-7" || got.Scope != "org" || got.FirstFailureAt != ff.UnixMilli() || got.Attempt != 2 {
			t.Fatalf("after finish: %+v", got)
		}
		if got.SweepShard != job.Shard(j, tm.Shards) || got.SweepAt != T0.Add(job.DefaultRunnerStartGrace).UnixMilli() || got.ExpiresAt != T0.Add(tm.RecordTTL).Unix() {
			t.Errorf("a claimed record stays in the sweep index until the runner-start grace (default) and keeps a TTL: %+v", got)
		}
		if err := s.Finish(ctx, lease2, job.Outcome{State: job.Claimed}, T0); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("finish twice: got %v, want ErrLeaseLost", err)
		}
	})

	run("finish and release move the record to the pool the claim resolved", func(t *testing.T) {
		// A claim whose recorded pool was renamed or relabelled claims in
		// the pool that serves the job now: its outcome moves the record
		// there (the reclaimer and the janitor name its runner after that
		// pool), and so does its retry (the next attempt claims there,
		// whatever RUNNER_POOLS says by then). Without a pool, either keeps
		// the record's.
		for _, c := range []struct {
			j              int64
			retry          bool
			pool, wantPool string
		}{{id(182), false, "linux-v2", "linux-v2"}, {id(183), false, "", "linux"},
			{id(184), true, "linux-v2", "linux-v2"}, {id(185), true, "", "linux"}} {
			l := leased(t, s, c.j, "a")
			want, name := job.Claimed, job.RunnerNameAt(c.wantPool, c.j, 0)
			if c.retry {
				want, name = job.Queued, ""
				must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: T0.Add(time.Minute), ErrorClass: "server_side", Error: "502",
					Pool: c.pool}, T0))
			} else {
				must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: name, Pool: c.pool}, T0))
			}
			if got := get(t, c.j); got.Pool != c.wantPool || got.State != want || got.RunnerName != name {
				t.Errorf("retry %v, pool %q: record %s in pool %q runner %q, want %s in pool %q runner %q",
					c.retry, c.pool, got.State, got.Pool, got.RunnerName, want, c.wantPool, name)
			}
		}
	})

	run("the repository as the webhook described it is kept through the claim's writes", func(t *testing.T) {
		// The claimer holds the recorded pool to the webhook's rule with
		// them (a pool that stopped allowing public repositories).
		j, k := id(187), id(188)
		r := Rec(j)
		r.Public, r.UserOwned = true, true
		_, err := s.CreateJob(ctx, r, T0)
		must(t, err)
		_, err = s.CreateJob(ctx, Rec(k), T0)
		must(t, err)
		l, _, err := s.Acquire(ctx, j, 1, "a", T0.Add(time.Minute), T0)
		must(t, err)
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: T0.Add(time.Minute), ErrorClass: "server_side", Error: "502"}, T0))
		if got := get(t, j); !got.Public || !got.UserOwned {
			t.Errorf("public %v, user-owned %v after a claim's retry; want both kept", got.Public, got.UserOwned)
		}
		if got := get(t, k); got.Public || got.UserOwned {
			t.Errorf("public %v, user-owned %v for a record created without them; want neither", got.Public, got.UserOwned)
		}
	})

	run("move records the pool and scope under the lease, and keeps the lease", func(t *testing.T) {
		// A claim that moves a job (its pool renamed or relabelled) writes
		// the new pool before it registers the runner there, so a claimer
		// that dies next leaves a record naming where its runner is.
		j := id(186)
		l := leased(t, s, j, "a")
		must(t, s.Move(ctx, l, "linux-v2", "org", T0.Add(time.Second)))
		got := get(t, j)
		if got.Pool != "linux-v2" || got.Scope != "org" || got.State != job.Claiming || got.Version != l.Version || got.LeaseOwner != "a" ||
			got.UpdatedAt != T0.Add(time.Second).UnixMilli() || len(got.History) != len(l.History) {
			t.Fatalf("after the move: %+v; want pool linux-v2 at org, still claiming v%d under a, history untouched", got, l.Version)
		}
		must(t, s.Move(ctx, l, "linux-v3", "", T0.Add(2*time.Second)))
		if got := get(t, j); got.Pool != "linux-v3" || got.Scope != "" {
			t.Errorf("moved again with no scope: pool %q scope %q, want linux-v3 and none", got.Pool, got.Scope)
		}
		if err := s.Move(ctx, l, "", "repo", T0); err == nil || errors.Is(err, job.ErrLeaseLost) {
			t.Errorf("move to no pool: %v, want an error naming it", err)
		}
		stale := l
		stale.Owner = "b"
		if err := s.Move(ctx, stale, "linux-v4", "repo", T0); !errors.Is(err, job.ErrLeaseLost) {
			t.Errorf("move under another owner: %v, want ErrLeaseLost", err)
		}
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: job.RunnerNameAt("linux-v3", j, 0)}, T0.Add(3*time.Second)))
		if got := get(t, j); got.State != job.Claimed || got.Pool != "linux-v3" {
			t.Errorf("finished after the move: %s in pool %q, want claimed in linux-v3", got.State, got.Pool)
		}
		if err := s.Move(ctx, l, "linux-v4", "repo", T0); !errors.Is(err, job.ErrLeaseLost) {
			t.Errorf("move after the finish: %v, want ErrLeaseLost", err)
		}
	})

	run("a retry records the runner name it tried and its scope; a deferral keeps them", func(t *testing.T) {
		// The next attempt under that name, its pool's scope changed since,
		// looks for the runner there before registering at the new scope.
		j := id(190)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		name := job.RunnerNameAt("linux", j, 0)
		l, _, err := s.Acquire(ctx, j, 1, "a", T0.Add(time.Minute), T0)
		must(t, err)
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: T0, ErrorClass: "server_side", Error: "502",
			Runner: name, Scope: "repo"}, T0))
		if got := get(t, j); got.TriedRunner != name || got.TriedScope != "repo" || got.Scope != "" || got.RunnerName != "" {
			t.Fatalf("after the retry: tried %q at %q, runner %q at %q; want tried %s at repo, no runner recorded",
				got.TriedRunner, got.TriedScope, got.RunnerName, got.Scope, name)
		}
		l, _, err = s.Acquire(ctx, j, 3, "b", T0.Add(time.Minute), T0)
		must(t, err)
		must(t, s.Release(ctx, l, job.Retry{Version: 5, Attempt: 1, Due: T0, ErrorClass: "rate_limit", Error: "deferred"}, T0))
		if got := get(t, j); got.TriedRunner != name || got.TriedScope != "repo" {
			t.Errorf("after a deferral: tried %q at %q, want %s at repo kept", got.TriedRunner, got.TriedScope, name)
		}
	})

	run("acquire at a stale version of a queued record", func(t *testing.T) {
		j := id(5)
		l := leased(t, s, j, "a")
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: T0}, T0))
		_, _, err := s.Acquire(ctx, j, 1, "b", T0.Add(time.Minute), T0)
		conflict(t, "old message", err, job.Queued, 3)
	})

	run("error text is cut on a character, not inside one", func(t *testing.T) {
		j := id(180)
		l := leased(t, s, j, "a")
		// A GitHub or AWS message with non-ASCII text around the cut.
		msg := strings.Repeat("a", job.MaxError-1) + "é: runner group “linux” not found"
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: T0.Add(time.Minute), ErrorClass: "server_side", Error: msg}, T0))
		if got := get(t, j).LastError; got != strings.Repeat("a", job.MaxError-1) {
			t.Errorf("last_error %d bytes ending %q, want the %d bytes before the 'é' it would split", len(got), got[max(0, len(got)-4):], job.MaxError-1)
		}
	})

	run("text is stored as valid UTF-8, a stray byte as U+FFFD", func(t *testing.T) {
		// The SDK sends strings as JSON, which turns each byte that is not
		// UTF-8 into U+FFFD (one per byte, as encoding/json: a run of two
		// is two): the table never holds the byte. The lease owner's too,
		// in the write and in its fence alike.
		j := id(308)
		r := Rec(j)
		r.Repo, r.Labels, r.Pool = "octo/\xff\xfeapp", []string{"self-hosted", "x\xfe"}, "linux\xff"
		_, err := s.CreateJob(ctx, r, T0)
		must(t, err)
		l, leasedRec, err := s.Acquire(ctx, j, 1, "claimer\xff", T0.Add(time.Minute), T0)
		must(t, err)
		if leasedRec.LeaseOwner != "claimer\uFFFD" {
			t.Errorf("leased to %q, want the owner's stray byte as U+FFFD", leasedRec.LeaseOwner)
		}
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "runner\xff"}, T0))
		got := get(t, j)
		if got.Repo != "octo/\uFFFD\uFFFDapp" || !slices.Equal(got.Labels, []string{"self-hosted", "x\uFFFD"}) || got.Pool != "linux\uFFFD" || got.RunnerName != "runner\uFFFD" {
			t.Fatalf("stored %q %q %q runner %q, want each stray byte as U+FFFD", got.Repo, got.Labels, got.Pool, got.RunnerName)
		}
	})

	run("a returned record is the caller's copy", func(t *testing.T) {
		// DynamoDB answers with a fresh item each time: changing what a
		// call returned changes nothing stored.
		j := id(310)
		spoil := func(r *job.Record) {
			if len(r.Labels) > 0 {
				r.Labels[0] = "spoilt"
			}
			if len(r.History) > 0 {
				r.History[0].To = "spoilt"
			}
		}
		in := Rec(j)
		created, err := s.CreateJob(ctx, in, T0)
		must(t, err)
		in.Labels[0] = "spoilt" // the caller's own slice, after the call
		spoil(&created)
		r := get(t, j)
		spoil(&r)
		_, err = s.CreateJob(ctx, Rec(j), T0)
		if cur, ok := job.CurrentOf(err); ok {
			spoil(&cur)
		}
		l, leasedRec, err := s.Acquire(ctx, j, 1, "a", T0.Add(time.Minute), T0)
		must(t, err)
		spoil(&leasedRec)
		if len(l.History) > 0 {
			l.History[0].To = "spoilt"
		}
		got := get(t, j)
		if !slices.Equal(got.Labels, Rec(j).Labels) || len(got.History) != 2 || got.History[0].To != job.Pending {
			t.Fatalf("stored labels %q, history %+v; want them as written, whatever the caller did to its copies", got.Labels, got.History)
		}
	})

	run("acquire of an unknown job", func(t *testing.T) {
		_, _, err := s.Acquire(ctx, id(6), 1, "a", T0.Add(time.Minute), T0)
		noRecord(t, "acquire", err)
	})

	run("same owner, older lease", func(t *testing.T) {
		j := id(7)
		old := leased(t, s, j, "a")
		must(t, s.Release(ctx, old, job.Retry{Version: 3, Attempt: 1, Due: T0}, T0))
		_, _, err := s.Acquire(ctx, j, 3, "a", T0.Add(time.Minute), T0)
		must(t, err)
		if err := s.Finish(ctx, old, job.Outcome{State: job.Claimed, Attempt: 1}, T0); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("finish under the older lease: got %v, want ErrLeaseLost", err)
		}
		if got := get(t, j); got.State != job.Claiming || got.Version != 4 {
			t.Fatalf("record %s v%d, want claiming v4", got.State, got.Version)
		}
	})

	run("a retried acquire that took effect is the caller's lease", func(t *testing.T) {
		j := id(9)
		leased(t, s, j, "me")
		lease, got, err := s.Acquire(ctx, j, 1, "me", T0.Add(time.Minute), T0)
		if err != nil || lease.Version != 2 || got.State != job.Claiming || got.Version != 2 {
			t.Fatalf("got %+v %+v %v, want our lease at v2", lease, got, err)
		}
	})

	run("mark done", func(t *testing.T) {
		j := id(10)
		prev, err := s.MarkDone(ctx, job.Report{JobID: j, Repo: "octo/app", InstallationID: 42, RunnerName: "r1", Labels: []string{"linux"}, Pool: "linux"}, T0)
		if err != nil || prev != "" {
			t.Fatalf("out of order: got %q, %v; want created", prev, err)
		}
		_, err = s.CreateJob(ctx, Rec(j), T0)
		conflict(t, "a late queued", err, job.Done, 1)
		if got := get(t, j); got.State != job.Done || got.RunnerName != "r1" || got.SweepShard != "" || got.Repo != "octo/app" || got.Pool != "linux" || got.ExpiresAt == 0 {
			t.Fatalf("created done: %+v", got)
		}

		k := id(11)
		lease := leased(t, s, k, "a")
		prev, err = s.MarkDone(ctx, job.Report{JobID: k, Pool: "other"}, T0)
		if err != nil || prev != job.Claiming {
			t.Fatalf("done while claiming: got %q, %v", prev, err)
		}
		if err := s.Finish(ctx, lease, job.Outcome{State: job.Claimed}, T0); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("finish after done: got %v, want ErrLeaseLost", err)
		}
		if got := get(t, k); got.State != job.Done || got.Version != 3 || got.LeaseOwner != "" || got.SweepAt != 0 {
			t.Fatalf("after done: %+v", got)
		}
		if got := get(t, k); got.Pool != "linux" {
			t.Errorf("pool %q after done, want the record's own %q kept (the report's is recorded only on creation)", got.Pool, "linux")
		}
		if prev, err := s.MarkDone(ctx, job.Report{JobID: k}, T0); !errors.Is(err, job.ErrTerminal) || prev != job.Claiming {
			t.Fatalf("done twice: got %q, %v; want ErrTerminal with the state before the first done (claiming)", prev, err)
		}
	})

	run("mark done fills only what the record lacks", func(t *testing.T) {
		// shared/store writes the report's identity with if_not_exists:
		// a record created without it (an empty attribute is not
		// written) gets it from the report, one that has it keeps its own.
		j, k := id(302), id(303)
		rep := func(id int64) job.Report {
			return job.Report{JobID: id, Repo: "octo/other", InstallationID: 7, RunID: 8, Labels: []string{"gpu"}, Pool: "gpu"}
		}
		_, err := s.CreateJob(ctx, job.Record{JobID: j}, T0)
		must(t, err)
		_, err = s.CreateJob(ctx, Rec(k), T0)
		must(t, err)
		for _, id := range []int64{j, k} {
			if _, err := s.MarkDone(ctx, rep(id), T0.Add(time.Second)); err != nil {
				t.Fatalf("mark job %d done: %v", id, err)
			}
		}
		if got := get(t, j); got.Repo != "octo/other" || got.InstallationID != 7 || got.RunID != 8 || !slices.Equal(got.Labels, []string{"gpu"}) || got.Pool != "gpu" {
			t.Errorf("done over a record without identity: %+v, want the report's", got)
		}
		if got, want := get(t, k), Rec(k); got.Repo != want.Repo || got.InstallationID != want.InstallationID || got.RunID != want.RunID ||
			!slices.Equal(got.Labels, want.Labels) || got.Pool != want.Pool {
			t.Errorf("done over a whole record: %+v, want its own identity %+v", got, want)
		}
		// Created done: every time the record reads back is the report's
		// instant (due_at, like updated_at, is created_at when not written).
		n := id(304)
		_, err = s.MarkDone(ctx, rep(n), T0)
		must(t, err)
		if got, ms := get(t, n), T0.UnixMilli(); got.CreatedAt != ms || got.UpdatedAt != ms || got.DueAt != ms {
			t.Errorf("created done: created %d, updated %d, due %d; want %d for each", got.CreatedAt, got.UpdatedAt, got.DueAt, ms)
		}
	})

	run("a write past DynamoDB's 400 KB item limit is refused and changes nothing", func(t *testing.T) {
		huge := strings.Repeat("r", 410*1024) // past the limit however the size is counted
		c, d, l := id(305), id(306), id(307)
		r := Rec(c)
		r.RunnerName = huge
		if _, err := s.CreateJob(ctx, r, T0); err == nil {
			t.Fatal("create of an item over 400 KB: no error, want DynamoDB's refusal")
		}
		if _, err := s.Get(ctx, c); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("after the refused create: %v, want ErrNotFound", err)
		}
		if _, err := s.MarkDone(ctx, job.Report{JobID: d, RunnerName: huge}, T0); err == nil {
			t.Fatal("done creating an item over 400 KB: no error, want DynamoDB's refusal")
		}
		if _, err := s.Get(ctx, d); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("after the refused done of an unknown job: %v, want ErrNotFound", err)
		}
		lease := leased(t, s, l, "a")
		before := get(t, l)
		if _, err := s.MarkDone(ctx, job.Report{JobID: l, RunnerName: huge}, T0.Add(time.Second)); err == nil {
			t.Fatal("done growing an item past 400 KB: no error, want DynamoDB's refusal")
		}
		if err := s.Finish(ctx, lease, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: huge}, T0.Add(time.Second)); err == nil || errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("finish growing an item past 400 KB: %v, want DynamoDB's refusal", err)
		}
		if got := get(t, l); got.State != before.State || got.Version != before.Version || got.RunnerName != "" ||
			got.UpdatedAt != before.UpdatedAt || len(got.History) != len(before.History) {
			t.Fatalf("after the refused writes: %s v%d runner %d bytes, updated %d, %d history entries; want %s v%d as before",
				got.State, got.Version, len(got.RunnerName), got.UpdatedAt, len(got.History), before.State, before.Version)
		}
		must(t, s.Finish(ctx, lease, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "r1"}, T0.Add(time.Second)))
	})

	run("mark done only a recorded job: none, nothing written", func(t *testing.T) {
		// The webhook's report of a job the pools refuse now, naming a
		// runner of ours: only a job we recorded can have one.
		j, k := id(191), id(192)
		if prev, err := s.MarkDone(ctx, job.Report{JobID: j, Repo: "octo/app", RunnerName: "linux-1", Pool: "linux", Recorded: true}, T0); !errors.Is(err, job.ErrNotFound) || prev != "" {
			t.Fatalf("no record: got %q, %v; want ErrNotFound", prev, err)
		}
		if _, err := s.Get(ctx, j); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("after the refused report: %v, want still no record", err)
		}
		leased(t, s, k, "a")
		prev, err := s.MarkDone(ctx, job.Report{JobID: k, RunnerName: "linux-2", Recorded: true}, T0)
		if err != nil || prev != job.Claiming {
			t.Fatalf("recorded: got %q, %v; want done from claiming", prev, err)
		}
		if prev, err := s.MarkDone(ctx, job.Report{JobID: k, Recorded: true}, T0); !errors.Is(err, job.ErrTerminal) || prev != job.Claiming {
			t.Fatalf("done twice: got %q, %v; want ErrTerminal with the state before the first done", prev, err)
		}
	})

	run("take back", func(t *testing.T) {
		j := id(12)
		leased(t, s, j, "dead")
		read := get(t, j)
		_, err := s.TakeBack(ctx, read, job.Queued, T0, "", T0.Add(30*time.Second))
		conflict(t, "a live lease", err, job.Claiming, 2)

		later := T0.Add(2 * time.Minute)
		oneWins(t, "take-backs", 5, func(int) error {
			_, err := s.TakeBack(ctx, read, job.Queued, later.Add(time.Second), "lease expired", later)
			return err
		})
		got := get(t, j)
		if got.State != job.Queued || got.Version != 3 || got.DueAt != later.Add(time.Second).UnixMilli() || got.LeaseOwner != "" || got.FirstFailureAt != later.UnixMilli() {
			t.Fatalf("after take-back: %+v (an expired lease starts the max-age clock)", got)
		}
		if err := s.Finish(ctx, job.Lease{JobID: j, Owner: "dead", Version: 2}, job.Outcome{State: job.Claimed}, later); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("late claimer: got %v, want ErrLeaseLost", err)
		}
		ab, err := s.TakeBack(ctx, got, job.Abandoned, time.Time{}, "max age", later)
		must(t, err)
		if got := get(t, j); ab.Version != 4 || got.State != job.Abandoned || got.SweepAt != 0 || got.SweepShard != "" || got.LastError != "max age" || got.ExpiresAt == 0 {
			t.Fatalf("after abandon (v%d): %+v", ab.Version, got)
		}
		if fmt.Sprint(ab) != fmt.Sprint(get(t, j)) {
			t.Errorf("take back returned %+v, want the record as written %+v", ab, get(t, j))
		}
		if _, err := s.TakeBack(ctx, read, job.Done, time.Time{}, "", later); err == nil || errors.Is(err, job.ErrConflict) {
			t.Fatalf("take back to done: got %v, want a refusal that is no conflict", err)
		}
	})

	// claimed leases job j and finishes it claimed with grace at T0.
	claimed := func(t *testing.T, j int64, grace time.Duration) job.Record {
		t.Helper()
		l := leased(t, s, j, "a")
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-x", RunnerStartGrace: grace}, T0))
		return get(t, j)
	}

	run("claimed stays in the sweep with the caller's runner-start grace", func(t *testing.T) {
		j := id(17)
		got := claimed(t, j, 25*time.Minute)
		if got.State != job.Claimed || got.Version != 2 || got.SweepShard != job.Shard(j, tm.Shards) ||
			got.SweepAt != T0.Add(25*time.Minute).UnixMilli() || got.LeaseOwner != "" || got.LeaseExpiresAt != 0 {
			t.Fatalf("claimed: %+v, want claimed v2 in shard %s with sweep_at = finish + 25m and no lease", got, job.Shard(j, tm.Shards))
		}
	})

	run("done from claimed leaves the sweep", func(t *testing.T) {
		j := id(18)
		claimed(t, j, 0)
		prev, err := s.MarkDone(ctx, job.Report{JobID: j, RunnerName: "linux-x"}, T0.Add(time.Minute))
		if err != nil || prev != job.Claimed {
			t.Fatalf("done from claimed: got %q, %v, want claimed, nil", prev, err)
		}
		if got := get(t, j); got.State != job.Done || got.Version != 3 || got.SweepShard != "" || got.SweepAt != 0 {
			t.Fatalf("after done: %+v, want done v3 out of the sweep", got)
		}
	})

	run("a swap: a new attempt counted toward nothing", func(t *testing.T) {
		j := id(181)
		read := claimed(t, j, 0)
		now := T0.Add(11 * time.Minute)
		got, err := s.Swap(ctx, read, now, "webhook: runner taken by job 7", now)
		must(t, err)
		if got.State != job.Queued || got.Version != read.Version+1 || got.Replacements != 1 || got.ReplacementsBase != 1 ||
			got.FirstFailureAt != 0 || got.DueAt != now.UnixMilli() || got.SweepAt != now.Add(tm.QueuedGrace).UnixMilli() {
			t.Fatalf("swap: %+v, want queued v%d, replacements 1 and its base 1 (not counted), no max-age clock, due now", got, read.Version+1)
		}
		if h := got.History[len(got.History)-1]; h.To != job.Queued || h.Actor != job.ActorWebhook {
			t.Errorf("swap's history entry %+v, want to queued by the webhook", h)
		}
		_, err = s.Swap(ctx, read, now, "again", now)
		conflict(t, "a second swap from the same read", err, job.Queued, read.Version+1)
		if _, err := s.Swap(ctx, got, now, "not claimed", now); err == nil || errors.Is(err, job.ErrConflict) {
			t.Fatalf("swap of a queued record: %v, want a refusal that is no conflict", err)
		}
	})

	run("a new attempt for a claimed record", func(t *testing.T) {
		j := id(19)
		read := claimed(t, j, 0)
		now := T0.Add(11 * time.Minute)
		due := now.Add(3 * time.Second)
		got, err := s.TakeBack(ctx, read, job.Queued, due, "runner_lost", now)
		must(t, err)
		if got.State != job.Queued || got.Version != 3 || got.Attempt != 1 || got.Replacements != 1 || got.LivenessChecks != 0 ||
			got.FirstFailureAt != now.UnixMilli() || got.DueAt != due.UnixMilli() || got.SweepAt != due.Add(tm.QueuedGrace).UnixMilli() {
			t.Fatalf("new attempt: %+v, want queued v3, attempt 1 (the claimer counts the next), replacements 1, first failure now, due %d", got, due.UnixMilli())
		}
		_, err = s.TakeBack(ctx, read, job.Queued, due, "runner_lost", now)
		conflict(t, "a second new attempt from the same read", err, job.Queued, 3)
		// Claimed again, then replaced again: the replacements add up and
		// the first failure stays the first.
		l, _, err := s.Acquire(ctx, j, 3, "b", now.Add(time.Minute), now)
		must(t, err)
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 2}, now))
		again := get(t, j)
		later := now.Add(20 * time.Minute)
		got, err = s.TakeBack(ctx, again, job.Queued, later, "runner_taken", later)
		must(t, err)
		if got.Replacements != 2 || got.Attempt != 2 || got.FirstFailureAt != now.UnixMilli() {
			t.Fatalf("second new attempt: %+v, want replacements 2, attempt 2, first failure kept", got)
		}
	})

	run("an operator's requeue of a job abandoned while it waited starts without its waits", func(t *testing.T) {
		j := id(64)
		now := T0.Add(11 * time.Minute)
		waited, err := s.Recheck(ctx, claimed(t, j, 0), now.Add(10*time.Minute), job.CheckWaiting, now)
		must(t, err)
		abandoned, err := s.TakeBack(ctx, waited, job.Abandoned, now, "reclaimer: its runner cannot be checked", now)
		must(t, err)
		if abandoned.Waits != 1 {
			t.Fatalf("abandoned while waiting: %+v, want its wait kept for the operator to see", abandoned)
		}
		got, err := s.Requeue(ctx, job.Requeue{Read: abandoned, By: "alice", Due: now}, now)
		must(t, err)
		if got.Waits != 0 || get(t, j).Waits != 0 {
			t.Fatalf("after requeue: %d waits, want 0: the retried job's first look would ask GitHub for its status alone, at a parked job's interval", got.Waits)
		}
	})

	run("an operator's requeue gives the replacement cap and the idle checks back", func(t *testing.T) {
		j := id(22)
		now := T0.Add(11 * time.Minute)
		taken, err := s.TakeBack(ctx, claimed(t, j, 0), job.Queued, now, "runner_lost", now)
		must(t, err)
		l, _, err := s.Acquire(ctx, j, taken.Version, "b", now.Add(time.Minute), now)
		must(t, err)
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 2}, now))
		checked, err := s.Recheck(ctx, get(t, j), now.Add(10*time.Minute), job.CheckIdle, now)
		must(t, err)
		capped, err := s.TakeBack(ctx, checked, job.Abandoned, now, "runner_lost after 1 replacements (cap 1)", now)
		must(t, err)
		if capped.Replacements != 1 || capped.LivenessChecks != 1 || job.Replaceable(capped, now, 1, 24*time.Hour) {
			t.Fatalf("abandoned at the cap: %+v, want replacements 1, liveness checks 1, not replaceable", capped)
		}
		got, err := s.Requeue(ctx, job.Requeue{Read: capped, By: "alice", Due: now}, now)
		must(t, err)
		// The retry is a new attempt under a name of its own: the last
		// attempt's runner may be at work on another job, and a claim
		// under its name would take that busy runner for its own.
		if got.Replacements != 2 || got.ReplacementsBase != 2 || got.LivenessChecks != 0 || !job.Replaceable(got, now, 1, 24*time.Hour) {
			t.Fatalf("after requeue: %+v, want replacements 2 (a fresh runner name), base 2, liveness checks 0: replaceable again", got)
		}
		if fmt.Sprint(got) != fmt.Sprint(get(t, j)) {
			t.Errorf("requeue returned %+v, want the record as written %+v", got, get(t, j))
		}
	})

	run("recheck of a claimed record", func(t *testing.T) {
		j := id(20)
		read := claimed(t, j, 0)
		now := T0.Add(11 * time.Minute)
		got, err := s.Recheck(ctx, read, now.Add(10*time.Minute), job.CheckIdle, now)
		must(t, err)
		if got.State != job.Claimed || got.Version != read.Version || got.LivenessChecks != 1 || got.SweepAt != now.Add(10*time.Minute).UnixMilli() ||
			got.SweepShard != job.Shard(j, tm.Shards) {
			t.Fatalf("counted recheck: %+v, want claimed v%d, 1 check, sweep_at pushed", got, read.Version)
		}
		// The same read counted again (a retried request whose first
		// answer was lost, or two passes of one read) is one check.
		got, err = s.Recheck(ctx, read, now.Add(10*time.Minute), job.CheckIdle, now)
		must(t, err)
		if got.LivenessChecks != 1 {
			t.Fatalf("a read counted twice: %d checks, want 1", got.LivenessChecks)
		}
		got, err = s.Recheck(ctx, read, now.Add(20*time.Minute), job.CheckSkipped, now)
		must(t, err)
		if got.LivenessChecks != 1 || got.SweepAt != now.Add(20*time.Minute).UnixMilli() || got.FirstFailureAt != 0 {
			t.Fatalf("uncounted recheck: %+v, want 1 check still, sweep_at pushed again, no failure", got)
		}
		// A check that cannot be made (the pool gone, GitHub refusing for
		// good) starts the max-age clock once; a later one keeps it.
		got, err = s.Recheck(ctx, read, now.Add(30*time.Minute), job.CheckBlocked, now)
		must(t, err)
		if got.LivenessChecks != 1 || got.FirstFailureAt != now.UnixMilli() || got.SweepAt != now.Add(30*time.Minute).UnixMilli() {
			t.Fatalf("blocked recheck: %+v, want first_failure_at now, the count kept", got)
		}
		later := now.Add(time.Hour)
		got, err = s.Recheck(ctx, read, later.Add(10*time.Minute), job.CheckBlocked, later)
		must(t, err)
		if got.FirstFailureAt != now.UnixMilli() {
			t.Fatalf("blocked again: first_failure_at %d, want the first block's %d kept", got.FirstFailureAt, now.UnixMilli())
		}
		// A later read counts on.
		got, err = s.Recheck(ctx, get(t, j), now.Add(30*time.Minute), job.CheckIdle, now)
		must(t, err)
		if got.LivenessChecks != 2 {
			t.Fatalf("a second read's check: %d checks, want 2", got.LivenessChecks)
		}
		// GitHub holds the job (waiting for approval): its wait is no
		// failure of ours: the max-age clock stops, the checks start over.
		got, err = s.Recheck(ctx, got, now.Add(40*time.Minute), job.CheckWaiting, now)
		must(t, err)
		if got.FirstFailureAt != 0 || got.LivenessChecks != 0 || got.SweepAt != now.Add(40*time.Minute).UnixMilli() || got.State != job.Claimed ||
			got.Waits != 1 {
			t.Fatalf("waiting recheck: %+v, want no first_failure_at, 0 checks, 1 wait, sweep_at pushed, still claimed", got)
		}
		// The waits count per read, as the checks; a timed wait keeps a
		// clock, and an uncounted look keeps the waits.
		// GitHub may hold a job for 30 days: each held look renews the
		// record's TTL (7 days from its creation otherwise).
		held := T0.Add(tm.RecordTTL - time.Hour)
		got, err = s.Recheck(ctx, got, held.Add(time.Hour), job.CheckWaiting, held)
		must(t, err)
		if got.ExpiresAt != held.Add(tm.RecordTTL).Unix() || got.Waits != 2 {
			t.Fatalf("held look a week in: expires_at %d, waits %d; want %d (renewed), 2", got.ExpiresAt, got.Waits, held.Add(tm.RecordTTL).Unix())
		}
		// A held look counts once per read: the same read written again
		// (a retried request whose first answer was lost) finds the next
		// look moved and is refused, as is one whose next look the webhook
		// brought to now since the read (the approval's queued).
		waited := got
		_, err = s.Recheck(ctx, waited, now.Add(40*time.Minute), job.CheckWaiting, now)
		must(t, err)
		_, err = s.Recheck(ctx, waited, now.Add(40*time.Minute), job.CheckWaiting, now)
		conflict(t, "a held look written twice", err, job.Claimed, read.Version)
		if got := get(t, j); got.Waits != 3 {
			t.Fatalf("a read's wait counted twice: %d waits, want 3", got.Waits)
		}
		looked := get(t, j)
		_, err = s.Recheck(ctx, looked, now, job.CheckSkipped, now) // the webhook's wake
		must(t, err)
		_, err = s.Recheck(ctx, looked, now.Add(time.Hour), job.CheckWaiting, now)
		conflict(t, "a held look after a wake", err, job.Claimed, read.Version)
		if got := get(t, j); got.SweepAt != now.UnixMilli() || got.Waits != 3 {
			t.Fatalf("after the wake and a held look of the older read: sweep_at %d, waits %d; want the wake's %d kept, 3 waits", got.SweepAt, got.Waits, now.UnixMilli())
		}
		got, err = s.Recheck(ctx, get(t, j), now.Add(45*time.Minute), job.CheckBlocked, now)
		must(t, err)
		if got.Waits != 0 || got.FirstFailureAt != now.UnixMilli() {
			t.Fatalf("blocked look after two waits: %+v, want the waits gone, a clock started", got)
		}
		got, err = s.Recheck(ctx, got, now.Add(47*time.Minute), job.CheckIdle, now)
		must(t, err)
		got, err = s.Recheck(ctx, got, now.Add(50*time.Minute), job.CheckWaitingTimed, now)
		must(t, err)
		if got.Waits != 1 || got.FirstFailureAt != now.UnixMilli() || got.LivenessChecks != 1 {
			t.Fatalf("timed waiting recheck: %+v, want 1 wait, first_failure_at and the idle check kept", got)
		}
		got, err = s.Recheck(ctx, got, now.Add(55*time.Minute), job.CheckSkipped, now)
		must(t, err)
		if got.Waits != 1 {
			t.Fatalf("uncounted look at a waiting record: %d waits, want 1 kept", got.Waits)
		}
		got, err = s.Recheck(ctx, got, now.Add(30*time.Minute), job.CheckIdle, now)
		must(t, err)
		if got.Waits != 0 || got.LivenessChecks != 2 {
			t.Fatalf("idle look after the waits: %+v, want the waits gone, 2 checks", got)
		}
		got, err = s.Recheck(ctx, got, now.Add(30*time.Minute), job.CheckWaiting, now)
		must(t, err)
		// A new attempt resets the checks and the waits; the old read is
		// then refused.
		_, err = s.TakeBack(ctx, got, job.Queued, now, "runner_lost", now)
		must(t, err)
		if got := get(t, j); got.LivenessChecks != 0 || got.Waits != 0 {
			t.Fatalf("checks %d, waits %d after a new attempt, want 0", got.LivenessChecks, got.Waits)
		}
		_, err = s.Recheck(ctx, read, now, job.CheckIdle, now)
		conflict(t, "recheck after the record moved on", err, job.Queued, read.Version+1)
		if _, err := s.Recheck(ctx, get(t, j), now, job.CheckIdle, now); err == nil || errors.Is(err, job.ErrConflict) {
			t.Fatalf("recheck of a queued read: got %v, want a usage error", err)
		}
	})

	run("claimed record abandoned", func(t *testing.T) {
		j := id(21)
		read := claimed(t, j, 0)
		now := T0.Add(2 * time.Hour)
		got, err := s.TakeBack(ctx, read, job.Abandoned, time.Time{}, "replacement cap", now)
		must(t, err)
		if got.State != job.Abandoned || got.Version != 3 || got.SweepShard != "" || got.SweepAt != 0 || got.LastError != "replacement cap" {
			t.Fatalf("abandoned from claimed: %+v", got)
		}
		if _, err := s.MarkDone(ctx, job.Report{JobID: j}, now); !errors.Is(err, job.ErrTerminal) {
			t.Fatalf("done after abandoned: got %v, want ErrTerminal", err)
		}
	})

	// retried creates job j, fails its first lease (released at v3 with
	// attempt and first failure ff, a 502) and leases it again to owner
	// at T0+1m until T0+2m: claiming v4.
	retried := func(t *testing.T, j int64, attempt int, ff time.Time, owner string) job.Lease {
		t.Helper()
		l := leased(t, s, j, "a")
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: attempt, FirstFailureAt: ff, Due: T0, ErrorClass: "server_side", Error: "502"}, T0))
		l, _, err := s.Acquire(ctx, j, 3, owner, T0.Add(2*time.Minute), T0.Add(time.Minute))
		must(t, err)
		return l
	}

	run("operator requeue", func(t *testing.T) {
		j := id(13)
		ff := T0.Add(time.Second)
		l := retried(t, j, 2, ff, "b")
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Failed, Attempt: 3, Scope: "repo", ErrorClass: "non_retryable", Error: "404"}, T0.Add(time.Minute)))
		failed := get(t, j)
		if failed.Scope != "repo" {
			t.Errorf("failed record's scope %q, want the attempt's (repo)", failed.Scope)
		}

		now, due := T0.Add(time.Hour), T0.Add(time.Hour+time.Second)
		stale := failed
		stale.Version--
		_, err := s.Requeue(ctx, job.Requeue{Read: stale, By: "alice", Due: due}, now)
		conflict(t, "requeue of a stale read", err, job.Failed, failed.Version)

		got, err := s.Requeue(ctx, job.Requeue{Read: failed, By: "alice", Due: due}, now)
		must(t, err)
		if got.Scope != "repo" || get(t, j).Scope != "repo" {
			t.Errorf("requeued record's scope %q, want the last attempt's kept (its runner is released there)", get(t, j).Scope)
		}
		want := job.Transition{At: now.UnixMilli(), From: job.Failed, To: job.Queued, Attempt: 0, Error: "retried by operator alice", Actor: job.ActorOperator}
		if got.State != job.Queued || got.Version != failed.Version+1 || got.Attempt != 0 || got.FirstFailureAt != 0 ||
			got.LastError != "retried by operator alice" || got.LastErrorClass != "" || got.DueAt != due.UnixMilli() {
			t.Fatalf("after requeue: %+v, want queued v%d, attempt 0, no first failure, the operator's note", got, failed.Version+1)
		}
		if got.SweepShard != job.Shard(j, tm.Shards) || got.SweepAt != due.Add(tm.QueuedGrace).UnixMilli() || got.ExpiresAt != now.Add(tm.RecordTTL).Unix() {
			t.Errorf("a requeued record is back in the sweep index with a renewed TTL: %+v", got)
		}
		if n := len(got.History); n != len(failed.History)+1 || got.History[n-1] != want.Compact() {
			t.Errorf("history %+v, want the read's %d entries and then %+v", got.History, len(failed.History), want.Compact())
		}
		if fmt.Sprint(got) != fmt.Sprint(get(t, j)) {
			t.Errorf("requeue returned %+v, want the record as written %+v", got, get(t, j))
		}
		_, err = s.Requeue(ctx, job.Requeue{Read: failed, By: "bob", Due: due}, now)
		conflict(t, "a second requeue of the same read", err, job.Queued, failed.Version+1)
		if _, _, err := s.Acquire(ctx, j, failed.Version+1, "c", now.Add(time.Minute), now); err != nil {
			t.Fatalf("a claimer takes the requeued job at its new version: %v", err)
		}

		if _, err := s.Requeue(ctx, job.Requeue{Read: get(t, j), By: "alice", Due: due}, now); err == nil || errors.Is(err, job.ErrConflict) {
			t.Fatalf("requeue of a claiming job: got %v, want a refusal that is no conflict", err)
		}
		missing := Rec(id(14))
		missing.State, missing.Version = job.Abandoned, 2
		_, err = s.Requeue(ctx, job.Requeue{Read: missing, By: "alice", Due: due}, now)
		if _, found := job.CurrentOf(err); !errors.Is(err, job.ErrConflict) || found {
			t.Fatalf("requeue of no record: got %v (found %v), want a conflict carrying none", err, found)
		}
	})

	run("history records every transition", func(t *testing.T) {
		j := id(201)
		at := func(m int) time.Time { return T0.Add(time.Duration(m) * time.Minute) }
		_, err := s.CreateJob(ctx, Rec(j), at(0))
		must(t, err)
		l, _, err := s.Acquire(ctx, j, 1, "a", at(1), at(0))
		must(t, err)
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, FirstFailureAt: at(1), Due: at(2), ErrorClass: "server_side",
			Error: "POST /repos/octo/app/actions/runners/generate-jitconfig: 502 Bad Gateway"}, at(1)))
		l, _, err = s.Acquire(ctx, j, 3, "b", at(5), at(2))
		must(t, err)
		// The claimer dies; the reclaimer reads the record from the sweep
		// index (no history there) and takes it back.
		stale := job.Record{JobID: j, State: job.Claiming, Version: l.Version, LeaseExpiresAt: at(5).UnixMilli()}
		_, err = s.TakeBack(ctx, stale, job.Queued, at(6), "lease_expired", at(6))
		must(t, err)
		if _, err := s.Recheck(ctx, get(t, j), at(7), job.CheckIdle, at(6)); err == nil {
			t.Fatal("recheck of a queued record succeeded")
		}
		l, _, err = s.Acquire(ctx, j, l.Version+1, "c", at(8), at(7))
		must(t, err)
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 2, RunnerName: "linux-x"}, at(7)))
		claimed := get(t, j)
		_, err = s.Recheck(ctx, claimed, at(20), job.CheckIdle, at(17))
		must(t, err)
		claimed = get(t, j)
		_, err = s.TakeBack(ctx, claimed, job.Queued, at(27), "runner_lost", at(27))
		must(t, err)
		l, _, err = s.Acquire(ctx, j, claimed.Version+1, "d", at(29), at(28))
		must(t, err)
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Failed, Attempt: 3, ErrorClass: "non_retryable", Error: "404 Not Found"}, at(28)))
		_, err = s.Requeue(ctx, job.Requeue{Read: get(t, j), By: "alice", Due: at(30)}, at(30))
		must(t, err)
		_, err = s.MarkDone(ctx, job.Report{JobID: j, RunnerName: "linux-x", Actor: job.ActorReclaimer}, at(31))
		must(t, err)

		type e struct {
			m        int
			from, to job.State
			attempt  int
			class    string
			err      string
			actor    string
		}
		want := []e{
			{0, "", job.Pending, 0, "", "", job.ActorWebhook},
			{0, job.Pending, job.Claiming, 0, "", "", job.ActorClaimer},
			{1, job.Claiming, job.Queued, 1, "server_side", "…: 502 Bad Gateway", job.ActorClaimer},
			{2, job.Queued, job.Claiming, 1, "", "", job.ActorClaimer},
			{6, job.Claiming, job.Queued, 1, "", "lease_expired", job.ActorReclaimer},
			{7, job.Queued, job.Claiming, 1, "", "", job.ActorClaimer},
			{7, job.Claiming, job.Claimed, 2, "", "", job.ActorClaimer},
			{27, job.Claimed, job.Queued, 2, "", "runner_lost", job.ActorReclaimer},
			{28, job.Queued, job.Claiming, 2, "", "", job.ActorClaimer},
			{28, job.Claiming, job.Failed, 3, "non_retryable", "404 Not Found", job.ActorClaimer},
		}
		got := get(t, j).History
		// Two more than the cap were written: the first two are gone.
		want = append(want[2:], e{30, job.Failed, job.Queued, 0, "", "…by operator alice", job.ActorOperator},
			e{31, job.Queued, job.Done, 0, "", "", job.ActorReclaimer})
		if len(got) != len(want) {
			t.Fatalf("history of %d entries, want %d: %+v", len(got), len(want), got)
		}
		for i, w := range want {
			wt := job.Transition{At: at(w.m).UnixMilli(), From: w.from, To: w.to, Attempt: w.attempt, Class: w.class, Error: w.err, Actor: w.actor}
			if got[i] != wt {
				t.Errorf("entry %d: got %+v, want %+v", i, got[i], wt)
			}
		}
	})

	run("takeover of an expired lease", func(t *testing.T) {
		j := id(60)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		until := T0.Add(time.Minute)
		dead, _, err := s.Acquire(ctx, j, 1, "dead", until, T0)
		must(t, err)
		before := get(t, j)

		// A live lease is never taken, not even at its last millisecond,
		// nor at another version than the one held.
		for _, now := range []time.Time{T0.Add(30 * time.Second), until} {
			_, _, err = s.Takeover(ctx, j, 2, "thief", now.Add(3*time.Minute), now)
			conflict(t, "takeover of a live lease at "+now.Sub(T0).String(), err, job.Claiming, 2)
		}
		later := T0.Add(2 * time.Minute)
		_, _, err = s.Takeover(ctx, j, 1, "thief", later.Add(3*time.Minute), later)
		conflict(t, "takeover at a version not held", err, job.Claiming, 2)

		// Expired: of five concurrent takeovers exactly one wins.
		var won job.Lease
		var wonRec job.Record
		var mu sync.Mutex
		oneWins(t, "takeovers", 5, func(i int) error {
			l, r, err := s.Takeover(ctx, j, 2, fmt.Sprintf("next-%d", i), later.Add(3*time.Minute), later)
			if err == nil {
				mu.Lock()
				won, wonRec = l, r
				mu.Unlock()
			} else if cur, ok := job.CurrentOf(err); !ok || cur.State != job.Claiming || cur.Version != 3 {
				t.Errorf("a losing takeover carries %+v (found %v), want claiming v3", cur, ok)
			}
			return err
		})
		got := get(t, j)
		if got.State != job.Claiming || got.Version != 3 || got.LeaseOwner != won.Owner || got.LeaseExpiresAt != later.Add(3*time.Minute).UnixMilli() ||
			won.Version != 3 || !won.Expires.Equal(later.Add(3*time.Minute)) {
			t.Fatalf("after takeover: %+v, lease %+v; want claiming v3 leased to the winner until its expiry", got, won)
		}
		if got.SweepShard != before.SweepShard || got.SweepAt != before.SweepAt {
			t.Errorf("sweep %q at %d after takeover, want %q at %d kept (no index write)", got.SweepShard, got.SweepAt, before.SweepShard, before.SweepAt)
		}
		if got.FirstFailureAt != later.UnixMilli() {
			t.Errorf("first_failure_at %d, want the takeover's now %d (the dead attempt failed)", got.FirstFailureAt, later.UnixMilli())
		}
		last := got.History[len(got.History)-1]
		wantLast := job.Transition{At: later.UnixMilli(), From: job.Claiming, To: job.Claiming, Error: job.ReasonLeaseExpired, Actor: job.ActorClaimer}
		if last != wantLast || len(got.History) != len(before.History)+1 {
			t.Errorf("history %+v, want one entry appended: %+v", got.History, wantLast)
		}
		if fmt.Sprint(wonRec) != fmt.Sprint(got) || fmt.Sprint(won.History) != fmt.Sprint(got.History) {
			t.Errorf("takeover returned %+v (lease history %v), want the record as written %+v", wonRec, won.History, got)
		}

		// Fencing: the dead claimer's writes fail; the new owner's hold.
		if err := s.Finish(ctx, dead, job.Outcome{State: job.Claimed, Attempt: 1}, later); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("finish by the dead claimer: got %v, want ErrLeaseLost", err)
		}
		if err := s.Release(ctx, dead, job.Retry{Version: 3, Due: later}, later); !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("release by the dead claimer: got %v, want ErrLeaseLost", err)
		}
		must(t, s.Finish(ctx, won, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-1"}, later))
		_, _, err = s.Takeover(ctx, j, 3, "late", later.Add(time.Hour), later.Add(time.Hour))
		conflict(t, "takeover of a claimed record", err, job.Claimed, 3)
	})

	run("takeover: retried, a failure's clock kept, unknown job", func(t *testing.T) {
		j := id(61)
		ff := T0.Add(time.Second)
		retried(t, j, 1, ff, "dead")
		later := T0.Add(5 * time.Minute)
		_, _, err := s.Takeover(ctx, j, 4, "me", later.Add(3*time.Minute), later)
		must(t, err)
		// The SDK's retry of a write that took effect: ours, not a conflict.
		l, got, err := s.Takeover(ctx, j, 4, "me", later.Add(3*time.Minute), later)
		if err != nil || l.Version != 5 || l.Owner != "me" || got.State != job.Claiming || got.Version != 5 {
			t.Fatalf("got %+v %+v %v, want our lease at v5", l, got, err)
		}
		if got := get(t, j); got.FirstFailureAt != ff.UnixMilli() || got.Attempt != 1 {
			t.Errorf("first_failure_at %d attempt %d, want the failure's %d and attempt 1 kept", got.FirstFailureAt, got.Attempt, ff.UnixMilli())
		}
		_, _, err = s.Takeover(ctx, id(62), 2, "me", later, later)
		noRecord(t, "takeover", err)
	})

	run("takeover on a full history", func(t *testing.T) {
		j := id(63)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		v := int64(1)
		for i := 1; i < job.MaxHistory; i++ {
			now := T0.Add(time.Duration(i) * time.Minute)
			l, _, err := s.Acquire(ctx, j, v, "a", now.Add(time.Minute), now)
			must(t, err)
			must(t, s.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: i, Due: now}, now))
			v = l.Version + 1
		}
		now := T0.Add(time.Hour)
		_, _, err = s.Acquire(ctx, j, v, "dead", now.Add(time.Minute), now)
		must(t, err)
		if n := len(get(t, j).History); n != job.MaxHistory {
			t.Fatalf("history of %d entries before the takeover, want the cap %d", n, job.MaxHistory)
		}
		later := now.Add(2 * time.Minute)
		l, got, err := s.Takeover(ctx, j, v+1, "next", later.Add(time.Minute), later)
		must(t, err)
		h := get(t, j).History
		if len(h) != job.MaxHistory || h[len(h)-1].Error != job.ReasonLeaseExpired || h[len(h)-1].From != job.Claiming ||
			fmt.Sprint(l.History) != fmt.Sprint(h) || fmt.Sprint(got.History) != fmt.Sprint(h) {
			t.Fatalf("history %+v (lease %v), want the cap with the takeover newest", h, l.History)
		}
	})

	run("history stays capped", func(t *testing.T) {
		j := id(203)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		v := int64(1)
		long := strings.Repeat("é", 3000) + " connection reset"
		for i := 1; i <= job.MaxHistory; i++ {
			now := T0.Add(time.Duration(i) * time.Minute)
			l, rec, err := s.Acquire(ctx, j, v, "a", now.Add(time.Minute), now)
			must(t, err)
			if len(rec.History) > job.MaxHistory || fmt.Sprint(l.History) != fmt.Sprint(rec.History) {
				t.Fatalf("lease %d: %d entries, lease history %v, want ≤ %d, the record's", i, len(rec.History), l.History, job.MaxHistory)
			}
			must(t, s.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: i, Due: now, ErrorClass: "network", Error: long}, now))
			v = l.Version + 1
		}
		// Blind appends on a full history: a take-back read from the
		// sweep index, then done.
		now := T0.Add(time.Hour)
		_, err = s.TakeBack(ctx, job.Record{JobID: j, State: job.Queued, Version: v}, job.Queued, now, "message_lost", now)
		must(t, err)
		_, err = s.MarkDone(ctx, job.Report{JobID: j}, now)
		must(t, err)
		h := get(t, j).History
		if len(h) != job.MaxHistory {
			t.Fatalf("history of %d entries, want the cap %d", len(h), job.MaxHistory)
		}
		last := h[len(h)-1]
		if last.From != job.Queued || last.To != job.Done || last.Attempt != job.MaxHistory {
			t.Errorf("newest entry %+v, want queued → done at attempt %d", last, job.MaxHistory)
		}
		for i := 1; i < len(h); i++ {
			if h[i].From != h[i-1].To || h[i].At < h[i-1].At {
				t.Errorf("entry %d %+v does not follow %+v", i, h[i], h[i-1])
			}
			if len(h[i].Error) > job.MaxHistoryError {
				t.Errorf("entry %d keeps %d bytes of error, want ≤ %d", i, len(h[i].Error), job.MaxHistoryError)
			}
		}
		if h[0].From == "" || h[len(h)-3].Error != "… connection reset" {
			t.Errorf("the oldest entry kept %+v names its from-state; a release keeps its error's tail: %+v", h[0], h[len(h)-3])
		}
	})

	run("rate state", func(t *testing.T) {
		inst := base + 1
		if _, err := s.LoadRate(ctx, inst); !errors.Is(err, ratelimit.ErrNoReading) {
			t.Fatalf("no reading yet: got %v, want ErrNoReading", err)
		}
		newer := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: T0.Add(40 * time.Minute), ObservedAt: T0.Add(time.Second), PassedAt: T0.Add(-time.Second)}
		older := ratelimit.Reading{Limit: 5000, Remaining: 4000, ResetAt: T0.Add(40 * time.Minute), ObservedAt: T0}
		must(t, s.SaveRate(ctx, inst, newer))
		must(t, s.SaveRate(ctx, inst, older))
		got, err := s.LoadRate(ctx, inst)
		must(t, err)
		if got.Remaining != 0 || got.Limit != 5000 || !got.ResetAt.Equal(newer.ResetAt) || !got.ObservedAt.Equal(newer.ObservedAt) || !got.PassedAt.Equal(newer.PassedAt) {
			t.Fatalf("an older reading clobbered a newer one: got %+v", got)
		}
		// A newer reading from a process whose last call went through
		// earlier than the stored one's keeps the later passed_at: "a
		// call went through since" must not go back in time, or a limit
		// met after a block would be taken for a repeat and doubled.
		lagging := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: T0.Add(40 * time.Minute), ObservedAt: T0.Add(2 * time.Second), PassedAt: T0.Add(-time.Minute)}
		must(t, s.SaveRate(ctx, inst, lagging))
		got, err = s.LoadRate(ctx, inst)
		must(t, err)
		if !got.ObservedAt.Equal(lagging.ObservedAt) || !got.PassedAt.Equal(newer.PassedAt) {
			t.Fatalf("after a newer reading with an older pass: %+v, want observed %v and passed %v kept", got, lagging.ObservedAt, newer.PassedAt)
		}
	})

	run("rate state: a window's lower count stands", func(t *testing.T) {
		inst := base + 3
		reset := T0.Add(40 * time.Minute)
		rd := func(remaining int, observed, counted time.Duration) ratelimit.Reading {
			return ratelimit.Reading{Limit: 5000, Remaining: remaining, ResetAt: reset, ObservedAt: T0.Add(observed), CountedAt: T0.Add(counted)}
		}
		load := func(t *testing.T) ratelimit.Reading {
			t.Helper()
			got, err := s.LoadRate(ctx, inst)
			must(t, err)
			return got
		}
		// A slow success's answer, counted by GitHub before the
		// exhaustion but observed after it, does not replace it.
		must(t, s.SaveRate(ctx, inst, rd(0, 0, 0)))
		must(t, s.SaveRate(ctx, inst, rd(40, 100*time.Millisecond, 100*time.Millisecond)))
		if got := load(t); got.Remaining != 0 {
			t.Fatalf("an exhaustion replaced by a count observed 100 ms later: remaining %d, want 0", got.Remaining)
		}
		// The kept count, re-dated by a later answer (freshness), keeps
		// its own count time.
		must(t, s.SaveRate(ctx, inst, rd(0, 20*time.Second, 0)))
		if got := load(t); got.Remaining != 0 || !got.ObservedAt.Equal(T0.Add(20*time.Second)) || !got.Counted().Equal(T0) {
			t.Fatalf("after a re-dated count: %+v, want remaining 0 observed +20s, counted at +0s", got)
		}
		// A higher count counted more than Crossing after the kept one
		// is a risen limit, though observed before the re-dated answer.
		must(t, s.SaveRate(ctx, inst, rd(400, ratelimit.Crossing+time.Second, ratelimit.Crossing+time.Second)))
		if got := load(t); got.Remaining != 400 {
			t.Fatalf("remaining %d, want 400, the count observed %v after the kept one", got.Remaining, ratelimit.Crossing+time.Second)
		}
		// A lower count observed just before it still wins.
		must(t, s.SaveRate(ctx, inst, rd(390, ratelimit.Crossing, ratelimit.Crossing)))
		if got := load(t); got.Remaining != 390 {
			t.Fatalf("remaining %d, want the lower count 390", got.Remaining)
		}
		// A new window, observed later, replaces the old one whatever its
		// count; an older window never comes back.
		next := ratelimit.Reading{Limit: 5000, Remaining: 4999, ResetAt: reset.Add(time.Hour), ObservedAt: T0.Add(time.Hour)}
		must(t, s.SaveRate(ctx, inst, next))
		must(t, s.SaveRate(ctx, inst, rd(0, 2*ratelimit.Crossing, 2*ratelimit.Crossing)))
		if got := load(t); got.Remaining != 4999 || !got.ResetAt.Equal(next.ResetAt) {
			t.Fatalf("got %+v, want the new window's 4999", got)
		}
	})

	run("rate block", func(t *testing.T) {
		inst := base + 2
		until := T0.Add(2 * time.Minute)
		// A block alone: a 429 carries no budget to read.
		must(t, s.SaveBlock(ctx, inst, until, 2*time.Minute))
		got, err := s.LoadRate(ctx, inst)
		must(t, err)
		if !got.BlockedUntil.Equal(until) || got.BlockedFor != 2*time.Minute || got.Known() {
			t.Fatalf("after a block alone: %+v, want the block (2m) and no primary reading", got)
		}
		// The first primary reading lands on the blocked item; the block stays.
		rd := ratelimit.Reading{Limit: 5000, Remaining: 4000, ResetAt: T0.Add(40 * time.Minute), ObservedAt: T0}
		must(t, s.SaveRate(ctx, inst, rd))
		// An earlier block never shortens a later one.
		must(t, s.SaveBlock(ctx, inst, T0.Add(time.Minute), time.Minute))
		got, err = s.LoadRate(ctx, inst)
		must(t, err)
		if got.Remaining != 4000 || !got.ObservedAt.Equal(rd.ObservedAt) || !got.BlockedUntil.Equal(until) {
			t.Fatalf("after a reading and an earlier block: %+v, want remaining 4000 and the block until %v", got, until)
		}
		// A later block extends it; a newer reading leaves it.
		later := T0.Add(5 * time.Minute)
		must(t, s.SaveBlock(ctx, inst, later, 4*time.Minute))
		rd.Remaining, rd.ObservedAt = 3900, T0.Add(time.Second)
		must(t, s.SaveRate(ctx, inst, rd))
		got, err = s.LoadRate(ctx, inst)
		must(t, err)
		if got.Remaining != 3900 || !got.BlockedUntil.Equal(later) || got.BlockedFor != 4*time.Minute {
			t.Fatalf("after a later block and a newer reading: %+v, want remaining 3900 and the block until %v (4m)", got, later)
		}
	})
}

// TestStoreSweep runs the contract of the sweep's listing (Shards, Stale);
// see TestStore for base.
func TestStoreSweep(t *testing.T, base int64, open func(t *testing.T) Store) {
	s := open(t)
	su := newSuite(s)
	ctx, tm := su.ctx, su.tm
	id := func(n int64) int64 { return base + n }

	t.Run("stale pages through the sweep, oldest first", func(t *testing.T) {
		// Shard 0 of 8 holds base+16, +24, +32, +40 (and base+8, base+0: unused).
		a, b, c, d := id(16), id(24), id(32), id(40)
		shard := job.Shard(a, tm.Shards)
		_, err := s.CreateJob(ctx, Rec(a), T0) // pending, stale after grace
		must(t, err)
		_, err = s.CreateJob(ctx, Rec(b), T0.Add(tm.PendingGrace)) // pending, fresh
		must(t, err)
		_, err = s.CreateJob(ctx, Rec(c), T0) // claimed: not stale within its runner-start grace
		must(t, err)
		l, _, err := s.Acquire(ctx, c, 1, "a", T0.Add(time.Minute), T0)
		must(t, err)
		must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, RunnerStartGrace: time.Hour}, T0))
		_, err = s.CreateJob(ctx, Rec(d), T0.Add(-time.Minute)) // claiming, lease expired, pending's sweep_at kept
		must(t, err)
		_, _, err = s.Acquire(ctx, d, 1, "b", T0.Add(30*time.Second), T0)
		must(t, err)

		var ids []int64
		cursor := ""
		for range 10 {
			p, err := s.Stale(ctx, shard, T0.Add(tm.PendingGrace+time.Minute), 1, cursor)
			must(t, err)
			for _, r := range p.Records {
				if slices.Contains([]int64{a, b, c, d}, r.JobID) { // the shard's other records are somebody else's
					ids = append(ids, r.JobID)
				}
			}
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		if len(ids) != 2 || ids[0] != d || ids[1] != a {
			t.Fatalf("stale in shard %s: got %v, want [%d %d] (created first, stale first)", shard, ids, d, a)
		}
		if got := s.Shards(); len(got) != tm.Shards || got[0] != "0" || got[tm.Shards-1] != "7" {
			t.Errorf("shards: got %v", got)
		}
	})

	// mine pages through shard at now with limit and returns how often each
	// of ids was listed (other records of the shard are somebody else's).
	mine := func(t *testing.T, shard string, now time.Time, limit int32, ids ...int64) (map[int64]int, map[int64]job.Record) {
		t.Helper()
		seen, recs := map[int64]int{}, map[int64]job.Record{}
		cursor := ""
		for range 1000 {
			p, err := s.Stale(ctx, shard, now, limit, cursor)
			must(t, err)
			for _, r := range p.Records {
				if slices.Contains(ids, r.JobID) {
					seen[r.JobID]++
					recs[r.JobID] = r
				}
			}
			if p.Next == "" {
				return seen, recs
			}
			cursor = p.Next
		}
		t.Fatalf("shard %s: no end after 1000 pages", shard)
		return nil, nil
	}

	t.Run("a record whose sweep_at is now is not stale yet", func(t *testing.T) {
		j := id(48) // shard 0, created later than the other subtest's records
		created := T0.Add(time.Hour)
		_, err := s.CreateJob(ctx, Rec(j), created)
		must(t, err)
		at := created.Add(tm.PendingGrace)
		if seen, _ := mine(t, job.Shard(j, tm.Shards), at, 0, j); seen[j] != 0 {
			t.Fatalf("listed at sweep_at itself, want only after it")
		}
		if seen, _ := mine(t, job.Shard(j, tm.Shards), at.Add(time.Millisecond), 0, j); seen[j] != 1 {
			t.Fatalf("listed %d times 1 ms after sweep_at, want once", seen[j])
		}
	})

	t.Run("paging over more records than the limit lists each once", func(t *testing.T) {
		// Shard 6: seven records, five of them stale at the same instant
		// (ties on the index's sort key must not repeat or drop one).
		var ids []int64
		for k := int64(6); k <= 12; k++ {
			ids = append(ids, id(6+8*k))
		}
		for i, j := range ids {
			at := T0
			if i >= 5 {
				at = T0.Add(time.Second)
			}
			_, err := s.CreateJob(ctx, Rec(j), at)
			must(t, err)
		}
		for _, limit := range []int32{1, 2, 3, 100} {
			seen, _ := mine(t, "6", T0.Add(tm.PendingGrace+time.Minute), limit, ids...)
			for _, j := range ids {
				if seen[j] != 1 {
					t.Errorf("limit %d: job %d listed %d times, want once (all: %v)", limit, j, seen[j], seen)
				}
			}
		}
	})

	t.Run("a stale record is listed whole and current", func(t *testing.T) {
		j := id(49)
		l := leased(t, s, j, "a")
		ff := T0.Add(time.Second)
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 2, FirstFailureAt: ff, Due: T0.Add(time.Minute)}, T0))
		_, _, err := s.Acquire(ctx, j, 3, "b", T0.Add(2*time.Minute), T0.Add(time.Minute))
		must(t, err)
		// The second lease kept the release's sweep_at (due + queued grace).
		now := T0.Add(time.Minute + tm.QueuedGrace + time.Millisecond)
		_, recs := mine(t, job.Shard(j, tm.Shards), now, 0, j)
		r, ok := recs[j]
		if !ok {
			t.Fatalf("job %d with an expired lease not listed", j)
		}
		// The index holds keys only: the store reads the records behind
		// them, so the reclaimer decides on (and logs) the whole record.
		if r.State != job.Claiming || r.Version != 4 || r.LeaseExpiresAt != T0.Add(2*time.Minute).UnixMilli() || r.FirstFailureAt != ff.UnixMilli() ||
			r.Attempt != 2 || r.Repo != "octo/app" || r.Pool != "linux" || r.InstallationID != 42 || r.RunID != 9 || r.LeaseOwner != "b" {
			t.Errorf("listed %+v, want the whole record: claiming v4 leased to b, attempt 2, identity, first failure", r)
		}
		got, err := s.TakeBack(ctx, r, job.Queued, now, "lease_expired", now)
		must(t, err)
		if got.State != job.Queued || got.Version != 5 || got.Attempt != 2 || got.FirstFailureAt != ff.UnixMilli() {
			t.Errorf("take back returned %+v, want queued v5, attempt 2 and first failure kept", got)
		}
	})

	t.Run("the lease leaves sweep_at as it was", func(t *testing.T) {
		j := id(52)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		before := su.get(t, j)
		l, got, err := s.Acquire(ctx, j, 1, "a", T0.Add(3*time.Minute), T0)
		must(t, err)
		if got.SweepShard != before.SweepShard || got.SweepAt != before.SweepAt || su.get(t, j).SweepAt != before.SweepAt {
			t.Fatalf("leased record in shard %q at %d, want pending's %q at %d (a lease writes no index entry)", got.SweepShard, got.SweepAt, before.SweepShard, before.SweepAt)
		}
		due := T0.Add(time.Minute)
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: due}, T0))
		_, got, err = s.Acquire(ctx, j, 3, "b", T0.Add(4*time.Minute), due)
		must(t, err)
		if got.SweepAt != due.Add(tm.QueuedGrace).UnixMilli() {
			t.Fatalf("second lease: sweep_at %d, want queued's due + grace %d", got.SweepAt, due.Add(tm.QueuedGrace).UnixMilli())
		}
	})

	t.Run("a claimer that dies holding its lease is found and taken back", func(t *testing.T) {
		j := id(53)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		until := T0.Add(3 * time.Minute)
		_, _, err = s.Acquire(ctx, j, 1, "dies", until, T0)
		must(t, err)
		// Passes of the reclaimer: not stale before pending's grace, whose
		// end is after the lease's, then stale and taken back.
		staleFrom := T0.Add(tm.PendingGrace)
		for _, at := range []time.Time{until.Add(time.Millisecond), staleFrom} {
			if seen, _ := mine(t, job.Shard(j, tm.Shards), at, 0, j); seen[j] != 0 {
				t.Fatalf("listed at +%s, want only after +%s", at.Sub(T0), staleFrom.Sub(T0))
			}
		}
		now := staleFrom.Add(time.Millisecond)
		_, recs := mine(t, job.Shard(j, tm.Shards), now, 0, j)
		r, ok := recs[j]
		if !ok || r.State != job.Claiming || r.Version != 2 || r.LeaseExpiresAt != until.UnixMilli() {
			t.Fatalf("listed %+v (found %v), want claiming v2 with its expired lease", r, ok)
		}
		got, err := s.TakeBack(ctx, r, job.Queued, now, "lease_expired", now)
		must(t, err)
		if got.State != job.Queued || got.Version != 3 || got.LeaseOwner != "" || got.FirstFailureAt != now.UnixMilli() {
			t.Errorf("taken back: %+v, want queued v3, no lease, the death recorded as the first failure", got)
		}
	})

	t.Run("a live lease found early is postponed to its expiry", func(t *testing.T) {
		j := id(55)
		_, err := s.CreateJob(ctx, Rec(j), T0)
		must(t, err)
		until := T0.Add(tm.PendingGrace + 5*time.Minute) // outlives pending's grace
		l, _, err := s.Acquire(ctx, j, 1, "slow", until, T0)
		must(t, err)
		now := T0.Add(tm.PendingGrace + time.Minute)
		_, recs := mine(t, job.Shard(j, tm.Shards), now, 0, j)
		r, ok := recs[j]
		if !ok {
			t.Fatalf("job %d not listed past pending's grace", j)
		}
		_, err = s.TakeBack(ctx, r, job.Queued, now, "lease_expired", now)
		conflict(t, "take back of a live lease", err, job.Claiming, 2)

		got, err := s.Postpone(ctx, r, until)
		must(t, err)
		// The lease still holds: postponing bumps no version.
		if got.State != job.Claiming || got.Version != l.Version || got.LeaseOwner != l.Owner || got.SweepAt != until.UnixMilli() || got.SweepShard != r.SweepShard {
			t.Fatalf("postponed: %+v, want claiming v%d leased to %s, sweep_at at the lease's expiry %d", got, l.Version, l.Owner, until.UnixMilli())
		}
		_, err = s.Postpone(ctx, job.Record{JobID: j, State: job.Claiming, Version: 1}, until)
		conflict(t, "postpone of an older version", err, job.Claiming, 2)
		for _, at := range []time.Time{now, until} {
			if seen, _ := mine(t, job.Shard(j, tm.Shards), at, 0, j); seen[j] != 0 {
				t.Fatalf("listed again at +%s, want not before the lease's expiry +%s", at.Sub(T0), until.Sub(T0))
			}
		}
		after := until.Add(time.Millisecond)
		_, recs = mine(t, job.Shard(j, tm.Shards), after, 0, j)
		r, ok = recs[j]
		if !ok {
			t.Fatalf("job %d not listed after its lease's expiry", j)
		}
		got, err = s.TakeBack(ctx, r, job.Queued, after, "lease_expired", after)
		must(t, err)
		if got.State != job.Queued || got.Version != 3 {
			t.Errorf("taken back after the expiry: %+v, want queued v3", got)
		}
	})

	t.Run("take back of pending and queued records", func(t *testing.T) {
		p, q := id(50), id(51)
		_, err := s.CreateJob(ctx, Rec(p), T0)
		must(t, err)
		l := leased(t, s, q, "a")
		must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: T0.Add(time.Minute)}, T0))
		now := T0.Add(time.Hour)
		for _, tt := range []struct {
			id      int64
			read    job.State
			version int64
		}{{p, job.Pending, 1}, {q, job.Queued, 3}} {
			_, recs := mine(t, job.Shard(tt.id, tm.Shards), now, 0, tt.id)
			r, ok := recs[tt.id]
			if !ok || r.State != tt.read || r.Version != tt.version {
				t.Fatalf("job %d listed %+v (found %v), want %s v%d", tt.id, r, ok, tt.read, tt.version)
			}
			due := now.Add(2 * time.Second)
			got, err := s.TakeBack(ctx, r, job.Queued, due, "lost", now)
			must(t, err)
			if got.State != job.Queued || got.Version != tt.version+1 || got.DueAt != due.UnixMilli() ||
				got.SweepAt != due.Add(tm.QueuedGrace).UnixMilli() || got.FirstFailureAt != 0 {
				t.Errorf("job %d taken back from %s: %+v, want queued v%d due %d, no failure recorded (nobody failed)", tt.id, tt.read, got, tt.version+1, due.UnixMilli())
			}
			_, err = s.TakeBack(ctx, r, job.Queued, due, "lost", now)
			conflict(t, "a second take-back of the same read", err, job.Queued, tt.version+1)
		}
	})

	t.Run("a cursor the store did not make is an error naming it", func(t *testing.T) {
		const bad = "not-a-cursor"
		_, err := s.Stale(ctx, "3", T0, 1, bad)
		if !errors.Is(err, job.ErrBadCursor) || !strings.Contains(err.Error(), bad) {
			t.Fatalf("got %v, want job.ErrBadCursor naming the cursor %q", err, bad)
		}
	})

	t.Run("a cursor is refused by another shard and taken by its own", func(t *testing.T) {
		// Shard 5: two stale records, so a page of one carries a cursor.
		a, b := id(301), id(309)
		for _, j := range []int64{a, b} {
			_, err := s.CreateJob(ctx, Rec(j), T0.Add(-2*time.Hour))
			must(t, err)
		}
		now := T0.Add(-time.Hour)
		p, err := s.Stale(ctx, "5", now, 1, "")
		must(t, err)
		if p.Next == "" {
			t.Fatalf("a page of 1 of shard 5's stale records carries no cursor")
		}
		// DynamoDB's ExclusiveStartKey names the shard: another shard's
		// query cannot start there (shared/store.decodeCursor refuses it).
		if _, err := s.Stale(ctx, "4", now, 1, p.Next); !errors.Is(err, job.ErrBadCursor) {
			t.Fatalf("shard 5's cursor on shard 4: got %v, want job.ErrBadCursor", err)
		}
		if _, err := s.Stale(ctx, "5", now, 1, p.Next); err != nil {
			t.Fatalf("shard 5's cursor on shard 5: %v", err)
		}
	})
}
