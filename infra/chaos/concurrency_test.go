package chaos

// Concurrency tests: the races the conditional writes exist for, run
// against the real store, webhook, claimer and reclaimer on moto. Repeat
// them to shake out interleavings:
//
//	go test -run TestRace -count=20 ./infra/chaos/

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/store"
)

// setup builds a fault-free world: the template's table and queues on
// moto, ghfake, both pools, the webhook, and fresh claimers on demand.
func setup(t *testing.T) *run {
	t.Helper()
	return setupOn(t, emulator.ForTest(t), Config{Seed: 9})
}

// setupOn is setup on srv with c (its defaults filled in): the pools
// deployed take their start grace from it. A test that runs a janitor
// pass needs a server of its own (emulator.OwnForTest): the pass lists
// every tagged machine of the account, and would end those of the other
// tests of the binary on the shared one.
func setupOn(t *testing.T, srv *emulator.Server, c Config) *run {
	t.Helper()
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	cfg.HTTPClient = &emulator.Retries{Next: cfg.HTTPClient} // for messages
	r := &run{
		cfg:   c.withDefaults(),
		world: World{AWS: cfg, TableName: stack.TableName, QueueURL: stack.QueueURL},
		logs:  newLogSink(io.Discard),
		sem:   make(chan struct{}, 64),
	}
	r.stats.statuses = map[int]int{}
	r.inj = NewInjector(random.New(1), 0, nil)
	r.log = obs.NewLogger(r.logs, "info")
	if err := r.setUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.tearDown)
	return r
}

// messages drains the claims queue and returns the decoded messages. A
// copy of one that the SDK's retries of a send explain (a send whose
// answer was cut on a busy box, sent again) is the one message, as the
// claimer takes it: only one is returned. Every other copy stays.
func (r *run) messages(t *testing.T) []job.Message {
	t.Helper()
	var bodies []string
	for empty := 0; empty < 2; {
		res, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(r.world.QueueURL), MaxNumberOfMessages: 10, VisibilityTimeout: 300,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range res.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
	}
	bodies, copies := emulator.WithoutRetried(r.world.AWS.HTTPClient.(*emulator.Retries), bodies, func(b string) string { return b }, "SendMessage", "SendMessageBatch")
	if copies > 0 {
		t.Logf("messages: %d copied by the SDK's retries of a send", copies)
	}
	var out []job.Message
	for _, b := range bodies {
		msg, err := queue.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msg)
	}
	return out
}

// undelayed sends every message with no delay: a test that counts the
// messages sent, not when they arrive, receives the delayed ones too.
type undelayed struct{ queue.SQS }

func (u undelayed) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	cp := *in
	cp.DelaySeconds = 0
	return u.SQS.SendMessage(ctx, &cp, opt...)
}

func (u undelayed) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	cp := *in
	cp.Entries = slices.Clone(in.Entries)
	for i := range cp.Entries {
		cp.Entries[i].DelaySeconds = 0
	}
	return u.SQS.SendMessageBatch(ctx, &cp, opt...)
}

func (r *run) get(t *testing.T, id int64) job.Record {
	t.Helper()
	rec, err := r.stores[fnClaimer].Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func testJob(id int64) Job {
	return Job{ID: id, RunID: id * 10, Repo: "acme/app-1", InstallationID: Installations[0], Labels: []string{"self-hosted", "gpu"}, Private: true}
}

// TestRaceDuplicateDeliveries: 50 concurrent deliveries of one queued event,
// under one GUID (GitHub's redelivery) and under 50 GUIDs (manual
// redeliveries): every answer is 2xx, one record, one claim message.
func TestRaceDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		sameGUID bool
	}{
		{name: "one GUID", sameGUID: true},
		{name: "fifty GUIDs", sameGUID: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t)
			id := int64(5001)
			body := Payload(testJob(id), "queued", "")
			var wg sync.WaitGroup
			codes := make([]int, 50)
			for i := range codes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					guid := "d-0"
					if !tc.sameGUID {
						guid = fmt.Sprintf("d-%d", i)
					}
					resp, _ := r.webhookFor().Handle(context.Background(), Delivery{GUID: guid, Event: "workflow_job", Body: body}.Request(Secret))
					codes[i] = resp.StatusCode
				}()
			}
			wg.Wait()
			accepted := 0
			for i, c := range codes {
				if c >= 300 {
					t.Errorf("delivery %d: got status %d, want 2xx", i, c)
				}
				if c == http.StatusAccepted {
					accepted++
				}
			}
			if accepted != 1 {
				t.Errorf("deliveries accepted (202): got %d, want exactly 1", accepted)
			}
			msgs := r.messages(t)
			if len(msgs) != 1 || msgs[0].JobID != id || msgs[0].Version != 1 {
				t.Errorf("claim messages: got %+v, want one for job %d version 1", msgs, id)
			}
			// The webhook leaves the record pending: the claimer leases it
			// as is, and the reclaimer re-sends it only past its grace.
			if rec := r.get(t, id); rec.State != job.Pending || rec.Version != 1 {
				t.Errorf("record: got %s v%d, want pending v1", rec.State, rec.Version)
			}
		})
	}
}

