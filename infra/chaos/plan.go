package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
)

// Script is what GitHub sends for one job, in which order.
type Script string

// Scripts, with their share of the jobs.
const (
	// Plain (55 %): queued; nothing else arrives while we watch.
	Plain Script = "plain"
	// Finished (20 %): queued; a runner (ours when it is registered by
	// then) takes it: in_progress, then completed.
	Finished Script = "finished"
	// Cancelled (10 %): queued, then completed with no runner.
	Cancelled Script = "cancelled"
	// Early (10 %): in_progress (another runner took it) arrives and is
	// answered before queued; the job must never get a runner of ours.
	Early Script = "early"
	// Renamed (5 %): queued twice under two delivery GUIDs (a manual
	// redelivery); the job record dedups it.
	Renamed Script = "renamed"
)

// Owners are the allowed repository owners; Installations their App
// installations, in the same order.
var (
	Owners        = []string{"acme", "globex", "initech"}
	Installations = []int64{101, 102, 103}
)

// plan is one job of the run and what happened to its deliveries.
type plan struct {
	Job    Job
	Pool   string
	Script Script
	Start  time.Duration
	rnd    *rand.Rand

	mu sync.Mutex
	// doneFirst: a done event was answered 2xx before queued was first sent.
	doneFirst bool
	// sawDone: an in_progress or completed delivery was answered 2xx.
	sawDone bool
	// queuedOK: a queued delivery was answered 2xx.
	queuedOK bool
}

// Plan draws n jobs from rnd: ids, repos, pools and scripts.
func Plan(rnd *random.Locked, n int) []*plan {
	out := make([]*plan, n)
	base := int64(7_000_000_000) + rnd.Int64N(1_000_000)*1000
	for i := range out {
		o := rnd.IntN(len(Owners))
		j := Job{
			ID: base + int64(i), RunID: 90_000_000 + int64(i/3), Repo: fmt.Sprintf("%s/app-%d", Owners[o], rnd.IntN(4)),
			InstallationID: Installations[o], Private: true,
		}
		p := &plan{Job: j, Pool: PoolEC2, rnd: rand.New(rand.NewPCG(rnd.Uint64(), uint64(j.ID)))}
		if rnd.IntN(3) == 0 {
			p.Pool = PoolDispatch
			j.Labels = []string{"self-hosted", "GPU"}
		} else {
			j.Labels = []string{"self-hosted", "linux", "X64"}[:2+rnd.IntN(2)]
		}
		p.Job = j
		switch x := rnd.IntN(100); {
		case x < 55:
			p.Script = Plain
		case x < 75:
			p.Script = Finished
		case x < 85:
			p.Script = Cancelled
		case x < 95:
			p.Script = Early
		default:
			p.Script = Renamed
		}
		out[i] = p
	}
	return out
}

// maxRedeliveries bounds how often a delivery answered 5xx is redelivered
// (the operator's "Redeliver", or the App's redelivery job).
const maxRedeliveries = 30

// deliverAll plays every plan's script, plus noise that must leave no
// record, and returns when every delivery has been answered.
func (r *run) deliverAll(ctx context.Context) {
	var wg sync.WaitGroup
	step := r.cfg.Ramp / time.Duration(len(r.plans))
	for i, p := range r.plans {
		p.Start = step * time.Duration(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if wait(ctx, p.Start) {
				r.play(ctx, p)
			}
		}()
	}
	for i := range len(r.plans)/10 + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if wait(ctx, step*time.Duration(i*10)) {
				r.noise(ctx, i)
			}
		}()
	}
	wg.Wait()
}

// play sends p's deliveries in its script's order.
func (r *run) play(ctx context.Context, p *plan) {
	guid := func() string {
		return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", p.rnd.Uint32(), p.rnd.IntN(1<<16), p.rnd.IntN(1<<12), p.rnd.IntN(1<<12), p.rnd.Int64N(1<<48))
	}
	pause := func(max time.Duration) bool { return wait(ctx, time.Duration(p.rnd.Int64N(int64(max)))) }
	queued := func() {
		if r.send(ctx, p, Delivery{GUID: guid(), Event: "workflow_job", Body: Payload(p.Job, "queued", "")}) {
			p.mu.Lock()
			p.queuedOK = true
			p.mu.Unlock()
		}
	}
	done := func(action, runner string) bool {
		ok := r.send(ctx, p, Delivery{GUID: guid(), Event: "workflow_job", Body: Payload(p.Job, action, runner)})
		if ok {
			p.mu.Lock()
			p.sawDone = true
			p.mu.Unlock()
		}
		return ok
	}
	other := fmt.Sprintf("hosted-%d", p.Job.ID%97)
	switch p.Script {
	case Plain:
		queued()
	case Renamed:
		queued()
		if pause(2 * time.Second) {
			queued()
		}
	case Cancelled:
		queued()
		if pause(3 * time.Second) {
			done("completed", "")
		}
	case Finished:
		queued()
		if !pause(6 * time.Second) {
			return
		}
		runner := r.takeJob(p, other)
		done("in_progress", runner)
		if pause(2 * time.Second) {
			done("completed", runner)
		}
	case Early:
		if done("in_progress", other) {
			p.mu.Lock()
			p.doneFirst = true
			p.mu.Unlock()
		}
		queued()
		if pause(time.Second) {
			done("completed", other)
		}
	}
}

