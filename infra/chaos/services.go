package chaos

import (
	"context"
	"net/http"
	"time"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/redeliver"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// The scheduled functions besides the reclaimer, wired as their mains wire
// them (functions/janitor, functions/redeliverer) and run on compressed
// schedules. Their calls carry faults like the claimer's: GitHub's through
// the fault middleware, the table's through the DynamoDB decorator, the
// janitor's EC2 and SSM calls through the Provisioner and Leftovers
// decorators. The last janitor pass (finalSweep) runs with faults off.

// Function names of the scheduled functions, as callers in the figures.
const (
	fnJanitor     = "janitor"
	fnRedeliverer = "redeliverer"
)

// newRedeliverer builds the redeliverer: the App client with the App
// budget's rate-reading transport, the table for its cursor and counts.
func (r *run) newRedeliverer() (*redeliver.Redeliverer, error) {
	budget := &redeliver.AppBudget{}
	gh, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: r.appKey, BaseURL: r.ghURL,
		WrapApp: func(base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, 0, budget, time.Now)
		}})
	if err != nil {
		return nil, err
	}
	return redeliver.New(redeliver.Config{
		GitHub: gh, Store: r.stores[fnRedeliverer], Rate: budget.Reading,
		MaxAttempts: r.cfg.RedeliverAttempts, Spacing: r.cfg.RedeliverEvery, MinRemaining: redeliver.DefaultMinRemaining,
		Budget: r.cfg.RedeliverEvery * 4, Now: time.Now, Log: r.log,
		Metrics: obs.NewMetrics(r.logs, map[string]string{"function": fnRedeliverer}, time.Now),
	})
}

// newJanitor builds the janitor with compressed graces and the RUNNER_POOLS
// deployed now.
func (r *run) newJanitor() (*janitor.Janitor, error) {
	_, pools := r.currentPools()
	return r.janitorWith(pools)
}

func (r *run) janitorWith(pools []pool.Pool) (*janitor.Janitor, error) {
	rates := ratelimit.NewTracker(r.stores[fnJanitor], ratelimit.DefaultPersistRule(), time.Now)
	gh, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: r.appKey, BaseURL: r.ghURL,
		Wrap: func(inst int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, inst, rates, time.Now)
		}})
	if err != nil {
		return nil, err
	}
	params := ssmapi.New(r.world.AWS, provisiontest.StrictSSM)
	return janitor.New(janitor.Config{
		Store: r.stores[fnJanitor], GitHub: gh, Rates: rates, Provisioner: &Provisioner{Caller: fnJanitor, Next: r.reg, In: r.inj},
		Leftovers: &Leftovers{Caller: fnJanitor, Next: provision.Leftovers{Instances: r.ec2, Parameters: params, Stack: Stack}, In: r.inj},
		Pools:     pools, UnknownGrace: r.cfg.StartGrace * 5, ConfigGrace: r.cfg.StartGrace,
		MaxCalls: 1000, Budget: r.cfg.JanitorEvery * 4, Now: time.Now, Rand: random.New(r.cfg.Seed*11 + 3), Logger: r.log,
		Metrics: obs.NewMetrics(r.logs, map[string]string{"function": fnJanitor}, time.Now),
	})
}

// reclaimGitHub is the reclaimer's GitHub client and shared rate reading,
// for the liveness check and the clean-up of abandoned attempts.
func (r *run) reclaimGitHub() (reclaim.GitHub, reclaim.Rates, error) {
	gh, rates, err := r.cfg.GitHub(r.ghURL, appID, r.appKey, r.stores[fnReclaimer])
	if err != nil {
		return nil, nil, err
	}
	return gh, rates, nil
}

// cleanup adapts the provisioners to the reclaimer's port, as
// functions/reclaimer does.
func cleanup(reg provision.Registry) reclaim.Provisioner {
	return reclaim.ProvisionerFunc(func(ctx context.Context, l reclaim.Leftover) error {
		return reg.Cleanup(ctx, provision.Request{JobID: l.JobID, RunID: l.RunID, Repo: l.Repo, Pool: l.Pool, RunnerName: l.RunnerName, KeepMachines: l.KeepMachines})
	})
}

// every runs pass on a ticker until ctx ends, each pass bounded by limit.
func every(ctx context.Context, period, limit time.Duration, pass func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
		pass(pctx)
		cancel()
	}
}

// redeliverLoop runs the redeliverer every RedeliverEvery.
func (r *run) redeliverLoop(ctx context.Context) {
	rd, err := r.newRedeliverer()
	if err != nil {
		panic(err) // a wiring mistake of this file
	}
	every(ctx, r.cfg.RedeliverEvery, passLimit(r.cfg.RedeliverEvery), func(ctx context.Context) { _, _ = rd.Run(ctx) })
}

