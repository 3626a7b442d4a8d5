package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

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

	rmu sync.Mutex // rnd is shared by the script and the job's machines
	rnd *rand.Rand

	mu sync.Mutex
	// doneFirst: a done event was answered 2xx before queued was first sent.
	doneFirst bool
	// doneGUIDs are the in_progress and completed deliveries GitHub sent.
	doneGUIDs []string
	// GitHub's side of the job: its status (queued, in_progress,
	// completed), the runner that took it and whether it is ours, and
	// whether it was cancelled while queued.
	status    string
	takenBy   string
	ours      bool
	cancelled bool
}

// guid draws a delivery GUID.
func (p *plan) guid() string {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", p.rnd.Uint32(), p.rnd.IntN(1<<16), p.rnd.IntN(1<<12), p.rnd.IntN(1<<12), p.rnd.Int64N(1<<48))
}

// rndDraw draws from [0, n) (n > 0).
func (p *plan) rndDraw(n int64) int64 {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	return p.rnd.Int64N(n)
}

func (p *plan) rndFloat() float64 {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	return p.rnd.Float64()
}

// assign is GitHub giving the job to runner (ours when ours is set) if it
// is still queued. It reports whether it did.
func (p *plan) assign(runner string) bool { return p.take(runner, true) }

func (p *plan) take(runner string, ours bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != "queued" {
		return false
	}
	p.status, p.takenBy, p.ours = "in_progress", runner, ours
	return true
}

// complete marks the job completed at GitHub.
func (p *plan) complete() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = "completed"
}

// cancel cancels the job if it is still queued and reports whether it did.
func (p *plan) cancel() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != "queued" {
		return false
	}
	p.status, p.cancelled = "completed", true
	return true
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
		p := &plan{Job: j, Pool: PoolEC2, status: "queued", rnd: rand.New(rand.NewPCG(rnd.Uint64(), uint64(j.ID)))}
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

// play sends p's deliveries in its script's order. GitHub's own record of
// the job (what the reclaimer's liveness check reads) is set first: the
// job exists at GitHub before anything is delivered.
func (r *run) play(ctx context.Context, p *plan) {
	pause := func(max time.Duration) bool {
		return wait(ctx, time.Duration(p.rndDraw(int64(float64(max)*r.cfg.ScriptPace))))
	}
	queued := func() {
		r.send(ctx, p, Delivery{GUID: p.guid(), Event: "workflow_job", Body: Payload(p.Job, "queued", "")})
	}
	other := fmt.Sprintf("hosted-%d", p.Job.ID%97)
	elsewhere := func() bool {
		if !p.take(other, false) {
			return false
		}
		r.setGitHubJob(p, "in_progress", "", other, 0)
		r.sendDone(ctx, p, "in_progress", other)
		return true
	}
	if p.Script == Early {
		p.take(other, false)
		r.setGitHubJob(p, "in_progress", "", other, 0)
	} else {
		r.setGitHubJob(p, "queued", "", "", 0)
	}
	r.beginOutage(p)
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
		if pause(3*time.Second) && p.cancel() {
			r.setGitHubJob(p, "completed", "cancelled", "", 0)
			r.sendDone(ctx, p, "completed", "")
		}
	case Finished:
		// Another runner whose labels fit takes the job when ours has not
		// by then.
		queued()
		if pause(6*time.Second) && elsewhere() && pause(2*time.Second) {
			p.complete()
			r.setGitHubJob(p, "completed", "success", other, 0)
			r.sendDone(ctx, p, "completed", other)
		}
	case Early:
		d := Delivery{GUID: p.guid(), Event: "workflow_job", Body: Payload(p.Job, "in_progress", other)}
		p.mu.Lock()
		p.doneGUIDs = append(p.doneGUIDs, d.GUID)
		p.mu.Unlock()
		if r.send(ctx, p, d) {
			p.mu.Lock()
			p.doneFirst = true
			p.mu.Unlock()
		}
		queued()
		if pause(time.Second) {
			p.complete()
			r.setGitHubJob(p, "completed", "success", other, 0)
			r.sendDone(ctx, p, "completed", other)
		}
	}
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
		dup = p.rndFloat() < r.cfg.DuplicateRate
		dup = r.force.duplicate.CompareAndSwap(true, false) || dup
	}
	var wg sync.WaitGroup
	if dup {
		wg.Add(1)
		delay := time.Duration(p.rndDraw(int64(300 * time.Millisecond)))
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
	r.sent(p)
	wg.Wait()
	return ok
}

// deliver has GitHub (the stand-in) deliver d to the webhook, redelivering
// after 5xx answers. A delivery the endpoint never answered (the outage)
// is not retried here: it is left in GitHub's delivery log as failed, for
// the redeliverer.
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
		hd := r.gh.Deliver(context.WithoutCancel(ctx), d.Event, d.GUID, d.Body)
		switch {
		case hd.StatusCode == 0:
			r.stats.mu.Lock()
			r.stats.unreached++
			r.stats.mu.Unlock()
			return false
		case hd.StatusCode < 300:
			return true
		case hd.StatusCode < 500:
			r.stats.mu.Lock()
			r.stats.rejected++
			r.stats.mu.Unlock()
			r.log.Error("chaos: delivery rejected", "delivery_id", d.GUID, "status", hd.StatusCode, "body", hd.Response)
			return false
		}
	}
	r.stats.mu.Lock()
	r.stats.undelivered++
	r.stats.mu.Unlock()
	return false
}

// errEndpointDown is the connection refused of the webhook outage.
var errEndpointDown = errors.New("dial tcp 127.0.0.1:443: connect: connection refused")

// endpoint is the App's webhook URL as GitHub reaches it: the real handler
// behind a Function URL, unreachable during the outage window.
func (r *run) endpoint(ctx context.Context, h http.Header, body []byte) (int, []byte, error) {
	if r.down.Load() {
		return 0, nil, errEndpointDown
	}
	req := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/", Headers: map[string]string{}, Body: string(body),
		RequestContext: events.LambdaFunctionURLRequestContext{
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/", Protocol: "HTTP/1.1", SourceIP: "140.82.115.1", UserAgent: h.Get("User-Agent")},
		},
	}
	for k := range h {
		req.Headers[strings.ToLower(k)] = h.Get(k)
	}
	r.sem <- struct{}{}
	resp, _ := r.webhookFor().Handle(context.WithoutCancel(ctx), req)
	<-r.sem
	r.stats.mu.Lock()
	r.stats.sent++
	r.stats.statuses[resp.StatusCode]++
	r.stats.mu.Unlock()
	return resp.StatusCode, []byte(resp.Body), nil
}