// takeJob is GitHub starting p's job: it picks the runner that takes it,
// ours when it is registered and a machine was provisioned with that
// registration's config (it is online and busy from now on), else other.
// A registration without a machine never comes online: were it put to work
// here, a claim attempt landing before the in_progress delivery would
// rightly reuse the busy runner, and the accounting would find the job
// claimed with a runner and no machine, a loss made by the simulation.
func (r *run) takeJob(p *plan, other string) string {
	ours := job.RunnerName(p.Pool, p.Job.ID)
	if rn, ok := r.gh.RunnerByName(ours); ok && r.machines.has(rn.ID) {
		_ = r.gh.SetRunner(ours, "online", true)
		return ours
	}
	return other
}

// noise sends deliveries the webhook must answer without recording a job:
// a label no pool serves, an owner not allowed, a public repository, a
// waiting job, a ping. Their job ids are below every planned job's.
func (r *run) noise(ctx context.Context, i int) {
	j := Job{ID: 1_000_000 + int64(i), RunID: 1, Repo: "acme/app-0", InstallationID: Installations[0], Labels: []string{"ubuntu-latest"}, Private: true}
	action := "queued"
	switch i % 5 {
	case 1:
		j.Repo, j.Labels = "evil/app", []string{"self-hosted", "linux"}
	case 2:
		j.Private, j.Labels = false, []string{"self-hosted", "linux"}
	case 3:
		action, j.Labels = "waiting", []string{"self-hosted", "linux"}
	case 4:
		r.send(ctx, nil, Delivery{GUID: fmt.Sprintf("ping-%d", i), Event: "ping", Body: []byte(`{"zen":"Keep it logically awesome.","hook_id":4242}`)})
		return
	}
	r.send(ctx, nil, Delivery{GUID: fmt.Sprintf("noise-%d", i), Event: "workflow_job", Body: Payload(j, action, "")})
}

// NoiseIDs reports whether id is a noise job's id.
func noiseID(id int64) bool { return id < 2_000_000 }

// send delivers d until it is answered 2xx (GitHub does not retry; the
// operator redelivers failed deliveries, which is what the loop stands
// for), and now and then delivers it a second time, concurrently, as
// GitHub does. It reports whether d was answered 2xx.
func (r *run) send(ctx context.Context, p *plan, d Delivery) bool {
	dup := false
	if p != nil {
		dup = p.rnd.Float64() < r.cfg.DuplicateRate
	}
	var wg sync.WaitGroup
	if dup {
		wg.Add(1)
		delay := time.Duration(p.rnd.Int64N(int64(300 * time.Millisecond)))
		go func() {
			defer wg.Done()
			if wait(ctx, delay) {
				r.stats.mu.Lock()
				r.stats.duplicates++
				r.stats.mu.Unlock()
				r.deliver(ctx, d)
			}
		}()
	}
	ok := r.deliver(ctx, d)
	wg.Wait()
	return ok
}

// deliver invokes the webhook with d, redelivering after 5xx answers.
func (r *run) deliver(ctx context.Context, d Delivery) bool {
	for attempt := range maxRedeliveries {
		if attempt > 0 {
			r.stats.mu.Lock()
			r.stats.redeliveries++
			r.stats.mu.Unlock()
			if !wait(ctx, time.Duration(attempt)*100*time.Millisecond) {
				return false
			}
		}
		r.sem <- struct{}{}
		resp, _ := r.hook.Handle(context.WithoutCancel(ctx), d.Request(Secret))
		<-r.sem
		r.stats.mu.Lock()
		r.stats.sent++
		r.stats.statuses[resp.StatusCode]++
		r.stats.mu.Unlock()
		switch {
		case resp.StatusCode < 300:
			return true
		case resp.StatusCode < 500:
			r.stats.mu.Lock()
			r.stats.rejected++
			r.stats.mu.Unlock()
			r.log.Error("chaos: delivery rejected", "delivery_id", d.GUID, "status", resp.StatusCode, "body", resp.Body)
			return false
		}
	}
	r.stats.mu.Lock()
	r.stats.undelivered++
	r.stats.mu.Unlock()
	return false
}
