package cli_test

// Redrive's termination and the flags' bounds: each test fails while the
// defect it names is present.

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/cli"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

// runWith runs ghclaim with the given clients (nil: the emulator's) and a
// context of its own.
func runWith(t *testing.T, ctx context.Context, db cli.DynamoDB, sqsAPI cli.SQS, args ...string) result {
	t.Helper()
	if db == nil {
		db = dynamodb.NewFromConfig(env.cfg)
	}
	if sqsAPI == nil {
		sqsAPI = sqs.NewFromConfig(env.cfg)
	}
	return runConfig(t, ctx, cli.Config{
		DynamoDB: db,
		SQS:      sqsAPI,
		Now:      func() time.Time { return now },
		// Redrive's pace on a clock that stands still: no test waits it.
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}, args...)
}

// runConfig runs ghclaim with cfg, its other clients the emulator's.
func runConfig(t *testing.T, ctx context.Context, cfg cli.Config, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cfg.SecretsManager = secretsapi.New(env.cfg)
	cfg.CloudFormation = cloudformation.NewFromConfig(env.cfg)
	cfg.EC2 = ec2api.New(env.cfg)
	cfg.User, cfg.Stdout, cfg.Stderr = "alice", &out, &errb
	c := cli.New(cfg)
	r := result{code: c.Run(ctx, args), stdout: out.String(), stderr: errb.String()}
	for _, s := range []string{env.hookKey, env.pem, "BEGIN RSA PRIVATE KEY"} {
		if strings.Contains(r.stdout+r.stderr, s) {
			t.Fatalf("ghclaim %v printed a secret", args)
		}
	}
	t.Logf("$ ghclaim %s\n%s%s(exit %d)", strings.Join(args, " "), r.stdout, r.stderr, r.code)
	return r
}

// newQueue makes an empty queue of the test's own.
func newQueue(t *testing.T, name string) string {
	t.Helper()
	out, err := sqs.NewFromConfig(env.cfg).CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))})
	must(t, err)
	return aws.ToString(out.QueueUrl)
}

// newQueuePair makes an empty claims queue of the test's own and its
// dead-letter queue, as the template pairs them (RedrivePolicy).
func newQueuePair(t *testing.T, name string) (dlq, claims string) {
	t.Helper()
	api := sqs.NewFromConfig(env.cfg)
	dlq = newQueue(t, name+"-dlq")
	attrs, err := api.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &dlq, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	must(t, err)
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":5}`, attrs.Attributes["QueueArn"])
	out, err := api.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("%s-claims-%d", name, time.Now().UnixNano())),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameRedrivePolicy): policy}})
	must(t, err)
	return dlq, aws.ToString(out.QueueUrl)
}

// redrive with its queues swapped (--queue-url the DLQ, --dlq-url the
// claims queue), or with a --dlq-url that is not the claims queue's
// dead-letter queue, moved live claim messages out of the claims queue
// and exited 0. It must refuse before receiving anything, naming the
// flag, and leave both queues as they were.
func TestRedriveRefusesAQueueThatIsNotTheDLQ(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-notdlq")
	other := newQueue(t, "redrive-notdlq-other")
	fill(t, claims, 1, func(int) string { return `{"job_id":7601,"version":1}` })
	fill(t, other, 1, func(int) string { return `{"job_id":7602,"version":1}` })
	tests := []struct {
		name, dlq, claims, want string
	}{
		{"swapped", claims, dlq, "--queue-url " + dlq + " has no dead-letter queue"},
		{"another queue as the DLQ", other, claims, "--dlq-url " + other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &sendCounter{Client: sqs.NewFromConfig(env.cfg)}
			r := runWith(t, context.Background(), nil, api, "redrive", "--dlq-url", tt.dlq, "--queue-url", tt.claims)
			if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tt.want) || api.sends != 0 {
				t.Fatalf("exit %d, %d sends, stderr %q; want exit 2, no send, naming %q", r.code, api.sends, r.stderr, tt.want)
			}
		})
	}
	for _, q := range []string{claims, other} {
		if visible, hidden := depth(t, q); visible != 1 || hidden != 0 {
			t.Errorf("queue %s holds %d visible and %d hidden messages after the refused runs, want its one message, visible", q, visible, hidden)
		}
	}
}

