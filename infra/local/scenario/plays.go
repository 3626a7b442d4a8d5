package scenario

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
)

// Installations and repositories of the scenarios.
const (
	instAcme   = 1
	instGlobex = 2
	repoPool   = "linux-x64" // rig.DefaultPools[0], scope repo
	orgPool    = "org-arm64" // rig.DefaultPools[1], scope org
)

var (
	repoLabels  = []string{"self-hosted", "linux", "x64"}
	orgLabels   = []string{"self-hosted", "linux", "arm64", "org"}
	otherLabels = []string{"self-hosted", "windows", "gpu"}
)

func claimed(name string, id int64, repo string, inst int64, pool string, labels []string, minAtt, maxAtt int) Case {
	runner := job.RunnerName(pool, id)
	return Case{
		Name: name,
		Job:  Job{ID: id, RunID: 9_000_000 + id, Repo: repo, Installation: inst, Labels: labels},
		Want: job.Claimed, MinAttempts: minAtt, MaxAttempts: maxAtt, Runner: runner, Ours: runner,
	}
}

func delivery(id int64, n int) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", id, n)
}

// Full is the `make run` scenario. In three phases, so that faults programmed on a GitHub route
// reach the job they are meant for:
//
//  1. ordinary jobs, a duplicate delivery, a label mismatch, and an organisation-pool job
//     whose JIT call fails twice with 502 (the only user of the org JIT route in this phase);
//  2. an organisation-pool job whose claimer is killed while GitHub holds its JIT call (the
//     runner gets registered, the answer never arrives): the reclaimer must take it back once
//     the lease expires and a new claimer must resolve the existing runner;
//  3. meanwhile, an installation whose rate limit is exhausted until a reset a few seconds
//     away: one job waits for the reset, another is cancelled (completed) while it waits.
func Full(ctx context.Context, p *Player) error {
	p.init()
	ordinary := []Case{
		claimed("ordinary", 1001, "acme/api", instAcme, repoPool, repoLabels, 1, 1),
		claimed("ordinary", 1002, "acme/api", instAcme, repoPool, repoLabels, 1, 1),
		claimed("ordinary", 1003, "acme/web", instAcme, repoPool, repoLabels, 1, 1),
	}
	for i := range ordinary {
		ordinary[i].MaxClaim = FastClaim
	}
	dup := claimed("duplicate delivery", 1004, "acme/api", instAcme, repoPool, repoLabels, 1, 1)
	dup.MaxClaim = FastClaim
	mismatch := Case{
		Name: "label mismatch", Want: NoRecord,
		Job: Job{ID: 1005, RunID: 9_001_005, Repo: "acme/api", Installation: instAcme, Labels: otherLabels},
	}
	flaky := claimed("JIT fails twice with 502", 1006, "acme/infra", instAcme, orgPool, orgLabels, 3, 3)
	killed := claimed("claimer killed mid-claim", 1007, "acme/infra", instAcme, orgPool, orgLabels, 1, 2)
	killed.MinClaim = Lease // recovered only once the lease expired: by the reclaimer
	limited := claimed("rate-limited installation", 2001, "globex/app", instGlobex, repoPool, repoLabels, 1, 2)
	cancelled := Case{
		Name: "cancelled while retry waits", Want: job.Done, MinAttempts: 0, MaxAttempts: 1,
		Runner: "hosted-runner-77", Ours: job.RunnerName(repoPool, 2002),
		Job: Job{ID: 2002, RunID: 9_002_002, Repo: "globex/app", Installation: instGlobex, Labels: repoLabels},
	}
	p.Add(ordinary...)
	p.Add(dup, mismatch, flaky, killed, limited, cancelled)

	gh := p.Rig.GitHub
	// Phase 1.
	p.Say("phase 1: ordinary jobs, a duplicate delivery, a label mismatch, JIT 502 twice")
	gh.Fail(ghfake.RouteOrgJIT, 2, ghfake.ServerError(http.StatusBadGateway))
	for _, c := range ordinary {
		if err := p.Deliver(ctx, c, "queued", delivery(c.Job.ID, 1), "", http.StatusAccepted); err != nil {
			return err
		}
	}
	if err := p.Deliver(ctx, dup, "queued", delivery(dup.Job.ID, 1), "", http.StatusAccepted); err != nil {
		return err
	}
	if err := p.Deliver(ctx, dup, "queued", delivery(dup.Job.ID, 1), "", http.StatusOK); err != nil {
		return err
	}
	if err := p.Deliver(ctx, mismatch, "queued", delivery(mismatch.Job.ID, 1), "", http.StatusOK); err != nil {
		return err
	}
	if err := p.Deliver(ctx, flaky, "queued", delivery(flaky.Job.ID, 1), "", http.StatusAccepted); err != nil {
		return err
	}
	if err := p.Until(ctx, "phase 1 jobs to settle", func(ctx context.Context) (bool, error) {
		return p.Settled(ctx, append(ordinary, dup, flaky)...)
	}); err != nil {
		return err
	}

	// Phase 2: the claimer holding job 1007 dies inside its JIT call.
	p.Say("phase 2: a claimer killed mid-claim (GitHub registers the runner, the answer is lost)")
	before := gh.Stats().Calls[ghfake.RouteOrgJIT]
	gh.Fail(ghfake.RouteOrgJIT, 1, ghfake.Slow(time.Minute).AfterEffect())
	if err := p.Deliver(ctx, killed, "queued", delivery(killed.Job.ID, 1), "", http.StatusAccepted); err != nil {
		return err
	}
	var worker int
	if err := p.Until(ctx, "job 1007's JIT call to reach GitHub", func(ctx context.Context) (bool, error) {
		if gh.Stats().Calls[ghfake.RouteOrgJIT] <= before {
			return false, nil
		}
		w, ok := p.Rig.ClaimerIndex(killed.Job.ID)
		worker = w
		return ok, nil
	}); err != nil {
		return err
	}
	if err := p.Until(ctx, "job 1007's runner to be registered", func(context.Context) (bool, error) {
		_, ok := gh.RunnerByName(killed.Runner)
		return ok, nil
	}); err != nil {
		return err
	}
	rec, _ := p.Rig.Store.Get(ctx, killed.Job.ID)
	p.Rig.Claimers[worker].Kill()
	p.Say("job %-6d %-28s killed claimer-%d while the job was %s (lease until +%s)", killed.Job.ID, "["+killed.Name+"]",
		worker+1, rec.State, Lease)
	p.Note("job 1007: claimer-%d was killed inside GitHub's JIT call; its batch stays invisible for the queue's visibility timeout (minutes), so the reclaimer recovers the job first here; otherwise its own message, when it comes back, takes over the expired lease.", worker+1)

	// Phase 3: rate limit on installation 2 until a reset a few seconds away.
	reset := time.Now().Add(4 * time.Second).Truncate(time.Second)
	p.Say("phase 3: installation %d rate-limited until %s (+%.0fs)", instGlobex, reset.Format("15:04:05"), time.Until(reset).Seconds())
	gh.SetRateLimit(instGlobex, 5000, 0, reset)
	if err := p.Deliver(ctx, limited, "queued", delivery(limited.Job.ID, 1), "", http.StatusAccepted); err != nil {
		return err
	}
	if err := p.Deliver(ctx, cancelled, "queued", delivery(cancelled.Job.ID, 1), "", http.StatusAccepted); err != nil {
		return err
	}
	if err := p.Until(ctx, "job 2002 to wait for a retry", func(ctx context.Context) (bool, error) {
		r, err := p.Rig.Store.Get(ctx, cancelled.Job.ID)
		if err != nil {
			return false, nil
		}
		return r.State == job.Queued && r.LastErrorClass != "", nil
	}); err != nil {
		return err
	}
	if err := p.Deliver(ctx, cancelled, "completed", delivery(cancelled.Job.ID, 2), cancelled.Runner, http.StatusAccepted); err != nil {
		return err
	}
	// It cannot have been claimed before the reset.
	p.Update(limited.Job.ID, func(c *Case) { c.MinClaim = reset.Sub(p.queuedAt[limited.Job.ID]) })
	return p.Until(ctx, "every job to settle", func(ctx context.Context) (bool, error) {
		return p.Settled(ctx, killed, limited, cancelled)
	})
}

