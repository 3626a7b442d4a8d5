package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/store"
)

// TestSweepAttributesFollowEveryTransition: sweep_at is the moment a
// record becomes stale if nobody touches it, written by every non-terminal
// transition but the lease (which keeps pending's or queued's: the reclaimer
// postpones a live one); every terminal transition removes sweep_shard and
// sweep_at, so the reclaimer never sees a finished job.
func TestSweepAttributesFollowEveryTransition(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	due := t0.Add(40 * time.Second)
	lease := t0.Add(3 * time.Minute)
	grace := store.DefaultQueuedGrace

	tests := []struct {
		name string
		id   int64
		// run takes the record from pending (created at t0) to the state under test.
		run       func(t *testing.T, id int64)
		wantState job.State
		wantSweep time.Time // zero: sweep attributes removed
	}{
		{name: "created pending", id: 501, run: func(*testing.T, int64) {}, wantState: job.Pending, wantSweep: t0.Add(store.DefaultPendingGrace)},
		{name: "leased: pending's sweep_at kept", id: 503, run: func(t *testing.T, id int64) {
			_, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
		}, wantState: job.Claiming, wantSweep: t0.Add(store.DefaultPendingGrace)},
		{name: "released", id: 504, run: func(t *testing.T, id int64) {
			l, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
			must(t, f.s.Release(ctx, l, store.Retry{Version: 3, Attempt: 1, Due: due}, t0))
		}, wantState: job.Queued, wantSweep: due.Add(grace)},
		{name: "taken back to queued", id: 505, run: func(t *testing.T, id int64) {
			_, err := f.s.TakeBack(ctx, f.get(t, id), job.Queued, due, "lost message", t0.Add(time.Hour))
			must(t, err)
		}, wantState: job.Queued, wantSweep: due.Add(grace)},
		{name: "done while pending", id: 506, run: func(t *testing.T, id int64) {
			_, err := f.s.MarkDone(ctx, store.Done{JobID: id, RunnerName: "r"}, t0)
			must(t, err)
		}, wantState: job.Done},
		{name: "done while claiming", id: 507, run: func(t *testing.T, id int64) {
			_, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
			_, err = f.s.MarkDone(ctx, store.Done{JobID: id}, t0)
			must(t, err)
		}, wantState: job.Done},
		{name: "finished failed", id: 508, run: func(t *testing.T, id int64) {
			l, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
			must(t, f.s.Finish(ctx, l, store.Outcome{State: job.Failed, Attempt: 1, ErrorClass: "non_retryable", Error: "404"}, t0))
		}, wantState: job.Failed},
		{name: "claimed", id: 510, run: func(t *testing.T, id int64) {
			l, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
			must(t, f.s.Finish(ctx, l, store.Outcome{State: job.Claimed, Attempt: 1, RunnerStartGrace: 20 * time.Minute}, t0))
		}, wantState: job.Claimed, wantSweep: t0.Add(20 * time.Minute)},
		{name: "claimed, checked again", id: 511, run: func(t *testing.T, id int64) {
			l, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
			must(t, f.s.Finish(ctx, l, store.Outcome{State: job.Claimed, Attempt: 1}, t0))
			_, err = f.s.Recheck(ctx, f.get(t, id), t0.Add(time.Hour), job.CheckIdle, t0.Add(11*time.Minute))
			must(t, err)
		}, wantState: job.Claimed, wantSweep: t0.Add(time.Hour)},
		{name: "claimed, new attempt", id: 512, run: func(t *testing.T, id int64) {
			l, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
			must(t, f.s.Finish(ctx, l, store.Outcome{State: job.Claimed, Attempt: 1}, t0))
			_, err = f.s.TakeBack(ctx, f.get(t, id), job.Queued, due, "runner lost", t0.Add(11*time.Minute))
			must(t, err)
		}, wantState: job.Queued, wantSweep: due.Add(grace)},
		{name: "done while claimed", id: 513, run: func(t *testing.T, id int64) {
			l, _, err := f.s.Acquire(ctx, id, 1, "a", lease, t0)
			must(t, err)
			must(t, f.s.Finish(ctx, l, store.Outcome{State: job.Claimed, Attempt: 1}, t0))
			_, err = f.s.MarkDone(ctx, store.Done{JobID: id}, t0)
			must(t, err)
		}, wantState: job.Done},
		{name: "abandoned by the reclaimer", id: 509, run: func(t *testing.T, id int64) {
			_, err := f.s.TakeBack(ctx, f.get(t, id), job.Abandoned, time.Time{}, "max age", t0.Add(time.Hour))
			must(t, err)
		}, wantState: job.Abandoned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := f.id(tt.id)
			if _, err := f.s.CreateJob(ctx, rec(id), t0); err != nil {
				t.Fatal(err)
			}
			tt.run(t, id)
			raw := f.raw(t, job.Key(id))
			got := f.get(t, id)
			if got.State != tt.wantState {
				t.Fatalf("state %s, want %s", got.State, tt.wantState)
			}
			if tt.wantSweep.IsZero() {
				if _, ok := raw["sweep_shard"]; ok {
					t.Errorf("terminal record still carries sweep_shard: the reclaimer's index would list it")
				}
				if _, ok := raw["sweep_at"]; ok {
					t.Errorf("terminal record still carries sweep_at %d", got.SweepAt)
				}
				if got.ExpiresAt == 0 {
					t.Errorf("terminal record has no expires_at")
				}
				return
			}
			if got.SweepShard != job.Shard(id, store.DefaultShards) || got.SweepAt != tt.wantSweep.UnixMilli() {
				t.Errorf("sweep shard %q at %d, want %q at %d", got.SweepShard, got.SweepAt,
					job.Shard(id, store.DefaultShards), tt.wantSweep.UnixMilli())
			}
		})
	}
}

