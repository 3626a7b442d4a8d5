package chaos

import (
	"sync"
	"sync/atomic"
	"time"
)

// Forced first events (Config.ForceFirst). A short run of a dozen jobs
// makes few draws of each event: at its rates a kill, a machine that never
// boots or a duplicate delivery may not happen at all, and the run would
// pass while proving nothing about that recovery. With ForceFirst the first
// of each happens for sure, whatever the draws; every later one is drawn as
// without it (the forced ones consume their draws too):
//
//   - the first external call faults (its kind drawn by the weights);
//   - the first claimer invocation is killed at its first call (a random
//     call index past an invocation's last call kills nothing);
//   - the first delivery of a planned job is sent twice;
//   - the first machine never boots, the second one's runner dies;
//   - the webhook outage begins with the first delivery of the first Plain
//     job planned at or after OutageAt (not at OutageAt by the clock) and
//     ends only once that delivery met it (and OutageWindow passed): a
//     Plain job sends nothing else, so only the redeliverer can bring it in.
//
// An injection switched off (a rate or window below zero) stays off.
type forced struct {
	kill, duplicate atomic.Bool // armed: the next one is forced
	// outage is the plan whose first delivery takes the endpoint down;
	// begun is closed when it has, met when that delivery was made.
	outage     *plan
	begun, met chan struct{}
	metOnce    sync.Once
}

// arm prepares the forced events of cfg (ForceFirst set) for plans, the
// first delivery of plan i planned at step × i.
func (f *forced) arm(cfg Config, in *Injector, fl *fleet, plans []*plan, step time.Duration) {
	if !cfg.ForceFirst {
		return
	}
	if cfg.FaultRate > 0 {
		in.FailNext()
	}
	f.kill.Store(cfg.KillRate > 0)
	f.duplicate.Store(cfg.DuplicateRate > 0)
	if cfg.NeverBootRate > 0 {
		fl.forced = append(fl.forced, fateNeverBoots)
	}
	if cfg.DieRate > 0 {
		fl.forced = append(fl.forced, fateDies)
	}
	if cfg.OutageWindow > 0 && len(plans) > 0 {
		f.outage = outagePlan(plans, step, cfg.OutageAt)
		f.begun, f.met = make(chan struct{}), make(chan struct{})
	}
}

// outagePlan is the first Plain plan starting at or after at, else the
// first plan starting then, else the last plan.
func outagePlan(plans []*plan, step, at time.Duration) *plan {
	var first *plan
	for i, p := range plans {
		if step*time.Duration(i) < at {
			continue
		}
		if p.Script == Plain {
			return p
		}
		if first == nil {
			first = p
		}
	}
	if first == nil {
		first = plans[len(plans)-1]
	}
	return first
}

// beginOutage takes the endpoint down before p's first delivery when p is
// the forced outage's plan.
func (r *run) beginOutage(p *plan) {
	if p != r.force.outage {
		return
	}
	r.down.Store(true)
	close(r.force.begun)
}

// sent notes that p's first delivery was made.
func (r *run) sent(p *plan) {
	if p != nil && p == r.force.outage {
		r.force.metOnce.Do(func() { close(r.force.met) })
	}
}