// Short is the end-to-end test's scenario: the main paths in a few seconds. An ordinary job
// must be claimed within FastClaim, which only the webhook's own SQS send achieves.
func Short(ctx context.Context, p *Player) error {
	p.init()
	a := claimed("ordinary", 501, "acme/api", instAcme, repoPool, repoLabels, 1, 1)
	a.MaxClaim = FastClaim
	dup := claimed("duplicate delivery", 502, "acme/api", instAcme, repoPool, repoLabels, 1, 1)
	dup.MaxClaim = FastClaim
	flaky := claimed("JIT fails once with 502", 503, "acme/infra", instAcme, orgPool, orgLabels, 2, 2)
	flaky.MaxClaim = FastClaim
	mismatch := Case{
		Name: "label mismatch", Want: NoRecord,
		Job: Job{ID: 504, RunID: 9_000_504, Repo: "acme/api", Installation: instAcme, Labels: otherLabels},
	}
	p.Add(a, dup, flaky, mismatch)
	p.Rig.GitHub.Fail(ghfake.RouteOrgJIT, 1, ghfake.ServerError(http.StatusBadGateway))
	steps := []struct {
		c      Case
		n      int
		status int
	}{
		{a, 1, http.StatusAccepted},
		{dup, 1, http.StatusAccepted},
		{dup, 1, http.StatusOK},
		{flaky, 1, http.StatusAccepted},
		{mismatch, 1, http.StatusOK},
	}
	for _, s := range steps {
		if err := p.Deliver(ctx, s.c, "queued", delivery(s.c.Job.ID, s.n), "", s.status); err != nil {
			return err
		}
	}
	return p.Until(ctx, "every job to settle", func(ctx context.Context) (bool, error) {
		return p.Settled(ctx, a, dup, flaky)
	})
}