// janitorLoop runs the janitor every JanitorEvery.
func (r *run) janitorLoop(ctx context.Context) {
	gen, _ := r.currentPools()
	j, err := r.newJanitor()
	if err != nil {
		panic(err) // a wiring mistake of this file
	}
	every(ctx, r.cfg.JanitorEvery, passLimit(r.cfg.JanitorEvery), func(ctx context.Context) {
		if due, _ := r.stale(gen, 1); due { // a deploy: the next pass runs the new version
			gen, _ = r.currentPools()
			if j, err = r.newJanitor(); err != nil {
				panic(err) // a wiring mistake of this file
			}
		}
		_, _ = j.Run(ctx)
	})
}

// passLimit is the invocation deadline of a scheduled pass: five periods
// plus the 5 s the scheduled functions keep free before their deadline
// (janitor.DefaultReserve, reclaim.DefaultReserve, the redeliverer's), or
// a compressed schedule (the short test's 0.5 s) leaves them no time.
func passLimit(period time.Duration) time.Duration { return 5*period + janitor.DefaultReserve }

// outage takes the webhook endpoint down for OutageWindow, OutageAt into
// the ramp (or with the forced outage plan's first delivery, until it was
// made: force.go): GitHub's deliveries fail unreached and sit in its log.
func (r *run) outage(ctx context.Context) {
	if r.force.outage != nil {
		select {
		case <-r.force.begun:
		case <-ctx.Done():
			return
		}
	} else {
		if !wait(ctx, r.cfg.OutageAt) {
			return
		}
		r.down.Store(true)
	}
	r.progress("webhook endpoint down for %s", r.cfg.OutageWindow)
	wait(ctx, r.cfg.OutageWindow)
	if r.force.outage != nil {
		select {
		case <-r.force.met:
		case <-ctx.Done():
		}
	}
	r.down.Store(false)
	r.progress("webhook endpoint back")
}

// finalSweep is the janitor's next passes after the storm: faults off, two
// passes (a runner deleted in one pass frees its machine in the same pass;
// the second catches what the first found mid-change), and more while a
// pass keeps spares or leaves work for later. A pass keeps the idle runner
// of a job done within its pool's start grace (another job may be waiting
// for it: shared/janitor); on a schedule a later pass deletes it, so a run
// that settled inside that grace waits it out here instead of counting the
// spare as an orphan. A pass also skips an installation whose shared rate
// state is exhausted or blocked (a throttle fault near the end of the run
// blocks it for seconds, doubled on a repeat) and leaves an Incomplete
// pass's rest to the next: on a schedule the pass after the block does it,
// so the sweep waits for that too, at most Settle.
func (r *run) finalSweep(ctx context.Context) {
	for _, t := range Targets {
		r.inj.SetRate(t, 0)
	}
	j, err := r.newJanitor()
	if err != nil {
		r.progress("final janitor pass: %v", err)
		return
	}
	deadline := time.Now().Add(r.cfg.Settle)
	for pass, spareWaits := 0, 0; ; pass++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		rep, err := j.Run(pctx)
		cancel()
		halted := rep.RateLimited+rep.SkippedRateLimited > 0 || rep.Incomplete
		r.progress("final janitor pass: runners_deleted=%d machines_ended=%d configs_deleted=%d spares_kept=%d rate_limited=%d incomplete=%v errors=%d err=%v",
			rep.RunnersDeleted, rep.MachinesEnded, rep.ConfigsDeleted, rep.SparesKept, rep.RateLimited+rep.SkippedRateLimited, rep.Incomplete, rep.Errors, err)
		var next time.Duration
		switch {
		case halted:
			if !time.Now().Before(deadline) {
				r.progress("final janitor pass: an installation is still rate limited, or the pass incomplete, after %s; what it holds stays", r.cfg.Settle)
				return
			}
			next = finalHaltedWait
		case rep.SparesKept > 0:
			if spareWaits == finalSpareRounds {
				return
			}
			spareWaits++
			next = r.cfg.StartGrace
		case pass >= 1:
			return
		}
		if !wait(ctx, next) {
			return
		}
	}
}

// finalSpareRounds bounds the final sweep's waits for spares.
const finalSpareRounds = 3

// finalHaltedWait is how often the final sweep looks again at an
// installation its last pass skipped for its rate state (a block lasts
// whole seconds).
const finalHaltedWait = 500 * time.Millisecond

// githubInstallations sets the App's installations at the stand-in, so the
// janitor's listings find our runners.
func (r *run) githubInstallations() {
	for i, owner := range Owners {
		r.gh.SetInstallation(Installations[i], owner, true, "app-0", "app-1", "app-2", "app-3")
	}
}
