// Command ghclaim-local runs the whole ghclaim pipeline on this machine with the real function
// binaries (see infra/local/rig):
//
//	ghclaim-local run     play the demonstration scenario, print a table, exit 0 only if every
//	                      job ended where it should (make run)
//	ghclaim-local serve   keep the stack up and print the webhook URL and secret for curl, a
//	                      webhook forwarder or sam local; Ctrl-C stops everything (make local)
//
// AWS_ENDPOINT_URL selects an emulator already running (LocalStack); without it a moto_server
// is started and stopped. The functions' own output goes to a log file, never to the terminal.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ghclaim/ghclaim/infra/local/bootstrap"
	"github.com/ghclaim/ghclaim/infra/local/rig"
	"github.com/ghclaim/ghclaim/infra/local/scenario"
	"github.com/ghclaim/ghclaim/shared/awsenv"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx, os.Args[2:])
	case "serve":
		err = serve(ctx, os.Args[2:])
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ghclaim-local:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ghclaim-local run [-timeout 80s] [-logs FILE]\n       ghclaim-local serve [-addr 127.0.0.1:9000] [-github-addr 127.0.0.1:9001] [-logs FILE]")
}

// logFile opens the functions' log (default .build/local/functions.log).
func logFile(path string) (*os.File, string, error) {
	if path == "" {
		root, err := bootstrap.ModuleRoot()
		if err != nil {
			return nil, "", err
		}
		path = filepath.Join(root, ".build", "local", "functions.log")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", err
	}
	f, err := os.Create(path)
	return f, path, err
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	timeout := fs.Duration("timeout", 80*time.Second, "give up on the scenario after this long")
	logs := fs.String("logs", "", "file for the functions' output (default .build/local/functions.log)")
	_ = fs.Parse(args)

	began := time.Now()
	f, logPath, err := logFile(*logs)
	if err != nil {
		return err
	}
	defer f.Close()
	opts := scenario.Settings()
	opts.FunctionLogs = f
	opts.Log = slog.New(slog.NewJSONHandler(rig.NewPrefixWriter(&rig.SyncWriter{W: f}, "rig"), nil))

	fmt.Println("ghclaim: the whole pipeline on this machine, real function binaries, compressed retry ladder")
	fmt.Printf("  starting: AWS emulator (%s), GitHub stand-in, building webhook, claimer, reclaimer…\n", emulatorName())
	r, err := rig.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("start the local stack: %w", err)
	}
	defer r.Close()
	fmt.Printf("  ready in %.1fs: stack %s, webhook %s, GitHub %s, %d claimers, reclaimer every %s\n",
		time.Since(began).Seconds(), r.Stack.Name, r.WebhookURL, r.GitHubURL, len(r.Claimers), scenario.SweepEvery)
	fmt.Printf("  function logs: %s\n\n", logPath)

	sctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	p := &scenario.Player{Rig: r, Out: os.Stdout}
	wctx, stopWatch := context.WithCancel(sctx)
	watched := make(chan struct{})
	go func() { p.Watch(wctx); close(watched) }()
	playErr := scenario.Full(sctx, p)
	stopWatch()
	<-watched

	jctx, jcancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer jcancel()
	results, err := p.Judge(jctx)
	if err != nil {
		return fmt.Errorf("read the outcome: %w", err)
	}
	fmt.Println()
	scenario.Table(os.Stdout, results)
	fmt.Println()
	for _, n := range p.Notes() {
		fmt.Println("  " + n)
	}
	m, s := r.Mapping.Stats(), r.Schedule.Stats()
	fmt.Printf("  SQS mapping: %d batches, %d messages, %d deleted, %d left to their visibility timeout, %d failed invocations; reclaimer: %d runs\n",
		m.Batches, m.Received, m.Deleted, m.Failed, m.InvokeErrors, s.Invocations)
	fmt.Printf("  total %.1fs\n", time.Since(began).Seconds())
	if playErr != nil {
		return fmt.Errorf("scenario: %w (function logs: %s)", playErr, logPath)
	}
	if !scenario.AllOK(results) {
		return fmt.Errorf("some jobs did not end where they should (function logs: %s)", logPath)
	}
	if d := r.Denied(); len(d) > 0 {
		return fmt.Errorf("IAM would refuse %d AWS requests of the functions (their roles in template.yaml lack them): %s", len(d), strings.Join(d, "; "))
	}
	fmt.Println("  every job ended where it should, and every AWS request was one its function's role allows.")
	return nil
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "webhook listen address (127.0.0.1 only)")
	ghAddr := fs.String("github-addr", "127.0.0.1:9001", "GitHub stand-in listen address (127.0.0.1 only)")
	logs := fs.String("logs", "", "file for the functions' output (default .build/local/functions.log)")
	envFile := fs.String("env-file", "", "also write the functions' environment as a sam local --env-vars file here")
	_ = fs.Parse(args)

	f, logPath, err := logFile(*logs)
	if err != nil {
		return err
	}
	defer f.Close()
	opts := scenario.Settings()
	opts.FunctionLogs = f
	opts.WebhookAddr, opts.GitHubAddr = *addr, *ghAddr
	opts.Log = slog.New(slog.NewJSONHandler(rig.NewPrefixWriter(&rig.SyncWriter{W: f}, "rig"), nil))
	fmt.Printf("ghclaim local stack: starting (%s)…\n", emulatorName())
	r, err := rig.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("start the local stack: %w", err)
	}
	defer func() {
		fmt.Println("\nstopping…")
		r.Close()
		for _, d := range r.Denied() {
			fmt.Printf("IAM would refuse %s (refused here too: the role in template.yaml lacks it)\n", d)
		}
		fmt.Println("stopped.")
	}()
	if *envFile != "" {
		if err := writeEnvFile(*envFile, r); err != nil {
			return err
		}
	}
	fmt.Printf(`
  webhook URL     %s
  webhook secret  %s
  GitHub API      %s   (control: %s_fake/state)
  AWS endpoint    %s   (table %s, queue %s)
  function logs   %s

Send a signed delivery (the body's installation/labels pick the pool; see README.md, "Running it locally"):
  body='%s'
  curl -sS %s -H 'X-GitHub-Event: workflow_job' -H "X-GitHub-Delivery: local-$(date +%%s%%N)" \
       -H "X-Hub-Signature-256: sha256=$(printf '%%s' "$body" | openssl dgst -sha256 -hmac '%s' -r | cut -d' ' -f1)" \
       -H 'Content-Type: application/json' -d "$body"

Ctrl-C stops everything this started.
`, r.WebhookURL, r.WebhookSecret, r.GitHubURL, r.GitHubURL+"/", r.Emulator.Endpoint, r.Stack.TableName, r.Stack.QueueURL, logPath,
		string(scenario.Payload(scenario.Job{ID: 1, RunID: 1, Repo: "acme/api", Installation: 1, Labels: []string{"self-hosted", "linux", "x64"}}, "queued", "")),
		r.WebhookURL, r.WebhookSecret)

	<-ctx.Done()
	return nil
}

