package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestFinalSweepWaitsOutABlockedInstallation: a throttle fault near the end
// of a run blocks its installation for seconds (a secondary limit's
// Retry-After, doubled on a repeat), and every janitor pass meanwhile skips
// the installation. On a schedule the pass after the block cleans up; the
// final sweep stands in for those passes and must wait for it too, or the
// idle runner of a job taken elsewhere, and its machine, count as orphans
// (TestRunShort failed so once in CI: "runner … online, busy false, still
// registered", "1 machines still up").
func TestFinalSweepWaitsOutABlockedInstallation(t *testing.T) {
	t.Parallel()
	r := setupOn(t, emulator.OwnForTest(t), Config{Seed: 9, NeverBootRate: -1, DieRate: -1, BootDelay: 100 * time.Millisecond,
		RunTime: 100 * time.Millisecond, StartGrace: 500 * time.Millisecond, Settle: time.Minute})
	ctx := context.Background()
	j := testJob(7_200_000_001)
	j.Labels = []string{"self-hosted", "linux"}
	p := &plan{Job: j, Pool: PoolEC2, Script: Finished, status: "queued", rnd: rand.New(rand.NewPCG(3, 4))}
	r.plans, r.byJob, r.fleet, r.simCtx = []*plan{p}, map[int64]*plan{j.ID: p}, newFleet(1), ctx
	r.setGitHubJob(p, "queued", "", "", 0)
	if !r.deliver(ctx, Delivery{GUID: fmt.Sprintf("q-%d", j.ID), Event: "workflow_job", Body: Payload(j, "queued", "")}) {
		t.Fatal("queued delivery refused")
	}

	// Another runner takes the job before ours boots: ours comes online
	// idle, for the janitor.
	const other = "someone-elses-runner"
	if !p.take(other, false) {
		t.Fatal("the job was not queued at GitHub")
	}
	r.setGitHubJob(p, "in_progress", "", other, 0)
	c, _, err := r.newClaimer(0)
	if err != nil {
		t.Fatal(err)
	}
	r.claimOne(t, c)
	r.fleet.wg.Wait()
	if n := r.fleet.online.Load(); n != 1 {
		t.Fatalf("%d runners of ours came online, want 1", n)
	}
	r.sendDone(ctx, p, "in_progress", other)
	p.complete()
	r.setGitHubJob(p, "completed", "success", other, 0)
	r.sendDone(ctx, p, "completed", other)
	if rec := r.get(t, j.ID); rec.State != job.Done {
		t.Fatalf("record: got %s, want done", rec.State)
	}
	if rep, err := r.account(ctx); err != nil || rep.OrphanRunners != 1 || rep.OrphanMachines != 1 {
		t.Fatalf("before the sweep: %s (err %v), want our idle runner and its machine up", rep.Line(), err)
	}

	// A secondary limit blocks the installation, shared as a claimer or
	// the janitor itself shares one.
	rates := ratelimit.NewTracker(r.stores[fnClaimer], ratelimit.DefaultPersistRule(), time.Now)
	block := ratelimit.Block(time.Now(), 2*time.Second)
	rates.Observe(j.InstallationID, block)
	if saved, err := rates.Persist(ctx, j.InstallationID); err != nil || !saved {
		t.Fatalf("block not shared: saved %v, err %v", saved, err)
	}

	r.finalSweep(ctx)
	if now := time.Now(); now.Before(block.BlockedUntil) {
		t.Errorf("the sweep ended at %s, before the block it had to wait out ended (%s)", now.Format(time.RFC3339Nano), block.BlockedUntil.Format(time.RFC3339Nano))
	}
	rep, err := r.account(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OrphanRunners != 0 || rep.OrphanMachines != 0 || rep.Elsewhere != 1 {
		t.Errorf("after the sweep: %s %v; want the job run elsewhere, nothing of ours left", rep.Line(), rep.LostJobs)
	}
}