// TestEveryConditionClauseHolds: each clause of each conditional write
// refuses on its own, with the other clauses satisfied.
func TestEveryConditionClauseHolds(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	until := t0.Add(3 * time.Minute)

	t.Run("acquire at a stale version of a queued record", func(t *testing.T) {
		// Queued at version 3 after a release; a duplicate message of version 1.
		id := f.id(521)
		_, err := f.s.CreateJob(ctx, rec(id), t0)
		must(t, err)
		l, _, err := f.s.Acquire(ctx, id, 1, "a", until, t0)
		must(t, err)
		must(t, f.s.Release(ctx, l, store.Retry{Version: 3, Attempt: 1, Due: t0}, t0))
		if _, _, err := f.s.Acquire(ctx, id, 1, "b", until, t0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("got %v, want ErrConflict: the queued state alone must not admit an old message", err)
		}
		if got := f.get(t, id); got.State != job.Queued || got.Version != 3 {
			t.Fatalf("record %s v%d, want queued v3 untouched", got.State, got.Version)
		}
	})
	t.Run("a refused acquire carries the record as it is", func(t *testing.T) {
		// The claimer decides duplicate / early / unknown from the refusal
		// alone: no read before the lease write.
		id := f.id(527)
		_, err := f.s.CreateJob(ctx, rec(id), t0)
		must(t, err)
		_, _, err = f.s.Acquire(ctx, id, 1, "a", until, t0)
		must(t, err)
		_, _, err = f.s.Acquire(ctx, id, 1, "b", until, t0)
		cur, ok := job.CurrentOf(err)
		if !errors.Is(err, job.ErrConflict) || !ok || cur.State != job.Claiming || cur.Version != 2 || cur.LeaseOwner != "a" ||
			cur.LeaseExpiresAt != until.UnixMilli() {
			t.Fatalf("got %v carrying %+v (found %v), want a conflict carrying the record claiming v2 leased to a", err, cur, ok)
		}
		_, _, err = f.s.Acquire(ctx, 528, 1, "b", until, t0)
		var ce *job.ConflictError
		if !errors.As(err, &ce) || ce.Found {
			t.Fatalf("unknown job: got %v, want a *job.ConflictError carrying no record", err)
		}
	})
	t.Run("acquire a claiming record at its own version", func(t *testing.T) {
		id := f.id(522)
		_, err := f.s.CreateJob(ctx, rec(id), t0)
		must(t, err)
		_, _, err = f.s.Acquire(ctx, id, 1, "a", until, t0)
		must(t, err)
		if _, _, err := f.s.Acquire(ctx, id, 2, "b", until, t0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("got %v, want ErrConflict: a leased record cannot be leased again", err)
		}
		if got := f.get(t, id); got.LeaseOwner != "a" || got.Version != 2 {
			t.Fatalf("lease owner %q v%d, want a v2", got.LeaseOwner, got.Version)
		}
	})
	t.Run("same owner, older lease", func(t *testing.T) {
		// One claimer process (owner a) leased, released, and leased again:
		// the first lease must be dead even though the owner matches.
		id := f.id(523)
		_, err := f.s.CreateJob(ctx, rec(id), t0)
		must(t, err)
		old, _, err := f.s.Acquire(ctx, id, 1, "a", until, t0)
		must(t, err)
		must(t, f.s.Release(ctx, old, store.Retry{Version: 3, Attempt: 1, Due: t0}, t0))
		_, _, err = f.s.Acquire(ctx, id, 3, "a", until, t0)
		must(t, err)
		if err := f.s.Finish(ctx, old, store.Outcome{State: job.Claimed, Attempt: 1}, t0); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Finish under the older lease: got %v, want ErrLeaseLost", err)
		}
		if err := f.s.Extend(ctx, old, 9, "x", t0); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Extend under the older lease: got %v, want ErrLeaseLost", err)
		}
		if got := f.get(t, id); got.State != job.Claiming || got.Version != 4 || got.Attempt != 1 {
			t.Fatalf("record %s v%d attempt %d, want claiming v4 attempt 1", got.State, got.Version, got.Attempt)
		}
	})
	t.Run("take back a record that moved on and came back to the same state", func(t *testing.T) {
		// The reclaimer read the record queued at version 1; meanwhile a
		// claimer leased and released it: queued again, at version 3.
		id := f.id(524)
		_, err := f.s.CreateJob(ctx, rec(id), t0)
		must(t, err)
		read := f.get(t, id)
		l, _, err := f.s.Acquire(ctx, id, 1, "a", until, t0)
		must(t, err)
		must(t, f.s.Release(ctx, l, store.Retry{Version: 3, Attempt: 1, Due: t0.Add(time.Minute)}, t0))
		later := t0.Add(time.Hour)
		if _, err := f.s.TakeBack(ctx, read, job.Queued, later, "lost message", later); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("take-back to queued: got %v, want ErrConflict (version changed)", err)
		}
		if _, err := f.s.TakeBack(ctx, read, job.Abandoned, time.Time{}, "max age", later); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("take-back to abandoned: got %v, want ErrConflict (version changed)", err)
		}
		if got := f.get(t, id); got.State != job.Queued || got.Version != 3 {
			t.Fatalf("record %s v%d, want queued v3 untouched", got.State, got.Version)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
