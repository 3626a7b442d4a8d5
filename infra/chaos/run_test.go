package chaos_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/chaos"
	"github.com/ghclaim/ghclaim/infra/emulator"
)

// world deploys the template's table and queues on an emulator of the
// run's own: its janitor lists every tagged machine and runner parameter
// of the account, and on the binary's shared server it ended the machines
// of TestMachineRunsTheJob, running beside it (unknown jobs, missing
// runners, older than the compressed 3.5 s grace).
func world(t *testing.T) chaos.World {
	t.Helper()
	srv := emulator.OwnForTest(t)
	stack := emulator.DeployForTest(t, srv)
	return chaos.World{AWS: srv.ConfigForTest(t), TableName: stack.TableName, QueueURL: stack.QueueURL}
}

// TestRunShort is `make chaos` in small: 12 jobs through the real
// handlers with faults at every external call (8 %, so that it stays
// short: at 20 % a claim attempt of ~10 calls succeeds one time in nine),
// kills, duplicates, a rate-limit window, machines that never boot, runners
// that die and a webhook outage, with the reclaimer's liveness check, the
// redeliverer and the janitor on their schedules. Time is compressed ten to
// fifty times more than in `make chaos` (graces, leases, visibility,
// schedules, ladder, claim-message delays, machines, the scripts' pauses):
// what is left is mostly SQS's whole seconds (a retry waits at least one, a
// killed batch Visibility) and the reclaimer's passes. ForceFirst makes
// the first of every injected event certain, so the checks below cannot
// pass or fail by the draws of so few jobs; later ones are drawn, kills and
// machine failures at lower rates than `make chaos` (10 %, 2 %): each dead
// machine costs its job a grace, a pass and a new claim, and at 5 % this
// seed's draws killed two more of the first nine machines, often on the job
// already replaced, doubling the run. Every job must run or have a reason,
// nothing be claimed twice or left behind.
func TestRunShort(t *testing.T) {
	t.Parallel()
	w := world(t)
	var logs bytes.Buffer
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cfg := chaos.Config{Jobs: 12, FaultRate: 0.08, KillRate: 0.1, ForceFirst: true, Seed: 37, DelayScale: 0.02, Log: &logs,
		NeverBootRate: 0.02, DieRate: 0.02, BootDelay: ms(100), RunTime: ms(100), StartGrace: ms(700),
		OutageWindow: ms(600), RateLimitWindow: time.Second,
		// The function timeout, lease and visibility keep their earlier 4 s / 5 s / 5 s: at
		// 2 s / 2.5 s / 3 s a claim on a box busy compiling (make test on an empty build cache)
		// outran its timeout on every try and one job stayed claiming to the end.
		FunctionTimeout: 4 * time.Second, Lease: 5 * time.Second, Visibility: 5 * time.Second,
		Ladder: []time.Duration{ms(200), ms(400), ms(600)}, PendingGrace: ms(400), QueuedGrace: ms(600),
		ReclaimEvery: ms(500), RedeliverEvery: ms(500), JanitorEvery: time.Second, ScriptPace: 0.1,
		// Not compressed: DESIGN's 5–25 s jitter after a rate limit's end. A
		// throttle fault blocks its installation (a secondary limit binds
		// them all), so every claim and liveness check of it in flight waits
		// that long, and a job can meet two or three such waits (claim,
		// check, new claim): up to about 75 s. Passing runs end in 10–40 s;
		// a run that fails waits this long before it says so.
		Settle: 150 * time.Second}
	if testing.Verbose() {
		cfg.Progress = os.Stderr
	}
	if path := os.Getenv("CHAOS_LOG"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg.Log = f
	}
	rep, err := chaos.Run(context.Background(), w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Line())
	t.Log(rep.Counts.String())
	for _, l := range rep.LostJobs {
		t.Log(l)
	}
	if !rep.OK() {
		t.Errorf("run failed: %s", rep.Line())
	}
	if rep.Faults == 0 || rep.Kills == 0 || rep.DuplicateDeliveries == 0 {
		t.Errorf("faults=%d kills=%d duplicate_deliveries=%d: the run injected nothing, it proves nothing", rep.Faults, rep.Kills, rep.DuplicateDeliveries)
	}
	if rep.Ran == 0 || rep.Unreached == 0 || rep.Redelivered == 0 {
		t.Errorf("ran=%d unreached=%d redelivered=%d: no runner of ours ran a job, or the outage missed every delivery", rep.Ran, rep.Unreached, rep.Redelivered)
	}
	if rep.NeverBooted == 0 || rep.RunnersDied == 0 {
		t.Errorf("never_booted=%d runners_died=%d: no machine failed, the liveness check went untested", rep.NeverBooted, rep.RunnersDied)
	}
	if cfg.Log == &logs {
		// Every machine says in the log what it drew and what became of
		// it: a job's replacements can be read back to their machines.
		fates, ends, n := map[string]int{}, map[string]int{}, 0
		field := func(l, key string) string {
			_, v, _ := strings.Cut(l, `"`+key+`":"`)
			v, _, _ = strings.Cut(v, `"`)
			return v
		}
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"msg":"chaos machine"`) {
				n++
				fates[field(l, "fate")]++
				ends[field(l, "end")]++
			}
		}
		if n == 0 || fates["never_boots"] != rep.NeverBooted || fates["dies"] != rep.RunnersDied || ends["ran its job"] != rep.Ran {
			t.Errorf("%d machine lines, fates %v, ends %v; want never_boots %d, dies %d, ran its job %d",
				n, fates, ends, rep.NeverBooted, rep.RunnersDied, rep.Ran)
		}
	}
}
