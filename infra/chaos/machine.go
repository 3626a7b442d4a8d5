package chaos

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghclaim/ghclaim/shared/ec2api"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/random"
)

// The machines. A machine exists from the moment the provisioner carried
// out a Provision (an EC2 instance holding the registration's JIT config in
// SSM, or a dispatch message a worker runs). Each registration's machine
// draws one fate:
//
//   - never boots (NeverBootRate): the runner never comes online; the
//     instance stays up until the reclaimer's liveness check (after the
//     pool's runner-start grace) or the janitor ends it;
//   - its runner dies before taking its job (DieRate): online for a moment,
//     then offline for good, the machine still up;
//   - boots: after BootDelay (±50 %) the runner comes online and GitHub
//     assigns the job to it when the job is still queued (a job already
//     cancelled or taken elsewhere leaves the runner online and idle, for
//     the janitor). The job runs for RunTime, GitHub sends in_progress and
//     completed, the ephemeral runner deregisters and its machine powers off.
//
// A machine that boots after its registration was deleted (a new attempt,
// the janitor) or after its instance was ended brings nothing online: the
// config no longer registers a runner. GitHub here assigns a job only to
// the runner made for it; a runner taken by another job is left to the
// tests of shared/reclaim.

// fate is what a machine does.
type fate string

const (
	fateBoots      fate = "boots"
	fateNeverBoots fate = "never_boots"
	fateDies       fate = "dies"
)

// fleet tracks the machines of a run.
type fleet struct {
	rnd *random.Locked

	mu sync.Mutex
	// forced are the fates of the next machines, whatever their draws
	// (Config.ForceFirst).
	forced []fate
	seen   map[int64]bool // registrations (runner ids) that got a machine
	fates  map[fate]int
	// active counts machines still doing something (booting, running a
	// job): the run settles only when none is.
	active atomic.Int64
	wg     sync.WaitGroup
	// online counts machines whose runner came online, ran those that
	// then took their job: a machine whose registration was deleted
	// before it booted (a later attempt regenerated it) counts in neither.
	online, ran atomic.Int64
}

func newFleet(seed uint64) *fleet {
	return &fleet{rnd: random.New(seed), seen: map[int64]bool{}, fates: map[fate]int{}}
}

// draw gives registration id its machine's fate, once: a provisioning that
// found the machine already there (EC2 ClientToken, job tag) starts nothing
// new. It reports false for a registration already seen.
func (f *fleet) draw(id int64, neverBoot, die float64) (fate, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen[id] {
		return "", false
	}
	f.seen[id] = true
	x := f.rnd.Float64()
	fa := fateBoots
	switch {
	case x < neverBoot:
		fa = fateNeverBoots
	case x < neverBoot+die:
		fa = fateDies
	}
	if len(f.forced) > 0 {
		fa, f.forced = f.forced[0], f.forced[1:]
	}
	f.fates[fa]++
	return fa, true
}

// count returns how many machines drew fa.
func (f *fleet) count(fa fate) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fates[fa]
}

// provisioned is the Provisioner decorator's hook: req's config now sits
// on a machine (res).
func (r *run) provisioned(req provision.Request, res provision.Result) {
	r.machines.provisioned(req)
	id := agentID(req.JITConfig)
	p := r.planOf(req.JobID)
	if id == 0 || p == nil || r.fleet == nil {
		return
	}
	fa, ok := r.fleet.draw(id, r.cfg.NeverBootRate, r.cfg.DieRate)
	if !ok {
		return
	}
	r.fleet.active.Add(1)
	r.fleet.wg.Add(1)
	go func() {
		defer r.fleet.wg.Done()
		defer r.fleet.active.Add(-1)
		r.machine(r.simCtx, p, id, res.InstanceID, fa)
	}()
}

// planOf returns the plan of job id, nil for a job not planned.
func (r *run) planOf(id int64) *plan {
	return r.byJob[id]
}

