// Command chaos is `make chaos`: the accounting run that measures ghclaim's
// promise, "no job lost, no job claimed twice". It starts an AWS emulator
// (moto_server on 127.0.0.1, or the one AWS_ENDPOINT_URL names), deploys
// template.yaml's table and queues there, runs N jobs through the real
// webhook, claimer and reclaimer handlers with faults at every external call
// (infra/chaos), and prints the figures as key=value pairs on its last line.
//
// It exits 1 unless nothing was lost and nothing was claimed twice, 2 when
// the run could not be set up. It only wires: every decision lives in
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
	logPath := flag.String("log", "", "write the functions' JSON logs to this file")
	verbose := flag.Bool("v", false, "print progress and every lost job")
	flag.Parse()

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
	fmt.Fprintf(progress, "chaos: %d jobs, fault rate %.0f %%, kill rate %.0f %%, seed %d, emulator %s\n",
		cfg.Jobs, cfg.FaultRate*100, cfg.KillRate*100, cfg.Seed, srv.Endpoint)
	return chaos.Run(ctx, chaos.World{AWS: aws, TableName: stack.TableName, QueueURL: stack.QueueURL}, cfg)
}