// depth is how many messages url holds, visible and hidden.
func depth(t *testing.T, url string) (visible, hidden int) {
	t.Helper()
	out, err := sqs.NewFromConfig(env.cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	must(t, err)
	visible, err = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	must(t, err)
	hidden, err = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	must(t, err)
	return visible, hidden
}

// A redrive stopped (Ctrl-C) between two copies of one batch left the
// batch's unsent messages hidden for --visibility: a run started at once
// found none of them and ended with exit 0, "moved 0", while they were
// still in the DLQ. What it did not send is shown again when it stops.
func TestRedriveInterruptedShowsWhatItDidNotSend(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-stopped")
	fill(t, dlq, 3, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 7610+i) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The pace's first wait is the operator's Ctrl-C.
	stop := func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
	// Each copy put once: the claims queue's depth is compared with the
	// report, and the SDK's retry of a send whose answer was cut put a copy
	// twice.
	once := emulator.SQSOnce{Client: sqs.NewFromConfig(env.cfg)}
	r := runConfig(t, ctx, cli.Config{DynamoDB: dynamodb.NewFromConfig(env.cfg), SQS: once, Now: func() time.Time { return now }, Sleep: stop},
		"redrive", "--dlq-url", dlq, "--queue-url", claims, "--visibility", "5m", "--json")
	rep := decode[map[string]float64](t, r.stdout)
	if r.code != cli.ExitFail || !strings.Contains(r.stderr, "interrupted") || rep["moved"] < 1 || rep["moved"] > 2 {
		t.Fatalf("exit %d, report %v; want exit 1, interrupted after one or two copies", r.code, rep)
	}
	visible, hidden := depth(t, dlq)
	if moved, _ := depth(t, claims); moved != int(rep["moved"]) || visible != 3-moved || hidden != 0 {
		t.Fatalf("after the stop: %d copies in the claims queue (report: %v moved), DLQ %d visible and %d hidden; want %d visible, none hidden",
			moved, rep["moved"], visible, hidden, 3-moved)
	}
}

// A negative --sweep-shards is not the deployment's shard count: retry must
// refuse it (exit 2, naming the flag) instead of writing the record on a
// shard computed with the default 8.
func TestRetryRefusesANonPositiveSweepShards(t *testing.T) {
	id := ids(t)
	seedFailed(t, id(7401), "redrive-x64", now.Add(-time.Hour))
	q := newQueue(t, "retry-shards")
	r := runWith(t, context.Background(), nil, nil, "retry", fmt.Sprint(id(7401)), "--table", env.stack.TableName, "--queue-url", q, "--sweep-shards", "-16")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--sweep-shards") {
		rec, _ := newStore().Get(context.Background(), id(7401))
		t.Fatalf("retry --sweep-shards -16: exit %d (record now %s v%d on sweep shard %q); want exit 2 naming --sweep-shards",
			r.code, rec.State, rec.Version, rec.SweepShard)
	}
}

// limitSpy records each Scan's Limit.
type limitSpy struct {
	*dynamodb.Client
	mu     sync.Mutex
	limits []int32
}

func (s *limitSpy) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	s.mu.Lock()
	s.limits = append(s.limits, aws.ToInt32(in.Limit))
	s.mu.Unlock()
	return s.Client.Scan(ctx, in, optFns...)
}

// --page-size is an int narrowed to int32 without a check: 4294967297
// becomes a page of 1 item, 2147483648 a negative number treated as "no
// limit". Either must be refused as a bad --page-size (exit 2).
func TestJobsRefusesAPageSizeOverInt32(t *testing.T) {
	t.Parallel()
	for _, size := range []string{"4294967297", "2147483648"} {
		spy := &limitSpy{Client: dynamodb.NewFromConfig(env.cfg)}
		r := runWith(t, context.Background(), spy, nil, "jobs", "--table", env.stack.TableName, "--page-size", size, "--json")
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--page-size") {
			t.Errorf("jobs --page-size %s: exit %d, Scan limits sent %v; want exit 2 naming --page-size", size, r.code, spy.limits[:min(3, len(spy.limits))])
		}
	}
}