// TestRaceInProgressBeforeQueued races in_progress against its queued for
// 20 jobs at once, then lets a claimer work the queue: every job ends done,
// and no runner is ever registered for a job GitHub already gave to
// another runner.
func TestRaceInProgressBeforeQueued(t *testing.T) {
	t.Parallel()
	r := setup(t)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		j := testJob(6000 + int64(i))
		for k, action := range []string{"queued", "in_progress"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := Delivery{GUID: fmt.Sprintf("g-%d-%d", j.ID, k), Event: "workflow_job", Body: Payload(j, action, "hosted-7")}
				if resp, _ := r.webhookFor().Handle(context.Background(), d.Request(Secret)); resp.StatusCode >= 300 {
					t.Errorf("job %d %s: status %d", j.ID, action, resp.StatusCode)
				}
			}()
		}
	}
	wg.Wait()
	for i := range n {
		if rec := r.get(t, 6000+int64(i)); rec.State != job.Done {
			t.Errorf("job %d: got %s, want done", rec.JobID, rec.State)
		}
	}
	// Whatever messages the queued deliveries sent, a claimer drops them.
	c, _, err := r.newClaimer(0)
	if err != nil {
		t.Fatal(err)
	}
	for handled := 0; ; handled++ {
		res, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.world.QueueURL), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 || handled > n {
			break
		}
		ev := events.SQSEvent{}
		for _, m := range res.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := c.Handle(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "r"}), ev)
		cancel()
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("claimer: %v, %d failures", err, len(resp.BatchItemFailures))
		}
	}
	if st := r.gh.Stats(); st.JITCalls != 0 || len(r.gh.Runners()) != 0 {
		t.Errorf("JIT calls %d, runners %d: want none for jobs already taken", st.JITCalls, len(r.gh.Runners()))
	}
}

// TestRaceReclaimers: two reclaimers and the late claimer whose lease
// expired race on the same stale records. For every job exactly one side
// wins: either the late claimer's fenced Finish (claimed, no message), or
// one take-back (queued at version+1, exactly one message).
func TestRaceReclaimers(t *testing.T) {
	t.Parallel()
	r := setup(t)
	st := r.stores[fnClaimer]
	ctx := context.Background()
	const n = 12
	now := time.Now()
	leases := make([]store.Lease, n)
	for i := range n {
		id := int64(7000 + i)
		rec, err := st.CreateJob(ctx, job.Record{JobID: id, RunID: 1, Repo: "acme/app-1", InstallationID: Installations[0], Labels: []string{"self-hosted", "gpu"}, Pool: PoolDispatch}, now.Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		// A claimer took the lease and died: it expired a second ago.
		l, _, err := st.Acquire(ctx, id, rec.Version, "late-claimer", now.Add(-time.Second), now.Add(-30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	// The reclaimers spread the jobs they take back over seconds of
	// DelaySeconds; messages receives at once, so it counts them sent
	// without their delays.
	sends := queue.New(undelayed{r.sqs}, r.world.QueueURL)
	newReclaimer := func(seed uint64) *reclaim.Reclaimer {
		rc, err := reclaim.New(reclaim.Config{
			Store: r.stores[fnReclaimer], Queue: sends,
			Now: time.Now, Rand: random.New(seed), Logger: r.log, Budget: 20 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	var wg sync.WaitGroup
	late := make([]error, n)
	for _, rc := range []*reclaim.Reclaimer{newReclaimer(1), newReclaimer(2)} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rc.Run(ctx); err != nil {
				t.Errorf("reclaimer: %v", err)
			}
		}()
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			late[i] = st.Finish(ctx, leases[i], store.Outcome{State: job.Claimed, Attempt: 1, RunnerName: job.RunnerName(PoolDispatch, leases[i].JobID)}, time.Now())
		}()
	}
	wg.Wait()

	perJob := map[int64][]job.Message{}
	for _, m := range r.messages(t) {
		perJob[m.JobID] = append(perJob[m.JobID], m)
	}
	for i := range n {
		id := leases[i].JobID
		rec := r.get(t, id)
		switch {
		case late[i] == nil:
			if rec.State != job.Claimed || len(perJob[id]) != 0 {
				t.Errorf("job %d: late claimer won, yet record %s and %d messages", id, rec.State, len(perJob[id]))
			}
		case errors.Is(late[i], store.ErrLeaseLost):
			if rec.State != job.Queued || rec.Version != leases[i].Version+1 {
				t.Errorf("job %d: reclaimed: got %s v%d, want queued v%d", id, rec.State, rec.Version, leases[i].Version+1)
			}
			if len(perJob[id]) != 1 || perJob[id][0].Version != rec.Version {
				t.Errorf("job %d: got messages %+v, want exactly one at version %d", id, perJob[id], rec.Version)
			}
		default:
			t.Errorf("job %d: late claimer: %v", id, late[i])
		}
	}
	if b, _ := json.Marshal(perJob); len(perJob) > n {
		t.Errorf("messages for unknown jobs: %s", b)
	}
}
