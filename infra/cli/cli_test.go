package cli_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/cli"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

const appID = 4242

// now is the CLI's clock in every test; records are written around it.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// One emulator, one stack, one GitHub stand-in for the package: each test
// uses job ids of its own. Redrive tests use a stack of their own.
var env struct {
	srv     *emulator.Server
	cfg     aws.Config
	stack   *emulator.Stack
	gh      *ghfake.Server
	ghURL   string
	hookURL string
	hookKey string // the webhook secret, to prove it is never printed
	pem     string
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		ctx := context.Background()
		srv, err := emulator.Start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer srv.Close()
		env.srv = srv
		if env.cfg, err = srv.Config(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		path, err := emulator.TemplatePath()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if env.stack, err = emulator.Deploy(ctx, env.cfg, path, emulator.StackName("cli"), nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer env.stack.Delete(ctx)

		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		env.pem = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
		sm := secretsmanager.NewFromConfig(env.cfg)
		if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: &env.stack.GitHubAppPrivateKeyARN, SecretString: &env.pem}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if env.hookKey, err = secret.Resolve(ctx, secretsapi.New(env.cfg), env.stack.WebhookSecretARN, ""); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		env.gh = ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(&key.PublicKey), ghfake.WithClock(func() time.Time { return now }))
		env.gh.AddInstallation(ghfake.Installation{ID: 42, Account: "octo", Org: true})
		gh := httptest.NewServer(env.gh)
		defer gh.Close()
		env.ghURL = gh.URL
		// The webhook's signature check, as the function does it: 200 for a
		// signed ping, 401 otherwise.
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if webhook.Verify(body, r.Header.Get("X-Hub-Signature-256"), [][]byte{[]byte(env.hookKey)}) != nil || r.Header.Get("X-GitHub-Event") != "ping" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		defer hook.Close()
		env.hookURL = hook.URL
		return m.Run()
	}())
}

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

// run runs ghclaim with args against the package's stack (through
// --stack) and GitHub stand-in.
func run(t *testing.T, sqsAPI cli.SQS, args ...string) result {
	t.Helper()
	return runWith(t, context.Background(), nil, sqsAPI, args...)
}

func gh(args ...string) []string {
	return append(args, "--stack", env.stack.Name, "--app-id", strconv.Itoa(appID), "--github-api-url", env.ghURL)
}

// idsOf returns the job id standing for n in run r of a test: n itself in
// the first run, n + emulator.RoundIDs in the second, and so on.
func idsOf(r int64) func(n int64) int64 {
	return func(n int64) int64 { return r*emulator.RoundIDs + n }
}

// ids is idsOf this run of t's test function. Call it once per run, from
// the test function itself.
func ids(t *testing.T) func(n int64) int64 {
	t.Helper()
	return idsOf(emulator.Round(t))
}

func newStore() *store.Store {
	return store.New(dynamodb.NewFromConfig(env.cfg), env.stack.TableName, store.Options{})
}

func rec(id int64, pool string) job.Record {
	return job.Record{JobID: id, Repo: "octo/app", InstallationID: 42, Labels: []string{"self-hosted", "linux"}, Pool: pool, RunID: 9}
}

// seedFailed writes job id through the store as the claimer would leave a
// job that failed for good at attempt 3.
func seedFailed(t *testing.T, id int64, pool string, created time.Time) job.Record {
	t.Helper()
	ctx := context.Background()
	s := newStore()
	if _, err := s.CreateJob(ctx, rec(id, pool), created); err != nil {
		t.Fatal(err)
	}
	l, _, err := s.Acquire(ctx, id, 1, "claimer-1", created.Add(time.Minute), created)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, l, job.Retry{Version: 3, Attempt: 2, FirstFailureAt: created, Due: created, ErrorClass: "server_side", Error: "502 Bad Gateway"}, created); err != nil {
		t.Fatal(err)
	}
	l, _, err = s.Acquire(ctx, id, 3, "claimer-2", created.Add(2*time.Minute), created.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, l, job.Outcome{State: job.Failed, Attempt: 3, ErrorClass: "non_retryable", Error: "422 Validation Failed: runner group 7 not found"}, created.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, s)
	}
	return v
}