// SQS takes a visibility timeout of at most 12 h (43200 s); --visibility
// beyond it is a bad argument and must be refused as such (exit 2, naming
// the flag), not passed on to SQS (which answers InvalidParameterValue, exit 1).
func TestRedriveRefusesAVisibilityOverSQSMax(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-vis")
	r := runWith(t, context.Background(), nil, nil, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--visibility", "13h")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--visibility") {
		t.Fatalf("redrive --visibility 13h: exit %d; want exit 2 naming --visibility (SQS allows 0..43200 s)", r.code)
	}
}

// sendCounter counts SendMessage calls.
type sendCounter struct {
	*sqs.Client
	mu    sync.Mutex
	sends int
}

func (s *sendCounter) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	s.sends++
	s.mu.Unlock()
	return s.Client.SendMessage(ctx, in, optFns...)
}

// redrive with --dlq-url and --queue-url naming the same queue (a pasted
// URL twice) moves each message onto itself: the copy is a fresh message,
// received again, sent again, forever. It must be refused as bad
// arguments.
func TestRedriveRefusesTheSameQueueTwice(t *testing.T) {
	t.Parallel()
	q := newQueue(t, "redrive-same")
	_, err := sqs.NewFromConfig(env.cfg).SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(`{"job_id":7501,"version":1}`)})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	api := &sendCounter{Client: sqs.NewFromConfig(env.cfg)}
	start := time.Now()
	r := runWith(t, ctx, nil, api, "redrive", "--dlq-url", q, "--queue-url", q)
	if r.code != cli.ExitUsage || api.sends > 1 {
		t.Fatalf("redrive with the DLQ as claims queue: exit %d after %s, one message sent %d times; want exit 2 (same queue) and no loop",
			r.code, time.Since(start).Round(time.Second), api.sends)
	}
}

// slowSend is the emulator's SQS whose SendMessage takes a while, as a
// claims queue far away or under load does: it makes a run outlast a
// one-second --visibility (SQS's timers are real time), the condition
// under which redrive used to stop early.
type slowSend struct {
	*sqs.Client
	delay time.Duration
}

func (s *slowSend) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	time.Sleep(s.delay)
	return s.Client.SendMessage(ctx, in, optFns...)
}

// redrive used to stop at the first receive that brought nothing new: when
// the messages it left (undecodable here) came back after --visibility and
// filled a whole receive, the run ended while movable messages were still
// in the DLQ. What it leaves now stays hidden until it ends.
func TestRedriveMovesEveryMessageBehindTheOnesItLeaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := sqs.NewFromConfig(env.cfg)
	dlq, claims := newQueuePair(t, "redrive-stop")
	fill(t, dlq, 30, func(i int) string { return fmt.Sprintf("poison %d", i) })
	fill(t, dlq, 20, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 7600+i) })
	r := runWith(t, ctx, nil, &slowSend{Client: api, delay: 150 * time.Millisecond}, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--visibility", "1s", "--json")
	rep := decode[map[string]float64](t, r.stdout)
	if rep["moved"] != 20 || rep["undecodable"] != 30 {
		t.Fatalf("redrive of 20 claim messages and 30 undecodable ones: exit %d, report %v; want moved 20, undecodable 30 (the run stopped with %v claim messages still in the DLQ)",
			r.code, rep, 20-rep["moved"])
	}
	// The undecodable ones stayed hidden while the run went on: it ended at
	// an empty receive, not because they kept coming back.
	if strings.Contains(r.stderr, "kept showing") || !strings.Contains(r.stderr, "left 30 message(s)") {
		t.Errorf("stderr %q; want the run to end leaving the 30, not stopped by their coming back", r.stderr)
	}
	// What it left is visible again at once for the next run.
	out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlq, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	must(t, err)
	if len(out.Messages) == 0 {
		t.Error("the undecodable messages are still hidden after the run")
	}
}

// flakyDelete is slowSend whose first n DeleteMessage calls fail, as a
// throttled or timed-out delete does.
type flakyDelete struct {
	slowSend
	mu sync.Mutex
	n  int
}

func (f *flakyDelete) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("delete throttled by the test")
	}
	return f.Client.DeleteMessage(ctx, in, optFns...)
}

