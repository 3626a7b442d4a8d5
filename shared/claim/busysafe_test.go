package claim_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestAbandonCleanupIsBusySafe: a job abandoned past its maximum age takes
// back what an earlier attempt left, but a machine is ended only once
// GitHub said the job's runner is gone (absent, or deleted now). A runner
// that is busy (it took a job: perhaps this one, whose delivery was lost)
// keeps its machine, and so does one whose state GitHub did not tell; only
// its stored configuration goes.
func TestAbandonCleanupIsBusySafe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// arm sets the earlier attempt's runner up and what GitHub answers.
		arm          func(h *harness, runner string)
		wantMachines int
		wantRunner   bool
	}{
		{name: "runner busy: machine kept", arm: func(h *harness, runner string) {
			if err := h.gh.SetRunner(runner, "online", true); err != nil {
				panic(err)
			}
		}, wantMachines: 1, wantRunner: true},
		{name: "runner state unknown: machine kept", arm: func(h *harness, runner string) {
			h.gh.Fail(ghfake.RouteRepoRunners, 0, ghfake.ServerError(http.StatusBadGateway))
		}, wantMachines: 1, wantRunner: true},
		{name: "runner idle: deleted, machine ended", arm: func(h *harness, runner string) {
			if err := h.gh.SetRunner(runner, "online", false); err != nil {
				panic(err)
			}
		}, wantMachines: 0, wantRunner: false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			id := int64(9600 + i)
			runner := job.RunnerName("linux", id)
			ctx := context.Background()
			h.seed(t, id)
			// The first attempt registers the runner and starts its machine,
			// then its claimer dies before it records anything.
			h.spy.set(nil, func(int) { h.crash() })
			h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
			h.spy.set(nil, nil)
			if h.instances(id) != 1 || len(h.gh.Runners()) != 1 {
				t.Fatalf("after the first attempt: %d machines, runners %v; want one of each", h.instances(id), h.gh.Runners())
			}
			// The reclaimer takes the lease back; the job keeps failing until
			// it is past its maximum age.
			r := h.get(t, id)
			h.clock.Set(job.FromMillis(r.LeaseExpiresAt).Add(time.Second))
			taken, err := h.store.TakeBack(ctx, r, job.Queued, h.clock.Now(), "lease expired", h.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(91 * time.Minute)
			if err := h.queue.Send(ctx, job.Message{JobID: id, Version: taken.Version, Attempt: taken.Attempt}, 0); err != nil {
				t.Fatal(err)
			}
			tt.arm(h, runner)
			h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))

			h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
			if got := h.get(t, id); got.State != job.Abandoned {
				t.Fatalf("record %s (%s), want abandoned", got.State, got.LastError)
			}
			if got := h.instances(id); got != tt.wantMachines {
				t.Errorf("%d live machines after the abandon, want %d", got, tt.wantMachines)
			}
			if _, ok := h.gh.RunnerByName(runner); ok != tt.wantRunner {
				t.Errorf("runner %s present %v, want %v", runner, ok, tt.wantRunner)
			}
			if h.hasParameter(runner) {
				t.Errorf("the runner's configuration is still stored: an abandoned job's config must go")
			}
		})
	}
}
