package claim_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
	"github.com/ghclaim/ghclaim/shared/store"
)

// The end-to-end tier: the claimer on the real adapters (DynamoDB, SQS,
// EC2 and SSM on moto) for what only they can show: EC2's ClientToken and
// job-tag reuse behind a strict SSM, and the claims queue's redrive policy.
// Every other behaviour is a flow test on infra/mem (harness_test.go).

var (
	_ claim.Store       = (*store.Store)(nil)
	_ claim.Queue       = (*queue.Queue)(nil)
	_ claim.Provisioner = provision.Registry(nil)
)

// sqsRecorder passes every call through to the emulator's real queue, but
// records the delays asked for and sends with none: moto honours delays in
// wall-clock time, and these tests move time with the injected clock. The
// visibility changes (RetryAfter) are recorded and applied as "now" for
// the same reason.
type sqsRecorder struct {
	api *sqs.Client

	mu         sync.Mutex
	visibility map[string]time.Duration // receipt → requested visibility
}

func (r *sqsRecorder) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	cp := *in
	cp.DelaySeconds = 0
	return r.api.SendMessage(ctx, &cp, opt...)
}

func (r *sqsRecorder) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return r.api.DeleteMessage(ctx, in, opt...)
}

func (r *sqsRecorder) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	r.mu.Lock()
	r.visibility[aws.ToString(in.ReceiptHandle)] = time.Duration(in.VisibilityTimeout) * time.Second
	r.mu.Unlock()
	cp := *in
	cp.VisibilityTimeout = 0
	return r.api.ChangeMessageVisibility(ctx, &cp, opt...)
}

func (r *sqsRecorder) Visibility(receipt string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.visibility[receipt]
	return d, ok
}

// world is one end-to-end test's stack on moto.
type world struct {
	clock    *clocktest.Clock
	store    *store.Store
	sqs      *sqs.Client
	rec      *sqsRecorder
	queue    *queue.Queue
	sends    *queue.Queue // the test's own messages, each put once: receive(t, 1) counts them
	queueURL string
	dlqURL   string
	ec2      *ec2api.Client
	ssm      *ssmapi.Client
	gh       *ghfake.Server
	ghURL    string
	logs     *logBuf
	log      *slog.Logger
	spy      *spy
	pools    []pool.Pool
	msgSeq   atomic.Int64
}

// setupWorld deploys the template's table and queues on moto, with a
// ghfake GitHub and one pool on the real provisioner (EC2 behind a strict
// SSM when ec2, else dispatch) behind a spy.
func setupWorld(t *testing.T, ec2Pool bool) *world {
	t.Helper()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	w := &world{clock: newClock(), logs: &logBuf{}}
	w.log = obs.NewLogger(w.logs, "debug")
	w.store = store.New(dynamodb.NewFromConfig(cfg), stack.TableName, store.Options{})
	w.sqs = sqs.NewFromConfig(cfg)
	w.rec = &sqsRecorder{api: w.sqs, visibility: map[string]time.Duration{}}
	w.queueURL, w.dlqURL = stack.QueueURL, stack.DLQURL
	w.queue = queue.New(w.rec, stack.QueueURL)
	w.sends = queue.New(emulator.SQSOnce{Client: w.sqs}, stack.QueueURL)
	w.ec2 = ec2api.New(cfg)
	w.ssm = ssmapi.New(cfg, provisiontest.StrictSSM)

	w.gh = ghfake.New(ghfake.WithClock(w.clock.Now), ghfake.WithAppID(appID))
	ts := httptest.NewServer(w.gh)
	t.Cleanup(ts.Close)
	w.ghURL = ts.URL

	p := pool.Pool{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1}
	reg := provision.Registry{}
	if ec2Pool {
		p.Provisioner = pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: w.launchTemplate(t), LaunchTemplateVersion: "$Default"}
		reg[pool.ProvisionerEC2] = provision.NewEC2(w.ec2, w.ssm, w.log)
	} else {
		out, err := w.sqs.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(emulator.StackName("dispatch-" + t.Name()))})
		if err != nil {
			t.Fatal(err)
		}
		p.Provisioner = pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: aws.ToString(out.QueueUrl)}
		reg[pool.ProvisionerDispatch] = provision.NewDispatch(w.sqs, w.log)
	}
	w.pools = []pool.Pool{p}
	w.spy = &spy{next: reg}
	t.Cleanup(func() { checkLogs(t, w.logs.String(), w.spy.Configs()) })
	return w
}