// The same early stop with exit 0: the first batch's deletes fail (its
// copies are sent; the DLQ copies come back after --visibility), the next
// receive brings only those, and the run ends "successfully" with 20 claim
// messages it never looked at still in the DLQ.
func TestRedriveMovesEveryMessageBehindFailedDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := sqs.NewFromConfig(env.cfg)
	dlq, claims := newQueuePair(t, "redrive-stop0")
	fill(t, dlq, 30, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 7700+i) })
	r := runWith(t, ctx, nil, &flakyDelete{slowSend: slowSend{Client: api, delay: 150 * time.Millisecond}, n: 10}, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--visibility", "1s", "--json")
	rep := decode[map[string]float64](t, r.stdout)
	if r.code == cli.ExitOK && rep["moved"] < 30 {
		t.Fatalf("redrive of 30 claim messages: exit 0, report %v; %v of them were never received, yet the run ended as done", rep, 30-rep["moved"])
	}
	// The failed deletes are tried again before the run ends.
	if r.code != cli.ExitOK || rep["moved"] != 30 || rep["not_deleted"] != 0 {
		t.Errorf("exit %d, report %v; want 0 and all 30 moved and deleted", r.code, rep)
	}
}

// noHiding is the emulator's SQS whose ChangeMessageVisibility is refused,
// as for a caller without sqs:ChangeMessageVisibility.
type noHiding struct {
	slowSend
}

func (n *noHiding) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return nil, fmt.Errorf("AccessDenied: not authorized to perform sqs:ChangeMessageVisibility (the test's)")
}

// TestRedriveEndsWhenItCannotHideWhatItLeaves: when the messages a run
// leaves cannot be kept hidden, they keep coming back and no receive is
// ever empty; the run stops after a few such receives with exit 1,
// saying why, instead of looping.
func TestRedriveEndsWhenItCannotHideWhatItLeaves(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := sqs.NewFromConfig(env.cfg)
	dlq, claims := newQueuePair(t, "redrive-nohide")
	fill(t, dlq, 3, func(i int) string { return fmt.Sprintf("poison %d", i) })
	r := runWith(t, ctx, nil, &noHiding{slowSend{Client: api}}, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--visibility", "1s")
	if r.code != cli.ExitFail || !strings.Contains(r.stderr, "sqs:ChangeMessageVisibility") || ctx.Err() != nil {
		t.Errorf("exit %d (context %v), stderr %q; want exit 1 naming sqs:ChangeMessageVisibility, well before the minute", r.code, ctx.Err(), r.stderr)
	}
}

// fill sends n messages to url, the i-th with body(i).
//
// Exactly n: the SDK's retry of a send whose answer was cut (a busy
// emulator) puts a second copy in the queue, and a count the test expects
// to the message (30 undecodable, 20 moved) was then off by one. Each send
// is made once; after a failure, the queue's depth says whether it landed.
func fill(t *testing.T, url string, n int, body func(i int) string) {
	t.Helper()
	ctx := context.Background()
	api := sqs.NewFromConfig(env.cfg, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	read := sqs.NewFromConfig(env.cfg) // a read is safe to repeat: the SDK's retries
	depth := func() int {
		out, err := read.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		must(t, err)
		d, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		must(t, err)
		return d
	}
	base := depth()
	for i := range n {
		var err error
		for range 5 {
			if _, err = api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body(i))}); err == nil || depth() == base+i+1 {
				err = nil
				break
			}
		}
		must(t, err)
	}
	if d := depth(); d != base+n {
		t.Fatalf("queue %s holds %d messages after sending %d to its %d", url, d, n, base)
	}
}

// TestRedriveFailsWhenItLeavesMovedMessages: deletes from the DLQ keep
// failing (sqs:DeleteMessage missing, say): every copy is sent, each
// original stays in the DLQ and comes back there. The run said
// not_deleted and exited 0, which a script takes for done.
func TestRedriveFailsWhenItLeavesMovedMessages(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-nodelete")
	fill(t, dlq, 3, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 7970+i) })
	api := &flakyDelete{slowSend: slowSend{Client: sqs.NewFromConfig(env.cfg)}, n: 1 << 20}
	r := runWith(t, context.Background(), nil, api, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--json")
	rep := decode[map[string]float64](t, r.stdout)
	if r.code != cli.ExitFail || rep["not_deleted"] != 3 || !strings.Contains(r.stderr, "sqs:DeleteMessage") {
		t.Fatalf("exit %d, report %v, stderr %q; want exit 1 naming sqs:DeleteMessage, 3 not deleted", r.code, rep, r.stderr)
	}
}

