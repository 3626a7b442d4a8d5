// Command chaos is `make chaos`: the accounting run that measures ghclaim's
// promise, "no job lost, no job claimed twice". It starts an AWS emulator
// (moto_server on 127.0.0.1, or the one AWS_ENDPOINT_URL names), deploys
// template.yaml's table and queues there, runs N jobs through the real
// webhook, claimer, reclaimer (with its liveness check), redeliverer and
// janitor with faults at every external call, machines that never boot,
// runners that die before their job and a webhook outage (infra/chaos), and
// prints the figures as key=value pairs on its last line.
//
// It exits 1 unless every job ran (or was cancelled, taken elsewhere, or
// failed with a reason), nothing was claimed twice and no runner or machine
// outlived its job; 2 when the run could not be set up. It only wires: every decision lives in
// infra/chaos.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/ghclaim/ghclaim/infra/chaos"
	"github.com/ghclaim/ghclaim/infra/emulator"
)

func main() {
	var cfg chaos.Config
	flag.IntVar(&cfg.Jobs, "jobs", 500, "number of workflow jobs (N)")
	flag.Float64Var(&cfg.FaultRate, "rate", 0.2, "probability that any external call fails")
	flag.Float64Var(&cfg.KillRate, "kill", 0.1, "share of claimer invocations killed at a random call")
	flag.Float64Var(&cfg.DuplicateRate, "dup", 0.15, "share of deliveries sent twice")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "seed of the plan and the fault draws")
	flag.IntVar(&cfg.Claimers, "claimers", 8, "concurrent claimer instances")
	flag.Float64Var(&cfg.DelayScale, "delay-scale", 0.1, "compression of claim message delays (1: none)")
	flag.DurationVar(&cfg.Settle, "settle", 20*time.Minute, "longest wait for every job to settle after the last delivery (the run ends as soon as all have)")
	flag.Float64Var(&cfg.NeverBootRate, "never-boot", 0.05, "share of machines that never boot (0: none)")
	flag.Float64Var(&cfg.DieRate, "die", 0.05, "share of runners that die before taking their job (0: none)")
	flag.DurationVar(&cfg.OutageWindow, "outage", 4*time.Second, "how long the webhook endpoint is down, half-way through the ramp (0: never)")
	flag.DurationVar(&cfg.StartGrace, "start-grace", 8*time.Second, "the pools' runner-start grace (compressed)")
	flag.DurationVar(&cfg.RedeliverEvery, "redeliver-every", 3*time.Second, "the redeliverer's schedule (compressed)")
	flag.IntVar(&cfg.RedeliverAttempts, "redeliver-attempts", 10, "redeliveries asked at most per delivery")
	flag.DurationVar(&cfg.JanitorEvery, "janitor-every", 5*time.Second, "the janitor's schedule (compressed)")
	rename := flag.Bool("rename", false, "rename the linux pool (same labels) partway through the run, for every function built from then on")
	renameBack := flag.Bool("rename-back", false, "with -rename: name it linux again later in the run")
	flag.DurationVar(&cfg.RenameAt, "rename-at", 0, "with -rename: when, from the start (default: 3/10 of the ramp)")
	flag.DurationVar(&cfg.RenameBackAt, "rename-back-at", 0, "with -rename-back: when, from the start (default: 7/10 of the ramp)")
	flag.DurationVar(&cfg.RenameLag, "rename-lag", 3*time.Second, "how long running instances keep the old pools after each deploy")
	logPath := flag.String("log", "", "write the functions' JSON logs to this file")
	verbose := flag.Bool("v", false, "print progress and every lost job")
	flag.Parse()
	// Zero on the command line means "none"; in Config it means "default".
	for _, v := range []*float64{&cfg.NeverBootRate, &cfg.DieRate} {
		if *v == 0 {
			*v = -1
		}
	}
	if cfg.OutageWindow == 0 {
		cfg.OutageWindow = -1
	}
	// The ramp is N × 40 ms (chaos.Config.Ramp's default).
	ramp := time.Duration(cfg.Jobs) * 40 * time.Millisecond
	switch {
	case !*rename:
		cfg.RenameAt, cfg.RenameBackAt = 0, 0
	case cfg.RenameAt <= 0:
		cfg.RenameAt = ramp * 3 / 10
	}
	switch {
	case !*rename || !*renameBack:
		cfg.RenameBackAt = 0
	case cfg.RenameBackAt <= 0:
		cfg.RenameBackAt = ramp * 7 / 10
	}

	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(2)
		}
		defer f.Close()
		cfg.Log = f
	}
	if *verbose {
		cfg.Progress = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	fmt.Printf("faults by target and kind: %s\n", rep.Counts)
	fmt.Printf("webhook answers by status: %v\n", rep.Statuses)
	for _, l := range rep.Left {
		fmt.Println("left by design (pool gone from RUNNER_POOLS, not for the janitor to remove: README, Changing pools with jobs in flight):", l)
	}
	for _, l := range rep.GaveUp {
		fmt.Println("given up, never ran:", l)
	}
	for _, l := range rep.LostJobs {
		fmt.Println("not ok:", l)
	}
	fmt.Println(rep.Line())
	if !rep.OK() {
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg chaos.Config, progress io.Writer) (chaos.Report, error) {
	srv, err := emulator.Start(ctx)
	if err != nil {
		return chaos.Report{}, err
	}
	defer srv.Close()
	aws, err := srv.Config(ctx)
	if err != nil {
		return chaos.Report{}, err
	}
	path, err := emulator.TemplatePath()
	if err != nil {
		return chaos.Report{}, err
	}
	stack, err := emulator.Deploy(ctx, aws, path, emulator.StackName("chaos"), nil)
	if err != nil {
		return chaos.Report{}, err
	}
	defer stack.Delete(context.WithoutCancel(ctx))
	fmt.Fprintf(progress, "chaos: %d jobs, fault rate %.0f %%, kill rate %.0f %%, never boot %.0f %%, die %.0f %%, outage %s, seed %d, emulator %s\n",
		cfg.Jobs, cfg.FaultRate*100, cfg.KillRate*100, max(cfg.NeverBootRate, 0)*100, max(cfg.DieRate, 0)*100, max(cfg.OutageWindow, 0), cfg.Seed, srv.Endpoint)
	if cfg.RenameAt > 0 {
		fmt.Fprintf(progress, "chaos: pool %s renamed %s at %s, back at %s (0: never), instances follow within %s\n",
			chaos.PoolEC2, chaos.PoolRenamed, cfg.RenameAt, cfg.RenameBackAt, cfg.RenameLag)
	}
	return chaos.Run(ctx, chaos.World{AWS: aws, TableName: stack.TableName, QueueURL: stack.QueueURL}, cfg)
}