// writeEnvFile writes the functions' environment in sam local's --env-vars format, keyed by
// the template's logical ids. SAM applies only the variables the template declares, so the
// emulator's endpoint goes in GHCLAIM_ENDPOINT_URL (shared/awsenv), and the region and
// credentials, which sam sets from its own session, are left out: run sam with
// --region us-east-1 (the rig's region) and, on Linux, --docker-network host, or the functions
// in its containers cannot reach 127.0.0.1 on the host.
func writeEnvFile(path string, r *rig.Rig) error {
	var b strings.Builder
	b.WriteString("{\n")
	names := make([]string, 0, len(r.Functions))
	for n := range r.Functions {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		fn := r.Functions[n]
		fmt.Fprintf(&b, "  %q: {\n", fn.LogicalID)
		env := samEnv(fn.Env)
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for j, k := range keys {
			sep := ","
			if j == len(keys)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "    %q: %q%s\n", k, env[k], sep)
		}
		sep := ","
		if i == len(names)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  }%s\n", sep)
	}
	b.WriteString("}\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// samEnv is a function's environment as sam local can apply it (see writeEnvFile).
func samEnv(fnEnv map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range fnEnv {
		switch k {
		case "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN":
		default:
			out[k] = v
		}
	}
	if ep := fnEnv["AWS_ENDPOINT_URL"]; ep != "" {
		out[awsenv.EndpointVar] = ep
	}
	return out
}

func emulatorName() string {
	if ep := os.Getenv("AWS_ENDPOINT_URL"); ep != "" {
		return "AWS_ENDPOINT_URL=" + ep
	}
	return "moto_server"
}