// TestRedriveEndsOnARefillingDLQ: a claimer that keeps dead-lettering (a
// throttled table, a permission gone) refills the DLQ as redrive empties
// it; without --max the run went on for ever, feeding claims back to the
// broken claimer. A run takes at most what the DLQ held at its start.
func TestRedriveEndsOnARefillingDLQ(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-refill")
	fill(t, dlq, 5, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 7980+i) })
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		api := sqs.NewFromConfig(env.cfg)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			_, _ = api.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &dlq, MessageBody: aws.String(fmt.Sprintf(`{"job_id":%d,"version":1}`, 8000+i))})
		}
	}()
	defer func() { close(stop); <-done }()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r := runWith(t, ctx, nil, nil, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--json")
	if ctx.Err() != nil {
		t.Fatalf("redrive still running after 15 s on a refilling DLQ (exit %d once cancelled)", r.code)
	}
	if rep := decode[map[string]float64](t, r.stdout); r.code != 0 || rep["moved"] != 5 {
		t.Fatalf("exit %d, report %v; want the 5 the DLQ held at the start moved", r.code, rep)
	}
}

// receiveHook is the emulator's SQS whose n-th receive (from 1) hook
// answers instead, or, when hook returns neither output nor error, passes
// on (with the input as hook left it).
type receiveHook struct {
	*sqs.Client
	n    int
	hook func(n int, in *sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error)
}

func (r *receiveHook) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	r.n++
	if out, err := r.hook(r.n, in); out != nil || err != nil {
		return out, err
	}
	return r.Client.ReceiveMessage(ctx, in, optFns...)
}

// TestRedriveOutlastsOneEmptyPoll: under load one long poll came back
// empty with three messages in the DLQ, and the run ended having moved
// none (make test's TestRedrive, once). One empty poll no longer ends it.
func TestRedriveOutlastsOneEmptyPoll(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-empty")
	fill(t, dlq, 2, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 8300+i) })
	r := runWith(t, context.Background(), nil, &receiveHook{Client: sqs.NewFromConfig(env.cfg), hook: func(n int, _ *sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
		if n == 1 { // a long poll answered late, while the queue holds messages
			return &sqs.ReceiveMessageOutput{}, nil
		}
		return nil, nil
	}}, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--json")
	if rep := decode[map[string]float64](t, r.stdout); r.code != 0 || rep["moved"] != 2 {
		t.Fatalf("exit %d, report %v; want both messages moved", r.code, rep)
	}
}

// A receive that failed mid-run returned at once: --json printed nothing,
// so a script had no counts of what had moved. The run now reports, then
// fails naming the refused call and what it moved.
func TestRedriveReportsWhenAReceiveFails(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-norecv")
	fill(t, dlq, 2, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 7620+i) })
	r := runWith(t, context.Background(), nil, &receiveHook{Client: sqs.NewFromConfig(env.cfg), hook: func(n int, in *sqs.ReceiveMessageInput) (*sqs.ReceiveMessageOutput, error) {
		if n > 1 {
			return nil, fmt.Errorf("AccessDenied: not authorized to perform sqs:ReceiveMessage (the test's)")
		}
		in.MaxNumberOfMessages = 1 // the rest for the refused receive
		return nil, nil
	}}, "redrive", "--dlq-url", dlq, "--queue-url", claims, "--json")
	if r.code != cli.ExitFail || !strings.Contains(r.stderr, "sqs:ReceiveMessage") || !strings.Contains(r.stderr, "moved 1") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming sqs:ReceiveMessage and the one moved", r.code, r.stderr)
	}
	if rep := decode[map[string]float64](t, r.stdout); rep["moved"] != 1 {
		t.Fatalf("report %v, want 1 moved", rep)
	}
	if visible, hidden := depth(t, dlq); visible != 1 || hidden != 0 {
		t.Fatalf("DLQ: %d visible, %d hidden after the run; want the one not moved, visible", visible, hidden)
	}
}
