package bench_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/bench"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestJobLifeIndexWrites: a job's life, written through the store as the
// functions write it (the webhook's queued, the claimer's lease, attempt
// and claim, in_progress, completed), costs at most 3 sweep-index writes
// (issue 11's target), and the lease write none: the index projects keys
// only and the lease leaves sweep_at alone. Counted by bench's Counter on
// the emulator, as make bench counts them.
func TestJobLifeIndexWrites(t *testing.T) {
	srv := emulator.ForTest(t)
	env := bench.NewEnv(srv.ConfigForTest(t), emulator.DeployForTest(t, srv))
	ctx := context.Background()
	now := time.Now()
	const id = 77_000_001
	s := env.Store
	var lease job.Lease
	steps := []struct {
		name       string
		write      func() error
		wantWrites float64
	}{
		{name: "queued: create", wantWrites: 1, write: func() error {
			_, err := s.CreateJob(ctx, job.Record{JobID: id, Repo: "octo/app", InstallationID: 42, Labels: []string{"self-hosted"}, Pool: "linux", RunID: 9}, now)
			return err
		}},
		{name: "claim: lease", wantWrites: 0, write: func() error {
			var err error
			lease, _, err = s.Acquire(ctx, id, 1, "claimer", now.Add(3*time.Minute), now)
			return err
		}},
		{name: "claim: attempt", wantWrites: 0, write: func() error {
			return s.Extend(ctx, lease, 1, "linux-77000001", now)
		}},
		{name: "claim: claimed", wantWrites: 1, write: func() error {
			return s.Finish(ctx, lease, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-77000001"}, now)
		}},
		{name: "in_progress", wantWrites: 1, write: func() error {
			_, err := s.MarkDone(ctx, job.Report{JobID: id, Repo: "octo/app", RunnerName: "linux-77000001"}, now)
			return err
		}},
		{name: "completed", wantWrites: 0, write: func() error {
			if _, err := s.MarkDone(ctx, job.Report{JobID: id, Repo: "octo/app"}, now); !errors.Is(err, job.ErrTerminal) {
				return err
			}
			return nil
		}},
	}
	start := env.Count.Snapshot()
	for _, st := range steps {
		before := env.Count.Snapshot()
		if err := st.write(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := env.Count.Snapshot().Since(before).Units.GSIWrites; got != st.wantWrites {
			t.Errorf("%s: %g sweep-index writes, want %g", st.name, got, st.wantWrites)
		}
	}
	if got := env.Count.Snapshot().Since(start).Units.GSIWrites; got > 3 {
		t.Errorf("a job's life: %g sweep-index writes, want ≤ 3", got)
	}
}

// TestReclaimPassReadsEachRecordOnce: the keys-only index costs the sweep
// one BatchGetItem per page of stale keys (at most 100 each), every stale
// record read once: about 1/100 request per record on top of the Query.
func TestReclaimPassReadsEachRecordOnce(t *testing.T) {
	srv := emulator.ForTest(t)
	env := bench.NewEnv(srv.ConfigForTest(t), emulator.DeployForTest(t, srv))
	ctx := context.Background()
	const m = 150
	if err := bench.SeedStale(ctx, env, m, 78_000_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	rc, err := bench.NewReclaimer(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	before := env.Count.Snapshot()
	rep, err := rc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := env.Count.Snapshot().Since(before)
	if rep.RequeuedTotal() != m {
		t.Fatalf("requeued %d, want %d", rep.RequeuedTotal(), m)
	}
	gets, queries := d.Calls["DynamoDB.BatchGetItem"], d.Calls["DynamoDB.Query"]
	if gets == 0 || gets > queries || gets > 8+m/100 {
		t.Errorf("%d BatchGetItem for %d Query pages, want at most one per non-empty page", gets, queries)
	}
	if got := d.Units.RRU - 0.5*float64(queries); got != m {
		t.Errorf("batch reads of %g records, want each of the %d read once", got, m)
	}
}

// TestClaimsCountTheWiredClaimer: the claims section measures the claimer
// functions/claimer runs (shared/wire/claimer, its App key read from the
// stack's secret through the counted client), every job is timed at its
// provisioning call, and the provisioner's sends to the dispatch queue are
// in no job figure: the claimer's own requests per job are the job
// record's lease and claimed writes plus the rate item's share.
func TestClaimsCountTheWiredClaimer(t *testing.T) {
	srv := emulator.ForTest(t)
	env := bench.NewEnv(srv.ConfigForTest(t), emulator.DeployForTest(t, srv))
	ctx := context.Background()
	c, err := bench.NewClaims(ctx, env, false, 79_000_000)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 5
	r, err := bench.MeasureClaims(ctx, c, n)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.Provisioned()); got != n {
		t.Errorf("%d jobs timed at their provisioning call, want %d", got, n)
	}
	if r.ClaimerPerJob["secretsmanager.GetSecretValue"] == 0 {
		t.Errorf("claimer requests %v: no read of the App key's secret, want the claimer as wired", r.ClaimerPerJob)
	}
	if got := r.ProvisionerPerJob["SQS.SendMessage"]; got != 1 {
		t.Errorf("provisioner sends per job %g, want 1, counted apart", got)
	}
	if got := r.ClaimerPerJob["SQS.SendMessage"]; got != 0 {
		t.Errorf("claimer SendMessage per job %g, want the dispatch sends out of the job's figures", got)
	}
	if got, want := r.ClaimerItems[bench.JobItem], 2.0; got != want {
		t.Errorf("claimer requests on the job record per job %g, want %g (lease, claimed)", got, want)
	}
	if r.RateReads+r.RateWrites == 0 || r.ClaimerItems[bench.RateItem] != float64(r.RateReads+r.RateWrites)/n {
		t.Errorf("rate item: %d reads, %d writes, %g per job; want its requests counted apart from the job record's", r.RateReads, r.RateWrites, r.ClaimerItems[bench.RateItem])
	}
}

// TestFloor2IsTheDesignsTwoRequests: the second floor of the webhook
// section is exactly the two requests issue 11 allows a queued delivery,
// a conditional put (a second put of the same key is refused) and a send,
// so "handler / two bare requests" is our own cost over them.
func TestFloor2IsTheDesignsTwoRequests(t *testing.T) {
	srv := emulator.ForTest(t)
	env := bench.NewEnv(srv.ConfigForTest(t), emulator.DeployForTest(t, srv))
	w, err := bench.NewWebhook(t.Context(), env, nil, 3_000_000)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := env.Count.Snapshot()
	if err := w.Floor2(ctx, 1); err != nil {
		t.Fatal(err)
	}
	d := env.Count.Snapshot().Since(start)
	if d.Total() != 2 || d.Calls["DynamoDB.PutItem"] != 1 || d.Calls["SQS.SendMessage"] != 1 {
		t.Errorf("requests %v, want one DynamoDB.PutItem and one SQS.SendMessage", d.Calls)
	}
	if err := w.Floor2(ctx, 1); err == nil {
		t.Error("a second put of the same key was accepted; the floor's put must be conditional")
	}
}