// machine plays one machine's life (see above).
func (r *run) machine(ctx context.Context, p *plan, runnerID int64, instanceID string, fa fate) {
	// One line per machine in the run's log says what became of it, so a
	// job's replacements can be read back to their machines' fates.
	end := "ran its job"
	defer func() {
		r.log.Info("chaos machine", slog.Int64("job_id", p.Job.ID), slog.Int64("runner_id", runnerID),
			slog.String("instance_id", instanceID), slog.String("fate", string(fa)), slog.String("end", end))
	}()
	if fa == fateNeverBoots {
		end = "never booted"
		return
	}
	spread := time.Duration(p.rndDraw(int64(r.cfg.BootDelay) + 1))
	if !wait(ctx, r.cfg.BootDelay/2+spread) {
		end = "run over before it booted"
		return
	}
	if instanceID != "" && !r.instanceLive(ctx, instanceID) {
		end = "instance ended before it booted"
		return
	}
	rn, ok := r.runnerByID(runnerID)
	if !ok {
		end = "registration deleted before it booted" // the config registers nothing
		return
	}
	if r.gh.SetRunnerByID(runnerID, "online", false) != nil {
		end = "runner gone at boot"
		return
	}
	r.fleet.online.Add(1)
	if fa == fateDies {
		end = "runner died"
		if wait(ctx, 200*time.Millisecond) {
			_ = r.gh.SetRunnerByID(runnerID, "offline", false)
		}
		return
	}
	if !p.assign(rn.Name) {
		end = "online, job not assignable" // cancelled or taken elsewhere: idle, the janitor's
		return
	}
	r.fleet.ran.Add(1)
	_ = r.gh.SetRunnerByID(runnerID, "online", true)
	r.setGitHubJob(p, "in_progress", "", rn.Name, runnerID)
	r.sendDone(ctx, p, "in_progress", rn.Name)
	wait(ctx, r.cfg.RunTime/2+time.Duration(p.rndDraw(int64(r.cfg.RunTime)+1)))
	r.setGitHubJob(p, "completed", "success", rn.Name, runnerID)
	p.complete()
	r.sendDone(ctx, p, "completed", rn.Name)
	// The ephemeral runner deregisters; the boot script powers off.
	r.gh.RemoveRunner(runnerID)
	if instanceID != "" {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, _ = r.ec2.TerminateInstances(tctx, &ec2api.TerminateInstancesInput{InstanceIDs: []string{instanceID}})
		cancel()
	}
}

// runnerByID finds a registered runner by id.
func (r *run) runnerByID(id int64) (ghfake.Runner, bool) {
	for _, rn := range r.gh.Runners() {
		if rn.ID == id {
			return rn, true
		}
	}
	return ghfake.Runner{}, false
}

// instanceLive reports whether the EC2 instance is pending or running
// (fault-free: the machine itself asks nobody; this is the simulation's
// view of the world). An error counts as live.
func (r *run) instanceLive(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out, err := r.ec2.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{InstanceIDs: []string{id}})
	if err != nil {
		return true
	}
	for _, res := range out.Reservations {
		for _, in := range res.Instances {
			if in.State.Name == ec2api.StatePending || in.State.Name == ec2api.StateRunning {
				return true
			}
		}
	}
	return false
}

// setGitHubJob is GitHub's own record of p's job (what the reclaimer's
// liveness check reads).
func (r *run) setGitHubJob(p *plan, status, conclusion, runner string, runnerID int64) {
	owner, repo, _ := strings.Cut(p.Job.Repo, "/")
	r.gh.SetJob(owner, repo, ghfake.Job{ID: p.Job.ID, RunID: p.Job.RunID, Name: "build", Status: status, Conclusion: conclusion,
		Labels: p.Job.Labels, RunnerName: runner, RunnerID: runnerID})
}

// sendDone sends an in_progress or completed delivery of p's job.
func (r *run) sendDone(ctx context.Context, p *plan, action, runner string) {
	d := Delivery{GUID: p.guid(), Event: "workflow_job", Body: Payload(p.Job, action, runner)}
	p.mu.Lock()
	p.doneGUIDs = append(p.doneGUIDs, d.GUID)
	p.mu.Unlock()
	r.send(ctx, p, d)
}
