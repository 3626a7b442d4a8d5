package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/cli"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
)

// TestRetryManyJobsPaced: after an incident an operator retries every
// failed job; retry took one id, so a shell loop sent all their claims
// together (the herd DESIGN.md bounds wherever many claims are released
// at once). retry takes many ids, or "-" to read them from standard input
// (what `ghclaim jobs --state failed --json | jq` prints); each job is
// tried whatever befell the others, and the claims go out paced as
// redrive's copies are.
func TestRetryManyJobsPaced(t *testing.T) {
	id := ids(t)
	ctx := context.Background()
	var failed []job.Record
	for _, j := range []int64{id(7611), id(7612), id(7613)} {
		failed = append(failed, seedFailed(t, j, "retry-many", now.Add(-time.Hour)))
	}
	if _, err := newStore().CreateJob(ctx, rec(id(7614), "retry-many"), now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	clk := &pacedClock{t: now}
	api := &sendTimes{Client: sqs.NewFromConfig(env.cfg), clk: clk, sendTook: 200 * time.Millisecond, received: map[string]time.Time{}}
	r := runConfig(t, ctx, cli.Config{DynamoDB: dynamodb.NewFromConfig(env.cfg), SQS: api, Now: clk.Now, Sleep: clk.Sleep, Rand: random.New(3),
		Stdin: strings.NewReader(fmt.Sprintf("%d,%d %d\n%d\n%d\n", id(7611), id(7612), id(7613), id(7614), id(7611)))},
		"retry", "-", "--stack", env.stack.Name, "--json")
	if r.code != cli.ExitFail || !strings.Contains(r.stderr, fmt.Sprintf("job %d is pending: only failed or abandoned jobs are retried", id(7614))) || !strings.Contains(r.stderr, "1 of 4 jobs not retried") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming job 7614 (pending) and 1 of 4 not retried", r.code, r.stderr)
	}
	got := decode[[]map[string]any](t, r.stdout)
	if len(got) != 4 {
		t.Fatalf("%d results, want 4 (one per distinct id): %v", len(got), got)
	}
	for i, f := range failed {
		if got[i]["job_id"] != float64(f.JobID) || got[i]["state"] != "queued" || got[i]["message_sent"] != true {
			t.Errorf("result %d: %v; want job %d queued with its message sent", i, got[i], f.JobID)
		}
		rec, err := newStore().Get(ctx, f.JobID)
		if err != nil || rec.State != job.Queued || rec.Version != f.Version+1 {
			t.Errorf("job %d after the retry: %+v, %v; want queued at version %d", f.JobID, rec, err, f.Version+1)
		}
	}
	if got[3]["job_id"] != float64(id(7614)) || !strings.Contains(got[3]["error"].(string), "is pending") {
		t.Errorf("result 3: %v; want job 7614's refusal", got[3])
	}
	if len(api.starts) != 3 || !api.starts[0].Equal(now) {
		t.Fatalf("claim sends at %v; want 3, the first at once", api.starts)
	}
	for i := 1; i < len(api.starts); i++ {
		if gap := api.starts[i].Sub(api.answers[i-1]); gap < 500*time.Millisecond {
			t.Errorf("claim %d sent %v after claim %d's answer; want ≥ 500ms", i, gap, i-1)
		}
	}
}

// TestRetryFromStdinPrintsAnArrayForOneID: "retry -" is the list form (the
// README's pipe of every failed job of a pool), and its --json is an
// array; a list that happened to hold one id printed a bare object, so a
// script reading the array broke on the day one job had failed.
func TestRetryFromStdinPrintsAnArrayForOneID(t *testing.T) {
	id := ids(t)
	ctx := context.Background()
	seedFailed(t, id(7631), "retry-one", now.Add(-time.Hour))
	r := runConfig(t, ctx, cli.Config{DynamoDB: dynamodb.NewFromConfig(env.cfg), SQS: sqs.NewFromConfig(env.cfg), Now: func() time.Time { return now },
		Stdin: strings.NewReader(fmt.Sprintln(id(7631)))},
		"retry", "-", "--stack", env.stack.Name, "--json")
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d, stderr %q; want 0", r.code, r.stderr)
	}
	got := decode[[]map[string]any](t, r.stdout)
	if len(got) != 1 || got[0]["job_id"] != float64(id(7631)) || got[0]["state"] != "queued" {
		t.Fatalf("got %v; want one result, job 7631 queued", got)
	}
}