func TestJobs(t *testing.T) {
	run0 := emulator.Round(t)
	t.Parallel()
	// Its pools are its own in each run: the listings read the whole table.
	id, x64, arm64 := idsOf(run0), fmt.Sprint("jobs-x64-", run0), fmt.Sprint("jobs-arm64-", run0)
	ctx := context.Background()
	s := newStore()
	seedFailed(t, id(7001), x64, now.Add(-2*time.Hour))
	if _, err := s.CreateJob(ctx, rec(id(7002), x64), now.Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateJob(ctx, rec(id(7003), arm64), now.Add(-3*time.Hour)); err != nil {
		t.Fatal(err)
	}

	r := run(t, nil, "jobs", "--stack", env.stack.Name, "--pool", x64)
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprint(id(7001))) || !strings.Contains(r.stdout, fmt.Sprint(id(7002))) || strings.Contains(r.stdout, fmt.Sprint(id(7003))) {
		t.Fatalf("jobs --pool jobs-x64: exit %d, got\n%s\nwant 7001 and 7002, not 7003", r.code, r.stdout)
	}

	r = run(t, nil, "jobs", "--stack", env.stack.Name, "--pool", x64, "--older-than", "1h", "--json")
	got := decode[[]map[string]any](t, r.stdout)
	if r.code != 0 || len(got) != 1 || got[0]["job_id"] != float64(id(7001)) || got[0]["state"] != "failed" || got[0]["last_error_class"] != "non_retryable" {
		t.Fatalf("jobs --older-than 1h --json: exit %d, got %v; want job 7001, failed", r.code, got)
	}

	r = run(t, nil, "jobs", "--stack", env.stack.Name, "--state", "pending", "--pool", arm64, "--page-size", "1", "--json")
	got = decode[[]map[string]any](t, r.stdout)
	if r.code != 0 || len(got) != 1 || got[0]["job_id"] != float64(id(7003)) {
		t.Fatalf("jobs --state pending --pool jobs-arm64: got %v", got)
	}
	if !strings.Contains(r.stderr, "items read") {
		t.Errorf("a listing of many pages shows no progress on stderr: %q", r.stderr)
	}

	// A repeated --state adds up, as a comma list does (a plain flag kept
	// the last: --state failed --state pending listed the pending only).
	r = run(t, nil, "jobs", "--stack", env.stack.Name, "--pool", x64, "--state", "failed", "--state", "pending", "--json")
	got = decode[[]map[string]any](t, r.stdout)
	if r.code != 0 || len(got) != 2 {
		t.Fatalf("jobs --state failed --state pending --pool jobs-x64: got %v, want 7001 and 7002", got)
	}
}

func TestBadArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"jobs", "--bogus"}, "-bogus"},
		{"bad state", []string{"jobs", "--stack", "x", "--state", "running"}, "--state"},
		// An empty value (a script's empty variable) is no filter: it
		// listed every job.
		{"an empty state", []string{"jobs", "--stack", "x", "--state", ""}, `invalid value "" for flag -state: empty`},
		// A negative App id was taken, and doctor asked GitHub as App -3.
		{"a negative app id", []string{"doctor", "--app-id", "-3"}, "invalid value -3 for flag --app-id"},
		{"a list of pools", []string{"jobs", "--stack", "x", "--pool", "a,b"}, "--pool"},
		{"bad duration", []string{"jobs", "--older-than", "soon"}, "-older-than"},
		// A number without its unit: the flag package said only "parse error".
		{"a duration without its unit", []string{"jobs", "--older-than", "5"}, `"5" for flag -older-than: want a duration with its unit`},
		{"a visibility without its unit", []string{"redrive", "--visibility", "30"}, `"30" for flag -visibility: want a duration with its unit`},
		// Each bad flag is named alone, with its value.
		{"a negative age", []string{"jobs", "--stack", "x", "--older-than", "-1h"}, "invalid value -1h0m0s for flag --older-than"},
		{"a negative page size", []string{"jobs", "--stack", "x", "--page-size", "-1"}, "invalid value -1 for flag --page-size"},
		{"job id not a number", []string{"job", "seven"}, `"seven"`},
		{"job without id", []string{"job"}, "want 1 argument"},
		// A negative id is a bad id, not an unknown flag -5.
		{"job id negative", []string{"job", "-5", "--stack", "x"}, `job ID "-5": want a positive integer`},
		{"retry id negative among good ones", []string{"retry", "--json", "4", "-5", "--stack", "x"}, `job ID "-5": want a positive integer`},
		// A flag's negative value is still its value.
		{"a negative --max", []string{"redrive", "--max", "-1", "--stack", "x"}, "invalid value -1 for flag --max"},
		{"retry without an id", []string{"retry"}, "want one or more arguments"},
		// A bad id anywhere refuses the whole list before anything is written.
		{"retry with a bad id among good ones", []string{"retry", "1", "x2", "3", "--stack", "s"}, `"x2"`},
		{"retry with - and ids", []string{"retry", "-", "2"}, `"-" (job ids from standard input) comes alone`},
		// Without the stack, the deployment's shard count must be said: a
		// record on a shard the reclaimer never reads has no backstop.
		{"retry without the shard count", []string{"retry", "1", "--table", "t", "--queue-url", "http://q"}, "--sweep-shards"},
		{"no table", []string{"rate"}, "--table"},
		{"unknown command", []string{"jbos"}, `"jbos"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, nil, tt.args...)
			if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tt.want) || !strings.Contains(r.stderr, "usage: ghclaim") {
				t.Fatalf("exit %d, stderr %q; want exit 2 and a usage naming %s", r.code, r.stderr, tt.want)
			}
		})
	}
}

func TestJob(t *testing.T) {
	id := ids(t)
	t.Parallel()
	seedFailed(t, id(7101), "job-x64", now.Add(-time.Hour))
	env.gh.SetJob("octo", "app", ghfake.Job{ID: id(7101), RunID: 9, Status: "queued", Labels: []string{"self-hosted", "linux"}})

	r := run(t, nil, gh("job", fmt.Sprint(id(7101)))...)
	if r.code != 0 || !strings.Contains(r.stdout, "failed (version 4, attempt 3)") || !strings.Contains(r.stdout, "github") || !strings.Contains(r.stdout, "queued") {
		t.Fatalf("job 7101: exit %d\n%s", r.code, r.stdout)
	}
	// The history, oldest first: created, leased, released for a retry,
	// leased, failed.
	hist := strings.Join(strings.Fields(r.stdout[strings.Index(r.stdout, "\nhistory:"):]), " ")
	for _, line := range []string{"new → pending attempt 0 webhook", "pending → claiming", "claiming → queued attempt 2 claimer server_side 502 Bad Gateway",
		"queued → claiming", "claiming → failed attempt 3 claimer non_retryable …group 7 not found"} {
		i := strings.Index(hist, line)
		if i < 0 {
			t.Fatalf("job 7101: history lacks %q in order\n%s", line, r.stdout)
		}
		hist = hist[i:]
	}
	r = run(t, nil, gh("job", fmt.Sprint(id(7101)), "--json")...)
	got := decode[map[string]any](t, r.stdout)
	if g, _ := got["github"].(map[string]any); r.code != 0 || got["state"] != "failed" || g["status"] != "queued" {
		t.Fatalf("job --json: exit %d, got %v", r.code, got)
	}

	// GitHub out of reach: the record is still shown, the reason said.
	r = run(t, nil, "job", fmt.Sprint(id(7101)), "--stack", env.stack.Name, "--app-id", strconv.Itoa(appID), "--github-api-url", "http://127.0.0.1:1", "--json")
	got = decode[map[string]any](t, r.stdout)
	if g, _ := got["github"].(map[string]any); r.code != 0 || got["state"] != "failed" || g["status"] != nil || !strings.Contains(fmt.Sprint(g["error"]), "127.0.0.1:1") {
		t.Fatalf("job with GitHub unreachable: exit %d, got %v; want the record and the reason", r.code, got)
	}

	// A job GitHub holds for its reviewers: the looks that found it held
	// and when the reclaimer looks again.
	ctx, s := context.Background(), newStore()
	_, err := s.CreateJob(ctx, rec(id(7102), "job-x64"), now.Add(-time.Hour))
	must(t, err)
	l, _, err := s.Acquire(ctx, id(7102), 1, "claimer-1", now.Add(time.Minute), now.Add(-time.Hour))
	must(t, err)
	must(t, s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "job-x64-7102"}, now.Add(-time.Hour)))
	held, err := s.Get(ctx, id(7102))
	must(t, err)
	next := now.Add(20 * time.Minute).Truncate(time.Second)
	_, err = s.Recheck(ctx, held, next, job.CheckWaiting, now)
	must(t, err)
	r = run(t, nil, gh("job", fmt.Sprint(id(7102)))...)
	if want := "1 looks in a row found it waiting or pending; next look " + next.UTC().Format(time.RFC3339); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Fatalf("job 7102 held at GitHub: exit %d, want %q in\n%s", r.code, want, r.stdout)
	}
	r = run(t, nil, gh("job", fmt.Sprint(id(7102)), "--json")...)
	if got := decode[map[string]any](t, r.stdout); got["waits"] != float64(1) || got["next_look"] != next.UTC().Format(time.RFC3339) {
		t.Fatalf("job 7102 --json: waits %v, next_look %v; want 1 and %s", got["waits"], got["next_look"], next.UTC().Format(time.RFC3339))
	}

	// A public user's repository, as its queued delivery described it.
	pub := rec(id(7103), "job-x64")
	pub.Public, pub.UserOwned = true, true
	_, err = s.CreateJob(ctx, pub, now.Add(-time.Hour))
	must(t, err)
	r = run(t, nil, gh("job", fmt.Sprint(id(7103)))...)
	if r.code != 0 || !strings.Contains(r.stdout, "octo/app (public, a user's)") {
		t.Fatalf("job 7103: exit %d, want the repository described as public and a user's in\n%s", r.code, r.stdout)
	}
	r = run(t, nil, gh("job", fmt.Sprint(id(7103)), "--json")...)
	if got := decode[map[string]any](t, r.stdout); got["public"] != true || got["user_owned"] != true {
		t.Fatalf("job 7103 --json: public %v, user_owned %v; want both true", got["public"], got["user_owned"])
	}

	// Retried after its runner was asked for in the repository: where
	// the next attempt looks first should the pool's scope change.
	_, err = s.CreateJob(ctx, rec(id(7104), "job-x64"), now.Add(-time.Hour))
	must(t, err)
	l, _, err = s.Acquire(ctx, id(7104), 1, "claimer-1", now.Add(time.Minute), now.Add(-time.Hour))
	must(t, err)
	must(t, s.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, Due: now, ErrorClass: "server_side", Error: "502",
		Runner: "job-x64-7104", Scope: "repo"}, now.Add(-time.Hour)))
	r = run(t, nil, gh("job", fmt.Sprint(id(7104)))...)
	if r.code != 0 || !regexp.MustCompile(`last tried +job-x64-7104 \(repo\)`).MatchString(r.stdout) {
		t.Fatalf("job 7104: exit %d, want the runner it last tried, in the repository, in\n%s", r.code, r.stdout)
	}
	r = run(t, nil, gh("job", fmt.Sprint(id(7104)), "--json")...)
	if got := decode[map[string]any](t, r.stdout); got["tried_runner"] != "job-x64-7104" || got["tried_scope"] != "repo" {
		t.Fatalf("job 7104 --json: tried_runner %v, tried_scope %v; want job-x64-7104 and repo", got["tried_runner"], got["tried_scope"])
	}

	r = run(t, nil, gh("job", "7199")...)
	if r.code != cli.ExitFail || strings.TrimSpace(r.stderr) != "job 7199 not found" {
		t.Fatalf("unknown job: exit %d, stderr %q; want exit 1, job 7199 not found", r.code, r.stderr)
	}
}

// TestRetry and TestRedrive both read the stack's claims queue: they run
// one after the other (not in parallel), or one's receive would hide the
// other's message for a visibility timeout, or push it to the DLQ.
func TestRetry(t *testing.T) {
	id := ids(t)
	ctx := context.Background()
	stack := env.stack
	failed := seedFailed(t, id(7201), "retry-x64", now.Add(-time.Hour))

	r := run(t, nil, "retry", fmt.Sprint(id(7201)), "--stack", stack.Name, "--json")
	got := decode[map[string]any](t, r.stdout)
	if r.code != 0 || got["state"] != "queued" || got["version"] != float64(failed.Version+1) || got["message_sent"] != true {
		t.Fatalf("retry: exit %d, got %v", r.code, got)
	}
	rec, err := newStore().Get(ctx, id(7201))
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != job.Queued || rec.Attempt != 0 || rec.FirstFailureAt != 0 || rec.LastError != "retried by operator alice" {
		t.Fatalf("record after retry: %+v", rec)
	}
	if n := len(rec.History); n != len(failed.History)+1 || rec.History[n-1].Actor != job.ActorOperator || rec.History[n-1].From != job.Failed {
		t.Fatalf("history after retry: %+v", rec.History)
	}
	// The claim message for the new version is on the claims queue.
	if !drainFor(t, stack.QueueURL, job.Message{JobID: id(7201), Version: failed.Version + 1}) {
		t.Fatalf("no claim message for job 7201 v%d on the claims queue", failed.Version+1)
	}

	r = run(t, nil, "retry", fmt.Sprint(id(7201)), "--stack", stack.Name)
	if r.code != cli.ExitFail || !strings.Contains(r.stderr, fmt.Sprintf("job %d is queued: only failed or abandoned jobs are retried", id(7201))) {
		t.Fatalf("retry of a queued job: exit %d, stderr %q", r.code, r.stderr)
	}
	// A stack that does not exist is named as such, without the SDK's
	// request trace around CloudFormation's "ValidationError".
	r = run(t, nil, "retry", fmt.Sprint(id(7201)), "--stack", "ghclaim-no-such-stack")
	if want := "stack ghclaim-no-such-stack not found: no such CloudFormation stack in this account and region"; r.code != cli.ExitFail || !strings.HasPrefix(r.stderr, want) {
		t.Fatalf("retry on a stack that does not exist: exit %d, stderr %q; want exit 1, %q", r.code, r.stderr, want)
	}
	r = run(t, nil, "retry", "7299", "--stack", stack.Name)
	if r.code != cli.ExitFail || strings.TrimSpace(r.stderr) != "job 7299 not found" {
		t.Fatalf("retry of an unknown job: exit %d, stderr %q", r.code, r.stderr)
	}
}

// drainFor receives from url until it finds want (job and version).
func drainFor(t *testing.T, url string, want job.Message) bool {
	t.Helper()
	api := sqs.NewFromConfig(env.cfg)
	for range 10 {
		out, err := api.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			got, err := job.DecodeMessage(aws.ToString(m.Body))
			if err == nil && got.JobID == want.JobID && got.Version == want.Version {
				return true
			}
		}
	}
	return false
}

func TestRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore()
	// 5001: exhausted a minute ago; 5002: at 0 but read an hour ago (stale).
	must(t, s.SaveRate(ctx, 5001, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: now.Add(20 * time.Minute), ObservedAt: now.Add(-time.Minute)}))
	must(t, s.SaveRate(ctx, 5002, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: now.Add(-30 * time.Minute), ObservedAt: now.Add(-time.Hour)}))
	must(t, s.SaveRate(ctx, 5003, ratelimit.Reading{Limit: 15000, Remaining: 14000, ResetAt: now.Add(40 * time.Minute), ObservedAt: now.Add(-10 * time.Second)}))
	// 5004: ample, but a secondary limit blocks it for 90 s more; 5005: a block alone (a 429).
	must(t, s.SaveRate(ctx, 5004, ratelimit.Reading{Limit: 5000, Remaining: 4000, ResetAt: now.Add(40 * time.Minute), ObservedAt: now.Add(-5 * time.Second)}))
	must(t, s.SaveBlock(ctx, 5004, now.Add(90*time.Second), 2*time.Minute))
	must(t, s.SaveBlock(ctx, 5005, now.Add(30*time.Second), time.Minute))

	r := run(t, nil, "rate", "--stack", env.stack.Name, "--json")
	got := map[float64]map[string]any{}
	for _, v := range decode[[]map[string]any](t, r.stdout) {
		got[v["installation_id"].(float64)] = v
	}
	want := map[float64][2]any{5001: {"exhausted", float64(60)}, 5002: {"stale", float64(3600)}, 5003: {"ok", float64(10)},
		5004: {"blocked", float64(5)}, 5005: {"blocked", float64(0)}}
	for id, w := range want {
		if g := got[id]; g == nil || g["status"] != w[0] || g["age_seconds"] != w[1] {
			t.Errorf("installation %v: got %v, want status %v, age %v s", id, g, w[0], w[1])
		}
	}
	if b := got[5004]["blocked_until"]; b != now.Add(90*time.Second).UTC().Format(time.RFC3339) {
		t.Errorf("installation 5004 blocked_until %v, want the block's end", b)
	}
	r = run(t, nil, "rate", "--stack", env.stack.Name)
	if r.code != 0 || !strings.Contains(r.stdout, "READING AGE") || !strings.Contains(r.stdout, "1h0m0s") || !strings.Contains(r.stdout, "blocked for 1m30s") {
		t.Fatalf("rate: exit %d\n%s", r.code, r.stdout)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// createLaunchTemplate makes a launch template on the emulator and returns its id.
func createLaunchTemplate(t *testing.T, name string) string {
	t.Helper()
	id, err := provisiontest.LaunchTemplate(context.Background(), ec2api.New(env.cfg), name, "", "m5.large")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

var ltOnce sync.Once
var ltID string

func TestDoctor(t *testing.T) {
	// Secrets and launch templates are named per run: a name stays taken
	// for the emulator's life. The run is spelt in letters (0 is a, 1 is
	// b): with a digit, a secret's name and the random suffix of its ARN
	// make a run of mixed case and digits that doctor's output redacts
	// (shared/redact), and the cases look for the ARN there.
	suffix := "-" + strings.Map(func(c rune) rune { return 'a' + c - '0' }, fmt.Sprint(emulator.Round(t)))
	t.Parallel()
	ltOnce.Do(func() { ltID = createLaunchTemplate(t, "ghclaim-doctor") })
	pools := func(lts ...string) string {
		var ps []string
		for i, lt := range lts {
			ps = append(ps, fmt.Sprintf(`{"name":"p%d","labels":["self-hosted"],"provisioner":{"type":"ec2","launch_template":%q}}`, i, lt))
		}
		return "[" + strings.Join(ps, ",") + "]"
	}
	type doc struct {
		OK     bool `json:"ok"`
		Checks []struct{ Name, Status, Detail string }
	}
	status := func(d doc) map[string]string {
		m := map[string]string{}
		for _, c := range d.Checks {
			m[c.Name] = c.Status
		}
		return m
	}
	// detail is the detail of the check name in doctor's --json output.
	detail := func(t *testing.T, stdout, name string) string {
		t.Helper()
		for _, c := range decode[doc](t, stdout).Checks {
			if c.Name == name {
				return c.Detail
			}
		}
		t.Fatalf("no %s check:\n%s", name, stdout)
		return ""
	}

	// The stack's dead-letter queue is shared with other tests: each
	// case names one of its own.
	emptyDLQ := newQueue(t, "doctor-dlq-empty")
	t.Run("healthy", func(t *testing.T) {
		r := run(t, nil, gh("doctor", "--pools", pools(ltID), "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ, "--json")...)
		d := decode[doc](t, r.stdout)
		if r.code != 0 || !d.OK {
			t.Fatalf("doctor: exit %d, %+v", r.code, d)
		}
		want := map[string]string{"webhook secret": "ok", "app private key": "ok", "github app": "ok", "app installations": "ok",
			"launch template of pool p0": "ok", "webhook ping": "ok", "dead-letter queue": "ok", "table": "ok", "claims queue": "ok"}
		if got := status(d); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("checks %v, want %v", got, want)
		}
		run(t, nil, gh("doctor", "--pools", pools(ltID), "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ)...)
	})

	// The operator's clock two minutes ahead of GitHub's: GitHub refuses
	// the App's JWT (dated by that clock) with a key that is right, and
	// the check says to look at the clock before suspecting the key.
	t.Run("a clock ahead of GitHub's", func(t *testing.T) {
		r := runConfig(t, context.Background(), cli.Config{DynamoDB: dynamodb.NewFromConfig(env.cfg), SQS: sqs.NewFromConfig(env.cfg),
			Now: func() time.Time { return now.Add(2 * time.Minute) }}, gh("doctor", "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ)...)
		if r.code != cli.ExitFail || !strings.Contains(r.stdout, "('iat')") || !strings.Contains(r.stdout, "dated by this machine's clock") {
			t.Fatalf("doctor: exit %d\n%s", r.code, r.stdout)
		}
	})

	// Each message in the dead-letter queue is a claim the claimer could
	// not handle: not healthy (an audit: doctor said OK with three).
	t.Run("messages in the dead-letter queue", func(t *testing.T) {
		dlq := newQueue(t, "doctor-dlq-full")
		fill(t, dlq, 3, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 7850+i) })
		r := run(t, nil, gh("doctor", "--pools", pools(ltID), "--webhook-url", env.hookURL, "--dlq-url", dlq, "--json")...)
		d := decode[doc](t, r.stdout)
		if got := status(d); r.code != cli.ExitFail || d.OK || got["dead-letter queue"] != "fail" || !strings.Contains(r.stdout, "3 message(s)") {
			t.Fatalf("doctor: exit %d, checks %v", r.code, got)
		}
	})

	// A table or claims queue that does not answer (a wrong name, a
	// missing permission) stops every delivery and claim: not healthy.
	t.Run("a table and a claims queue that do not answer", func(t *testing.T) {
		missing := strings.TrimSuffix(emptyDLQ, "doctor-dlq-empty") + "no-such-queue"
		r := run(t, nil, gh("doctor", "--pools", pools(ltID), "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ,
			"--table", "no-such-table", "--queue-url", missing, "--json")...)
		got := status(decode[doc](t, r.stdout))
		if r.code != cli.ExitFail || got["table"] != "fail" || got["claims queue"] != "fail" || !strings.Contains(r.stdout, "no-such-table") {
			t.Fatalf("doctor: exit %d, checks %v\n%s", r.code, got, r.stdout)
		}
	})

	// A secret of only separators (what "new,old" leaves with both
	// deleted) has no value: the webhook answers every delivery 503.
	t.Run("a webhook secret of no value", func(t *testing.T) {
		out, err := secretsmanager.NewFromConfig(env.cfg).CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
			Name: aws.String("ghclaim-doctor-commas" + suffix), SecretString: aws.String(" , ")})
		must(t, err)
		r := run(t, nil, gh("doctor", "--webhook-secret-arn", aws.ToString(out.ARN), "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ, "--json")...)
		got := status(decode[doc](t, r.stdout))
		if r.code != cli.ExitFail || got["webhook secret"] != "fail" || got["webhook ping"] != "skip" {
			t.Fatalf("doctor: exit %d, checks %v", r.code, got)
		}
	})

	// A webhook secret of two values is a rotation list: doctor says a
	// comma separates two values, as a secret typed into GitHub with a
	// comma in it passes the ping (signed with the first value) and never
	// verifies a delivery.
	t.Run("a webhook secret of two values", func(t *testing.T) {
		out, err := secretsmanager.NewFromConfig(env.cfg).CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
			Name: aws.String("ghclaim-doctor-rotation" + suffix), SecretString: aws.String(env.hookKey + ",an-older-secret")})
		must(t, err)
		r := run(t, nil, gh("doctor", "--webhook-secret-arn", aws.ToString(out.ARN), "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ, "--json")...)
		got := detail(t, r.stdout, "webhook secret")
		if !strings.Contains(got, "2 values") || !strings.Contains(got, "a secret with a comma in it never verifies") ||
			!strings.Contains(detail(t, r.stdout, "webhook ping"), "first value") {
			t.Fatalf("doctor: webhook secret %q, want 2 values read as a rotation list\n%s", got, r.stdout)
		}
	})

	// A launch template made for the release at 674a79e (no instance
	// metadata tags, shutdown behaviour stop): the claimer refuses to
	// launch from it, so every job of its pool fails; doctor says so first.
	t.Run("a launch template unfit for the claimer", func(t *testing.T) {
		old, err := provisiontest.LaunchTemplateWith(context.Background(), ec2api.New(env.cfg), "ghclaim-doctor-release"+suffix, "", "m5.large", nil)
		must(t, err)
		r := run(t, nil, gh("doctor", "--pools", pools(ltID, old), "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ, "--json")...)
		got := status(decode[doc](t, r.stdout))
		if r.code != cli.ExitFail || got["launch template of pool p1"] != "fail" || got["launch template of pool p0"] != "ok" ||
			!strings.Contains(r.stdout, "InstanceMetadataTags") || !strings.Contains(r.stdout, "InstanceInitiatedShutdownBehavior") {
			t.Fatalf("doctor: exit %d, checks %v\n%s", r.code, got, r.stdout)
		}
	})

	t.Run("a missing secret and a missing launch template", func(t *testing.T) {
		missing := "arn:aws:secretsmanager:" + emulator.Region + ":123456789012:secret:ghclaim-nope-AbCdEf"
		r := run(t, nil, gh("doctor", "--pools", pools(ltID, "lt-0123456789abcdef0"), "--webhook-url", env.hookURL,
			"--webhook-secret-arn", missing, "--json")...)
		d := decode[doc](t, r.stdout)
		got := status(d)
		if r.code != cli.ExitFail || d.OK || got["webhook secret"] != "fail" || got["launch template of pool p1"] != "fail" ||
			got["launch template of pool p0"] != "ok" || got["webhook ping"] != "skip" {
			t.Fatalf("doctor: exit %d, checks %v", r.code, got)
		}
		run(t, nil, gh("doctor", "--pools", pools(ltID, "lt-0123456789abcdef0"), "--webhook-url", env.hookURL, "--webhook-secret-arn", missing)...)
	})

	// An installation that lacks a permission its pools' calls need (an
	// App made by hand without it, new permissions the owner has not
	// accepted) fails every such job non_retryable with GitHub's 403
	// "Resource not accessible by integration": doctor says so, naming
	// the permission, and does not ask for what no pool needs.
	t.Run("an installation that lacks a permission", func(t *testing.T) {
		fake := ghfake.New(ghfake.WithClock(func() time.Time { return now }))
		noOrgRunners := ghfake.DefaultPermissions()
		delete(noOrgRunners, "organization_self_hosted_runners")
		fake.AddInstallation(ghfake.Installation{ID: 77, Account: "octo", Org: true, Permissions: noOrgRunners})
		srv := httptest.NewServer(fake)
		defer srv.Close()
		doctor := func(scope string) (result, map[string]string) {
			ps := fmt.Sprintf(`[{"name":"p0","labels":["self-hosted"],"scope":%q,"provisioner":{"type":"ec2","launch_template":%q}}]`, scope, ltID)
			r := run(t, nil, "doctor", "--pools", ps, "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ, "--json",
				"--stack", env.stack.Name, "--app-id", strconv.Itoa(appID), "--github-api-url", srv.URL)
			return r, status(decode[doc](t, r.stdout))
		}
		r, got := doctor("org")
		if r.code != cli.ExitFail || got["app installations"] != "fail" || !strings.Contains(r.stdout, "organization_self_hosted_runners:write") {
			t.Fatalf("org pool: exit %d, checks %v\n%s", r.code, got, r.stdout)
		}
		if r, got = doctor("repo"); r.code != 0 || got["app installations"] != "ok" {
			t.Fatalf("repo pool: exit %d, checks %v\n%s", r.code, got, r.stdout)
		}
	})

	// A suspended installation is listed like any other, but GitHub
	// refuses its token exchange (403): every job of it waits, retried as
	// the App's fault, until MAX_AGE abandons it. Doctor said OK.
	t.Run("a suspended installation", func(t *testing.T) {
		fake := ghfake.New(ghfake.WithClock(func() time.Time { return now }))
		fake.AddInstallation(ghfake.Installation{ID: 77, Account: "octo", Org: true})
		fake.AddInstallation(ghfake.Installation{ID: 78, Account: "mona"})
		fake.Suspend(77)
		srv := httptest.NewServer(fake)
		defer srv.Close()
		doctor := func() (result, string, string) {
			r := run(t, nil, "doctor", "--pools", pools(ltID), "--webhook-url", env.hookURL, "--dlq-url", emptyDLQ, "--json",
				"--stack", env.stack.Name, "--app-id", strconv.Itoa(appID), "--github-api-url", srv.URL)
			for _, c := range decode[doc](t, r.stdout).Checks {
				if c.Name == "app installations" {
					return r, c.Status, c.Detail
				}
			}
			t.Fatalf("no app installations check:\n%s", r.stdout)
			return r, "", ""
		}
		r, st, detail := doctor()
		want := "suspended: octo (77) since " + now.Format(time.RFC3339) + " by octo-admin: GitHub refuses its tokens (403)"
		if r.code != cli.ExitFail || st != "fail" || !strings.HasPrefix(detail, want) || !strings.Contains(detail, "Unsuspend") || strings.Contains(detail, "mona") {
			t.Fatalf("exit %d, app installations %s %q; want fail starting %q, saying how to unsuspend, not naming mona (78)", r.code, st, detail, want)
		}
		fake.Unsuspend(77)
		if r, st, detail = doctor(); r.code != 0 || st != "ok" || detail != "octo (77), mona (78)" {
			t.Fatalf("unsuspended: exit %d, app installations %s %q; want ok naming both", r.code, st, detail)
		}
	})

	t.Run("the key is still the template's placeholder", func(t *testing.T) {
		sm := secretsmanager.NewFromConfig(env.cfg)
		out, err := sm.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{Name: aws.String("ghclaim-doctor-placeholder" + suffix), SecretString: aws.String("REPLACE-WITH-THE-GITHUB-APP-PRIVATE-KEY-PEM")})
		must(t, err)
		r := run(t, nil, gh("doctor", "--app-key-arn", aws.ToString(out.ARN), "--webhook-url", env.hookURL, "--json")...)
		got := status(decode[doc](t, r.stdout))
		if r.code != cli.ExitFail || got["app private key"] != "fail" || got["github app"] != "skip" || got["webhook ping"] != "ok" {
			t.Fatalf("doctor: exit %d, checks %v", r.code, got)
		}
		if d := detail(t, r.stdout, "app private key"); !strings.Contains(d, "still the template's placeholder") {
			t.Errorf("app private key: got %q, want it to say the placeholder is still there", d)
		}
	})

	// The App key's secret as operators fill it: the PEM put as bytes
	// (--secret-binary fileb://app.pem) is the key; the public half, or
	// nothing (created, never set), is named for what it is, with the
	// secret's ARN and never a byte of the value.
	t.Run("the key's secret as operators fill it", func(t *testing.T) {
		sm := secretsmanager.NewFromConfig(env.cfg)
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		must(t, err)
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		must(t, err)
		pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
		tests := []struct {
			name, status, want string
			in                 secretsmanager.CreateSecretInput
		}{
			{name: "binary", status: "ok", want: "an RSA private key", in: secretsmanager.CreateSecretInput{SecretBinary: priv}},
			{name: "public", status: "fail", want: "a public key, not a private key", in: secretsmanager.CreateSecretInput{SecretString: aws.String(string(pub))}},
			{name: "never-set", status: "fail", want: "has no AWSCURRENT value", in: secretsmanager.CreateSecretInput{}},
		}
		for _, tt := range tests {
			tt.in.Name = aws.String("ghclaim-doctor-key-" + tt.name + suffix)
			out, err := sm.CreateSecret(context.Background(), &tt.in)
			must(t, err)
			r := run(t, nil, gh("doctor", "--app-key-arn", aws.ToString(out.ARN), "--webhook-url", env.hookURL, "--json")...)
			got, d := status(decode[doc](t, r.stdout))["app private key"], detail(t, r.stdout, "app private key")
			if got != tt.status || !strings.Contains(d, tt.want) || (tt.status == "fail" && !strings.Contains(d, aws.ToString(out.ARN))) {
				t.Errorf("%s: app private key %s %q; want %s saying %q and naming the secret", tt.name, got, d, tt.status, tt.want)
			}
			for _, v := range [][]byte{pub, priv} {
				if line := strings.Split(string(v), "\n")[1]; strings.Contains(r.stdout+r.stderr, line) {
					t.Errorf("%s: doctor printed the key material:\n%s", tt.name, r.stdout)
				}
			}
		}
	})
}

// failingSend is the real SQS client whose SendMessage to the claims queue
// fails, as a throttled or unreachable queue would.
type failingSend struct {
	*sqs.Client
	sends int
	waits []int32 // each receive's WaitTimeSeconds
}

func (f *failingSend) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.waits = append(f.waits, in.WaitTimeSeconds)
	return f.Client.ReceiveMessage(ctx, in, optFns...)
}

func (f *failingSend) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.sends++
	return nil, fmt.Errorf("send refused by the test")
}

func TestRedrive(t *testing.T) {
	id := ids(t)
	ctx := context.Background()
	api := sqs.NewFromConfig(env.cfg)
	dlq := env.stack.DLQURL
	// The undecodable message stays in the stack's DLQ: gone when the test
	// ends, or the next run would count it among its own.
	t.Cleanup(func() {
		if _, err := api.PurgeQueue(context.Background(), &sqs.PurgeQueueInput{QueueUrl: &dlq}); err != nil {
			t.Errorf("purge the DLQ: %v", err)
		}
	})
	for _, body := range []string{fmt.Sprintf(`{"job_id":%d,"version":3,"attempt":2}`, id(7301)), fmt.Sprintf(`{"job_id":%d,"version":1}`, id(7302)), `not a claim message`} {
		_, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(body)})
		must(t, err)
	}
	inDLQ := func() int {
		out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &dlq, AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
		must(t, err)
		a, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
		b, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
		return a + b
	}

	// The claims queue refuses: nothing leaves the DLQ.
	fail := &failingSend{Client: api}
	r := run(t, fail, "redrive", "--stack", env.stack.Name, "--json")
	rep := decode[map[string]float64](t, r.stdout)
	if r.code != cli.ExitFail || rep["moved"] != 0 || rep["send_failed"] != 2 || rep["undecodable"] != 1 || fail.sends != 2 {
		t.Fatalf("redrive with failing sends: exit %d, %v (%d sends)", r.code, rep, fail.sends)
	}
	if n := inDLQ(); n != 3 {
		t.Fatalf("%d messages in the DLQ after failed sends, want all 3 still there", n)
	}
	// Long polls: a short poll may answer empty while messages remain, and
	// the run would stop there.
	if len(fail.waits) == 0 || slices.Contains(fail.waits, 0) {
		t.Fatalf("receives waited %v s, want long polls", fail.waits)
	}

	// --max bounds what one run moves.
	r = run(t, nil, "redrive", "--stack", env.stack.Name, "--max", "1", "--json")
	if rep := decode[map[string]float64](t, r.stdout); r.code != 0 || rep["moved"]+rep["undecodable"] != 1 {
		t.Fatalf("redrive --max 1: exit %d, %v; want one message taken", r.code, rep)
	}
	if n := inDLQ(); n != 2 && n != 3 {
		t.Fatalf("%d messages in the DLQ after redrive --max 1, want 2 (one moved) or 3 (the undecodable one left)", n)
	}
	r = run(t, nil, "redrive", "--stack", env.stack.Name)
	if r.code != cli.ExitFail || !strings.Contains(r.stdout, "message(s) to the claims queue") || !strings.Contains(r.stderr, "not a claim message") {
		t.Fatalf("redrive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := inDLQ(); n != 1 {
		t.Fatalf("%d messages in the DLQ after the redrive, want only the undecodable one", n)
	}
	if !drainFor(t, env.stack.QueueURL, job.Message{JobID: id(7301), Version: 3}) {
		t.Fatal("job 7301 v3 is not on the claims queue after the redrive")
	}
}

// TestJobsWithAnUnreadableItemFails: an item jobs cannot read as a job
// record (written by hand, or by a newer version) is named on stderr and
// the listing, printed whole, exits 1: a script that reads it must not
// take it for complete. It once exited 0. Its own table, so the item
// cannot reach the other listings of this package.
func TestJobsWithAnUnreadableItemFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dynamodb.NewFromConfig(env.cfg)
	table := "jobs-unreadable"
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
		BillingMode:          dbtypes.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Errorf("delete table %s: %v", table, err)
		}
	})
	if _, err := store.New(db, table, store.Options{}).CreateJob(ctx, rec(7301, "jobs-x64"), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]dbtypes.AttributeValue{
		"pk":    &dbtypes.AttributeValueMemberS{Value: "job#not-a-number"},
		"state": &dbtypes.AttributeValueMemberS{Value: "queued"},
	}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "jobs", "--table", table, "--json")
	got := decode[[]map[string]any](t, r.stdout)
	if r.code != cli.ExitFail || len(got) != 1 || got[0]["job_id"] != float64(7301) || !strings.Contains(r.stderr, "job#not-a-number") {
		t.Fatalf("jobs over an unreadable item: exit %d, %v, stderr %q; want exit 1, job 7301 listed, the item named", r.code, got, r.stderr)
	}
}
