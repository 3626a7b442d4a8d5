package chaos

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

// The rename scenario (Config.RenameAt, -rename): partway through the run
// the linux pool is renamed, same labels, new name (PoolRenamed), in the
// RUNNER_POOLS of every function built from then on, and optionally rolled
// back later (Config.RenameBackAt, -rename-back). It is a deploy: a new
// version of each function, while instances already running keep the old
// list for a while (Config.RenameLag), as Lambda lets warm environments
// finish on the version they started with:
//
//   - the webhook: a delivery within the lag of a change is answered by
//     the previous version or the new one, at random (the same delivery,
//     sent twice, may meet both);
//   - the claimers: each poller switches to a new instance (its own GitHub
//     client, rate memory, instance id) at its own moment within the lag,
//     between batches; a killed or timed-out instance's replacement takes
//     the newest list at once;
//   - the reclaimers and the janitor: each loop rebuilds its function
//     after its own share of the lag, between passes;
//   - the final janitor sweep is built with the list in force at the end.
//
// The checks stay those of every run; see the report's figures.

// PoolRenamed is the linux pool's name while the rename is in force.
const PoolRenamed = "linux-next"

// poolsVersion is one deployed RUNNER_POOLS: gen counts the deploys.
type poolsVersion struct {
	gen   int
	pools []pool.Pool
	hook  *webhook.Handler
	at    time.Time
}

// deploys holds the current RUNNER_POOLS and the one before it.
type deploys struct {
	mu        sync.Mutex
	cur, prev *poolsVersion
}

func (d *deploys) now() (cur, prev *poolsVersion) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur, d.prev
}

func (d *deploys) set(v *poolsVersion) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		v.gen = d.cur.gen + 1
	}
	d.prev, d.cur = d.cur, v
}

// currentPools is the RUNNER_POOLS a function built now gets.
func (r *run) currentPools() (gen int, pools []pool.Pool) {
	cur, _ := r.deploys.now()
	return cur.gen, cur.pools
}

// deploy makes pools the RUNNER_POOLS of every function built from now on,
// with a webhook version of their own.
func (r *run) deploy(pools []pool.Pool) error {
	h, err := webhook.New(webhook.Config{Secrets: [][]byte{Secret}, Pools: pools, AllowedOwners: Owners,
		Store: r.stores[fnWebhook], Queue: r.queues[fnWebhook], Now: time.Now, Logger: r.log})
	if err != nil {
		return err
	}
	r.deploys.set(&poolsVersion{pools: pools, hook: h, at: time.Now()})
	return nil
}

// webhookFor is the webhook version that answers a delivery now: within
// the lag of a deploy, the previous one or the new one, at random.
func (r *run) webhookFor() *webhook.Handler {
	cur, prev := r.deploys.now()
	if prev != nil && time.Since(cur.at) < r.cfg.RenameLag && r.inj.Intn(2) == 0 {
		return prev.hook
	}
	return cur.hook
}

// stale reports whether an instance built with RUNNER_POOLS generation gen
// is due for replacement: a newer list was deployed at least share of the
// lag ago (share in [0, 1]: each instance's own moment).
func (r *run) stale(gen int, share float64) (bool, int) {
	cur, _ := r.deploys.now()
	if cur.gen == gen {
		return false, gen
	}
	return time.Since(cur.at) >= time.Duration(share*float64(r.cfg.RenameLag)), cur.gen
}

// renamed is pools with the linux pool named name.
func renamed(pools []pool.Pool, name string) []pool.Pool {
	out := slices.Clone(pools)
	for i := range out {
		if out[i].Name == PoolEC2 || out[i].Name == PoolRenamed {
			out[i].Name = name
		}
	}
	return out
}

// renames deploys the rename at RenameAt and its rollback at RenameBackAt
// (each from the run's start; zero: never).
func (r *run) renames(ctx context.Context, started time.Time) {
	for _, step := range []struct {
		at   time.Duration
		name string
	}{{r.cfg.RenameAt, PoolRenamed}, {r.cfg.RenameBackAt, PoolEC2}} {
		if step.at <= 0 {
			return
		}
		if !wait(ctx, time.Until(started.Add(step.at))) {
			return
		}
		if err := r.deploy(renamed(r.pools, step.name)); err != nil {
			r.progress("rename: %v", err)
			return
		}
		r.progress("deploy: pool %s is now named %s (running instances follow within %s)", PoolEC2, step.name, r.cfg.RenameLag)
	}
}

// runnerPools are the pool names a runner of this run may be named after.
var runnerPools = []string{PoolEC2, PoolDispatch, PoolRenamed}