// launchTemplate creates an EC2 launch template in moto for the test.
func (w *world) launchTemplate(t *testing.T) string {
	t.Helper()
	name := emulator.StackName("lt-" + t.Name())
	if _, err := provisiontest.LaunchTemplate(context.Background(), w.ec2, name, "", "t4g.micro"); err != nil {
		t.Fatal(err)
	}
	return name
}

func (w *world) claimer(t *testing.T, instance string) *claim.Claimer {
	t.Helper()
	gh, rates := newGitHub(t, w.store, w.ghURL, w.clock.Now, true)
	c, err := claim.New(claim.Config{
		Pools: w.pools, InstanceID: instance,
		Store: w.store, Queue: w.queue, GitHub: gh, Provisioner: w.spy, Policy: newPolicy(), Rates: rates,
		Now: w.clock.Now, Rand: random.New(seed1), Logger: w.log,
		Metrics: obs.NewMetrics(w.logs, map[string]string{"function": "claimer"}, w.clock.Now),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// record creates job id's record, queued, with no message.
func (w *world) record(t *testing.T, id int64) {
	t.Helper()
	ctx := context.Background()
	_, err := w.store.CreateJob(ctx, job.Record{
		JobID: id, RunID: id * 10, Repo: repo, InstallationID: installation,
		Labels: []string{"self-hosted", "linux"}, Pool: w.pools[0].Name,
	}, w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
}

func (w *world) get(t *testing.T, id int64) job.Record {
	t.Helper()
	r, err := w.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// receiveAny takes whatever the queue at url holds visible (up to 10).
func (w *world) receiveAny(t *testing.T, url string) []events.SQSMessage {
	t.Helper()
	res, err := w.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.SQSMessage
	for _, m := range res.Messages {
		out = append(out, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			EventSource: "aws:sqs",
		})
	}
	return out
}

// receive takes exactly n messages from the claims queue.
func (w *world) receive(t *testing.T, n int) []events.SQSMessage {
	t.Helper()
	var out []events.SQSMessage
	for tries := 0; len(out) < n && tries < 10; tries++ {
		out = append(out, w.receiveAny(t, w.queueURL)...)
	}
	if len(out) != n {
		t.Fatalf("received %d messages from the claims queue, want %d", len(out), n)
	}
	return out
}

// invoke runs one Lambda invocation of c over msgs with a 60 s budget on
// the injected clock. The real event source mapping's deletes are the
// test's: a message not reported is deleted, as the mapping would.
func (w *world) invoke(t *testing.T, c *claim.Claimer, msgs ...events.SQSMessage) events.SQSEventResponse {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), w.clock.Now().Add(60*time.Second))
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", w.msgSeq.Add(1))})
	resp, err := c.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatalf("handle: %v", err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range msgs {
		if !failed[m.MessageId] {
			if err := w.queue.Delete(context.Background(), m.ReceiptHandle); err != nil {
				t.Fatal(err)
			}
		}
	}
	return resp
}

// instances counts pending or running instances tagged with job id.
func (w *world) instances(t *testing.T, id int64) int {
	t.Helper()
	out, err := w.ec2.DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{Filters: []ec2api.Filter{
		{Name: "tag:" + provision.TagJobID, Values: []string{fmt.Sprint(id)}},
		{Name: "instance-state-name", Values: []string{ec2api.StatePending, ec2api.StateRunning}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range out.Reservations {
		n += len(r.Instances)
	}
	return n
}

// hasParameter reports whether the SSM parameter holding runner's JIT
// config exists.
func (w *world) hasParameter(t *testing.T, runner string) bool {
	t.Helper()
	_, err := w.ssm.GetParameter(context.Background(), &ssmapi.GetParameterInput{Name: provision.ParameterName(runner)})
	switch {
	case err == nil:
		return true
	case ssmapi.IsCode(err, ssmapi.CodeParameterNotFound):
		return false
	}
	t.Fatalf("GetParameter %s: %v", runner, err)
	return false
}

// TestEC2EndToEnd: on the real adapters, a claimer dies right after EC2
// started the job's machine (the JIT config waits in SSM). The reclaimer
// takes the job back; the next attempt's 409 finds the offline runner, the
// EC2 adapter finds the job's machine by its tag, and the job is claimed
// with that runner: one registration, one instance, the config still in
// SSM for the booting machine.
func TestEC2EndToEnd(t *testing.T) {
	t.Parallel()
	w := setupWorld(t, true)
	ctx := context.Background()
	const id = 4201
	w.record(t, id)
	if err := w.sends.Send(ctx, job.Message{JobID: id, Version: 1}, 0); err != nil {
		t.Fatal(err)
	}
	crashed := make(chan struct{})
	w.spy.set(nil, func(n int) {
		if n == 1 {
			close(crashed)
			runtime.Goexit()
		}
	})
	msgs := w.receive(t, 1)
	ctx1, cancel := context.WithDeadline(ctx, w.clock.Now().Add(time.Minute))
	defer cancel()
	if _, err := w.claimer(t, "first").Handle(ctx1, events.SQSEvent{Records: msgs}); err != nil {
		t.Fatal(err)
	}
	<-crashed // the invocation died: its message is neither deleted nor reported
	first := w.gh.Runners()
	if len(first) != 1 || w.instances(t, id) != 1 || !w.hasParameter(t, job.RunnerName("linux", id)) {
		t.Fatalf("after the crash: runners %v, %d instances, want one offline runner, one instance, its config in SSM", first, w.instances(t, id))
	}
	r := w.get(t, id)
	w.clock.Set(job.FromMillis(r.LeaseExpiresAt).Add(time.Second))
	v, err := w.store.TakeBack(ctx, r, job.Queued, w.clock.Now(), "lease expired", w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.sends.Send(ctx, job.Message{JobID: id, Version: v.Version, Attempt: r.Attempt}, 0); err != nil {
		t.Fatal(err)
	}
	w.invoke(t, w.claimer(t, "second"), w.receive(t, 1)...)
	got := w.get(t, id)
	if got.State != job.Claimed || got.RunnerName != first[0].Name {
		t.Fatalf("record %s runner %q (%s), want claimed by %s", got.State, got.RunnerName, got.LastError, first[0].Name)
	}
	if rs := w.gh.Runners(); len(rs) != 1 || rs[0].ID != first[0].ID {
		t.Fatalf("runners %v, want the first registration %d only", rs, first[0].ID)
	}
	if n := w.instances(t, id); n != 1 {
		t.Fatalf("%d instances, want 1", n)
	}
	if !w.hasParameter(t, first[0].Name) {
		t.Fatal("the booting machine's JIT config was removed")
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestEarlyMessageStaysOutOfTheDLQ: a claimer sent a job's next message
// (version 3) and its Release of the lease (claiming at version 2) lands
// late or never. The message, ahead of its record, must not come back
// every few seconds into the dead-letter queue (the template's
// maxReceiveCount is 5) and fire a false alarm. The world runs on the
// template's real claims queue and redrive policy on moto: every look at
// the message is a real receive, which moves it to the DLQ past
// maxReceiveCount; simulated time jumps to the visibility the claimer
// asked for, and a reclaimer pass runs once a minute of it has passed,
// after the claimer's look (the worst order for the message).
func TestEarlyMessageStaysOutOfTheDLQ(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name  string
		lease time.Duration
		// release: the sender's Release lands while the message waits.
		release bool
		// looks: how often the early message is received.
		looks int
	}{
		{name: "sender died, the reclaimer takes the lease back", lease: 3 * time.Minute, looks: 2},
		{name: "release lands late", lease: 3 * time.Minute, release: true, looks: 2},
		{name: "lease longer than SQS's 12 h visibility", lease: 20 * time.Hour, looks: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setupWorld(t, false)
			ctx := context.Background()
			id := int64(9801 + i)
			w.record(t, id)
			t0 := w.clock.Now()
			lease, _, err := w.store.Acquire(ctx, id, 1, "sender", t0.Add(tc.lease), t0)
			if err != nil {
				t.Fatal(err)
			}
			// The sender's retry message, sent before its Release.
			if err := w.sends.Send(ctx, job.Message{JobID: id, Version: 3, Attempt: 1}, 0); err != nil {
				t.Fatal(err)
			}
			c := w.claimer(t, "early")
			rc, err := reclaim.New(reclaim.Config{Store: w.store, Queue: w.queue, Now: w.clock.Now, Rand: random.New(1), Logger: w.log})
			if err != nil {
				t.Fatal(err)
			}
			lastPass := t0

			looks := map[string]int{} // receives of each message id
			var early string
			for round := 0; ; round++ {
				if round > 20 {
					t.Fatalf("still going after %d rounds (%s): record %+v", round, w.clock.Now().Sub(t0), w.get(t, id))
				}
				now := w.clock.Now()
				msgs := w.receiveAny(t, w.queueURL)
				// With no message hidden, the next event is a reclaimer pass:
				// the next one, or the first after the lease's expiry (those
				// in between find nothing stale).
				next := now.Add(time.Minute)
				if r := w.get(t, id); r.State == job.Claiming {
					next = later(next, job.FromMillis(r.LeaseExpiresAt).Add(time.Second))
				}
				if len(msgs) > 0 {
					for _, m := range msgs {
						looks[m.MessageId]++
						if round == 0 {
							early = m.MessageId
						}
					}
					resp := w.invoke(t, c, msgs...)
					for _, f := range resp.BatchItemFailures {
						vis, ok := w.rec.Visibility(receiptOf(msgs, f.ItemIdentifier))
						if !ok {
							t.Fatalf("message %s came back with no visibility set", f.ItemIdentifier)
						}
						if vis > 12*time.Hour {
							t.Fatalf("visibility %s: SQS refuses more than 12 h", vis)
						}
						if r := w.get(t, id); r.State == job.Claiming {
							if left := job.FromMillis(r.LeaseExpiresAt).Sub(now); vis < min(left, 11*time.Hour) {
								t.Errorf("early message hidden for %s, the lease has %s left: it comes back before the Release can have landed", vis, left)
							}
						}
						next = now.Add(vis)
					}
				}
				if now.Sub(lastPass) >= time.Minute {
					if _, err := rc.Run(ctx); err != nil {
						t.Fatalf("reclaimer pass: %v", err)
					}
					lastPass = now
				}
				if tc.release && round == 0 {
					if err := w.store.Release(ctx, lease, job.Retry{Version: 3, Attempt: 1, FirstFailureAt: t0, Due: t0.Add(30 * time.Second)}, w.clock.Now()); err != nil {
						t.Fatalf("late Release: %v", err)
					}
				}
				if r := w.get(t, id); r.State == job.Claimed && len(msgs) == 0 {
					break
				}
				w.clock.Set(next)
			}

			dlq := w.receiveAny(t, w.dlqURL)
			if len(dlq) != 0 {
				t.Fatalf("dead-letter queue holds %d messages (first %s), want none: a false alarm", len(dlq), dlq[0].Body)
			}
			out, err := w.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(w.dlqURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; n != "0" {
				t.Fatalf("dead-letter queue holds %s messages, want 0", n)
			}
			if looks[early] != tc.looks {
				t.Fatalf("the early message was received %d times, want %d (maxReceiveCount is 5)", looks[early], tc.looks)
			}
			dropped := 0
			for _, d := range w.logs.decisions(t) {
				if d["decision"] == claim.DecisionEarlyDropped {
					dropped++
				}
			}
			if want := map[bool]int{false: 1, true: 0}[tc.release]; dropped != want {
				t.Fatalf("%d early messages dropped after the lease expired, want %d", dropped, want)
			}
			if r := w.get(t, id); r.State != job.Claimed {
				t.Fatalf("record %s, want claimed", r.State)
			}
			if n := w.gh.Stats().JITCalls; n != 1 {
				t.Fatalf("%d JIT calls, want 1", n)
			}
			if left := w.receiveAny(t, w.queueURL); len(left) != 0 {
				t.Fatalf("claims queue holds %d messages, want none", len(left))
			}
		})
	}
}

// SendMessageBatch passes through unrecorded: the claimer sends one message
// at a time (queue.SQS carries it for the reclaimer).
func (r *sqsRecorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return r.api.SendMessageBatch(ctx, in, opt...)
}
