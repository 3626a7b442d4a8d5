// Command benchreport runs every ghclaim benchmark scenario (package
// bench) in one process against one emulator and writes bench/REPORT.md and
// bench/report.json. `make bench` runs it; flags size each scenario so the
// whole run stays within a few minutes on two cores.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/bench"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/local/bootstrap"
)

func main() {
	var o options
	flag.StringVar(&o.out, "out", "bench", "directory for REPORT.md and report.json")
	flag.StringVar(&o.command, "command", "go run ./bench/cmd/benchreport", "the command named in the report")
	flag.IntVar(&o.deliveries, "deliveries", 300, "webhook deliveries of each kind (handler, floor)")
	flag.IntVar(&o.lifecycle, "lifecycle", 40, "jobs sent through queued, in_progress and completed")
	flag.IntVar(&o.claims, "claims", 200, "jobs claimed for the throughput figure")
	flag.IntVar(&o.latency, "latency-jobs", 100, "jobs for the time-to-claim figure")
	flag.DurationVar(&o.gap, "latency-gap", 100*time.Millisecond, "time between their deliveries")
	flag.IntVar(&o.backlog, "reclaim-backlog", 10000, "stale records seeded for the reclaimer")
	flag.DurationVar(&o.reclaimLimit, "reclaim-limit", 45*time.Second, "stop sweeping after this long and project the rest (0: sweep all)")
	flag.IntVar(&o.coldStarts, "cold-starts", 5, "cold starts per function")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

type options struct {
	out, command                           string
	deliveries, lifecycle, claims, latency int
	backlog, coldStarts                    int
	gap, reclaimLimit                      time.Duration
}

func step(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	root, err := bootstrap.ModuleRoot()
	if err != nil {
		return err
	}
	rep := bench.Report{Machine: machine(root, o.command)}
	tmp, err := os.MkdirTemp("", "ghclaim-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	step("building the arm64 bootstraps as make build does")
	var took time.Duration
	rep.Binaries, took, err = bench.BuildSizes(ctx, root, filepath.Join(tmp, "arm64"))
	if err != nil {
		return err
	}
	rep.BuildS = math.Round(took.Seconds())
	step("building the bootstraps for this machine")
	bins, err := bootstrap.Build(ctx, root, filepath.Join(tmp, "host"))
	if err != nil {
		return err
	}
	rieBin, err := bootstrap.BuildRIE(ctx, root, filepath.Join(tmp, "host"))
	if err != nil {
		return err
	}

	step("starting the emulator")
	srv, err := emulator.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	tmpl := filepath.Join(root, "template.yaml")
	var envs []*bench.Env
	deploy := func(name string) (*bench.Env, error) {
		e, err := bench.Deploy(ctx, srv, tmpl, fmt.Sprintf("bench-%s-%d", name, time.Now().UnixNano()%1_000_000))
		if err == nil {
			envs = append(envs, e)
		}
		return e, err
	}

	// 1. Webhook vs floor, and the deliveries of a job's life.
	step("1. webhook vs floor: %d deliveries of each", o.deliveries)
	whEnv, err := deploy("webhook")
	if err != nil {
		return err
	}
	defer whEnv.Close(context.WithoutCancel(ctx))
	stop := whEnv.KeepQueueShort(ctx, 200*time.Millisecond)
	w, err := bench.NewWebhook(ctx, whEnv, nil, 1_000_000)
	if err != nil {
		return err
	}
	rep.Webhook, err = bench.MeasureWebhook(ctx, w, o.deliveries, 20, 50)
	if err != nil {
		return err
	}
	rep.Lifecycle, err = bench.MeasureLifecycle(ctx, w, o.lifecycle)
	stop()
	if err != nil {
		return err
	}

	// 2 and 3. Claims through the real queue.
	step("2. claims: %d jobs, then %d with check_queued", o.claims, o.claims/2)
	for i, check := range []bool{false, true} {
		cEnv, err := deploy(fmt.Sprintf("claims%d", i))
		if err != nil {
			return err
		}
		defer cEnv.Close(context.WithoutCancel(ctx))
		c, err := bench.NewClaims(ctx, cEnv, check, int64(10_000_000*(i+2)))
		if err != nil {
			return err
		}
		defer c.Close()
		n := o.claims
		if check {
			n = o.claims / 2
		}
		cr, err := bench.MeasureClaims(ctx, c, n)
		if err != nil {
			return err
		}
		rep.Claims = append(rep.Claims, cr)
		if !check {
			step("3. time to claim: %d jobs, one every %s", o.latency, o.gap)
			busy0, inv0 := c.Busy()
			rep.TimeToClaim, err = bench.MeasureTimeToClaim(ctx, c, o.latency, o.gap)
			if err != nil {
				return err
			}
			busy1, inv1 := c.Busy()
			claimerInvocation = (busy1 - busy0) / time.Duration(max(1, inv1-inv0))
		}
	}

	// 4. Cold starts, on a fresh stack; the reclaimer's idle pass there too.
	step("4. cold starts: %d per function", o.coldStarts)
	csEnv, err := deploy("coldstart")
	if err != nil {
		return err
	}
	defer csEnv.Close(context.WithoutCancel(ctx))
	rep.ColdStarts, err = bench.MeasureColdStarts(ctx, srv, csEnv, bins, rieBin, o.coldStarts)
	if err != nil {
		return err
	}
	idle, idleCalls, err := idlePass(ctx, csEnv)
	if err != nil {
		return err
	}

	// 5. Reclaimer.
	step("5. reclaimer: %d stale records (limit %s)", o.backlog, o.reclaimLimit)
	rcEnv, err := deploy("reclaim")
	if err != nil {
		return err
	}
	defer rcEnv.Close(context.WithoutCancel(ctx))
	stop = rcEnv.KeepQueueShort(ctx, 200*time.Millisecond)
	rep.Reclaim, err = bench.MeasureReclaim(ctx, rcEnv, o.backlog, 50_000_000, o.reclaimLimit)
	stop()
	if err != nil {
		return err
	}

	if len(rep.Claims) > 0 {
		rep.JobLife, _ = bench.LifeOf(rep.Lifecycle, rep.Claims[0])
	}

	// 6. Cost.
	rep.Cost = costModel(rep, idle, idleCalls)
	for _, e := range envs {
		for op, n := range e.Count.Snapshot().Retries {
			if rep.SDKRetries == nil {
				rep.SDKRetries = map[string]int{}
			}
			rep.SDKRetries[op] += n
		}
	}

	rep.Machine.DurationS = math.Round(time.Since(start).Seconds())
	step("writing %s", o.out)
	return write(o.out, rep)
}

// claimerInvocation is the mean claimer invocation of the time-to-claim
// run, where traffic is light and batches are small: what a job costs in
// Lambda duration when nothing is batched.
var claimerInvocation time.Duration

// idlePass runs the reclaimer on a table with nothing stale: the fixed
// cost of the schedule.
func idlePass(ctx context.Context, env *bench.Env) (time.Duration, map[string]int, error) {
	rc, err := bench.NewReclaimer(ctx, env)
	if err != nil {
		return 0, nil, err
	}
	var ds []time.Duration
	var calls map[string]int
	for range 5 {
		before := env.Count.Snapshot()
		t0 := time.Now()
		if _, err := rc.Run(ctx); err != nil {
			return 0, nil, err
		}
		ds = append(ds, time.Since(t0))
		calls = env.Count.Snapshot().Since(before).Calls
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], calls, nil
}

// memoryMB is the functions' MemorySize in template.yaml (Globals).
const memoryMB = 256

// baselineInvocations is the plain queue's Lambda invocations per job:
// the webhook for each of GitHub's three deliveries and the consumer for
// the one message, unbatched as ours is counted.
const baselineInvocations = 4

func costModel(rep bench.Report, idle time.Duration, idleCalls map[string]int) bench.CostModel {
	p := bench.ListPrices
	c := bench.CostModel{Prices: p, MemoryMB: memoryMB, IdlePassMS: float64(idle.Microseconds()) / 1000, IdlePassCalls: idleCalls}
	if len(rep.Lifecycle) == 0 || len(rep.Claims) == 0 {
		return c
	}
	var job, queued bench.Usage
	for _, d := range rep.Lifecycle {
		mean := time.Duration(d.Time.Mean * float64(time.Millisecond))
		u := bench.Invocation(memoryMB, mean).Plus(d.Usage)
		if d.Action == "queued" {
			queued = bench.Invocation(memoryMB, mean)
		}
		job = job.Plus(u)
	}
	// The claimer: one invocation per job (light traffic, no batching: the
	// worst case), its own requests, and the poller's receive and delete.
	job = job.Plus(bench.Invocation(memoryMB, claimerInvocation)).Plus(rep.Claims[0].ClaimerUsage).Plus(bench.Usage{SQSRequests: 2})
	c.Ours = job.Times(1000)
	// The baseline: the same three deliveries, each as short as our queued
	// one, one send, and the consumer Lambda's poller receiving and deleting
	// the message and invoking the consumer once (a queue has a consumer;
	// ours is the claimer, counted above). Its invocation is given the
	// queued delivery's length too, the shortest any consumer could take.
	base := queued.Times(baselineInvocations).Plus(bench.Usage{SQSRequests: 3})
	c.Baseline = base.Times(1000)
	c.OursBill, c.BaseBill = p.Price(c.Ours), p.Price(c.Baseline)
	c.Ratio = math.Round(c.OursBill.Total/c.BaseBill.Total*100) / 100

	// The reclaimer's idle pass, every minute for 30 days, with its queries
	// priced as eventually consistent reads of one page each.
	passes := 30 * 24 * 60.0
	q := 0
	for op, k := range idleCalls {
		if strings.HasPrefix(op, "DynamoDB.") {
			q += k
		}
	}
	c.FixedMonthly = bench.Invocation(memoryMB, idle).Plus(bench.Usage{RRU: 0.5 * float64(q)}).Times(passes)
	c.FixedMonthlyBill = p.Price(c.FixedMonthly)
	c.Notes = []string{
		"ghclaim per job: three webhook invocations (queued, in_progress, completed; GitHub sends all three) with the requests and mean durations measured in section 1, one claimer invocation (unbatched: the light-traffic worst case) with the requests measured in section 2 and the mean invocation time of section 3, and Lambda's poller receiving and deleting its message (2 SQS requests).",
		"Baseline per job: 4 Lambda invocations (the three deliveries and the consumer's one) + 1 queue round trip (send, receive, delete: 3 SQS requests) and no database, each invocation as long as our queued delivery.",
		"Durations are the emulator's (each request takes milliseconds of Python), billed per started millisecond; on AWS they are shorter, which lowers the Lambda share of both columns alike.",
		"DynamoDB units are estimated from the requests (items are under 1 KB: one WRU per write, conditional failures included; the sweep index projects keys only, so a write touches the index only when it sets, moves or removes sweep_at: one unit to put or remove an index entry, two when sweep_at moves; a consistent BatchGetItem reads one unit per key). moto does not meter capacity.",
		"Not included: CloudWatch Logs ingestion (one JSON line per decision), the poller's empty long-poll receives (a fixed cost per queue, the same for any SQS-fed design), data transfer, free tiers.",
	}
	return c
}

func machine(root, command string) bench.Machine {
	m := bench.Machine{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version(),
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Command: command,
		Emulator: "moto_server (DynamoDB item operations and SQS queue changes serialised by infra/emulator)",
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("python3", "-c", "import moto; print(moto.__version__)").Output(); err == nil {
		m.Emulator = "moto " + strings.TrimSpace(string(out)) + " (DynamoDB item operations and SQS queue changes serialised by infra/emulator)"
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	m.Commit = git("rev-parse", "--short", "HEAD")
	m.Dirty = git("status", "--porcelain", "--untracked-files=no") != ""
	return m
}

func write(dir string, rep bench.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		return err
	}
	rep.Markdown(f)
	return f.Close()
}
