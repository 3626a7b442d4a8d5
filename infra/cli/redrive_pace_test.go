package cli_test

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/cli"
	"github.com/ghclaim/ghclaim/shared/random"
)

// pacedClock is a clock that moves only when the run sleeps or a send
// answers.
type pacedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *pacedClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *pacedClock) advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func (c *pacedClock) Sleep(ctx context.Context, d time.Duration) error {
	c.advance(d)
	return ctx.Err()
}

// sendTimes records, on the paced clock, when each claim copy's send
// started and answered (each answer takes sendTook), and when each DLQ
// message was received.
type sendTimes struct {
	*sqs.Client
	clk      *pacedClock
	sendTook time.Duration
	mu       sync.Mutex
	starts   []time.Time
	answers  []time.Time
	received map[string]time.Time // job id → receive time
	sentJob  []string
}

var jobIDOf = regexp.MustCompile(`"job_id":(\d+)`)

// jobOf is the job id in a claim message's body.
func jobOf(body *string) string {
	if m := jobIDOf.FindStringSubmatch(aws.ToString(body)); m != nil {
		return m[1]
	}
	return aws.ToString(body)
}

func (s *sendTimes) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	start := s.clk.Now()
	out, err := s.Client.SendMessage(ctx, in, optFns...)
	s.clk.advance(s.sendTook)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts, s.answers = append(s.starts, start), append(s.answers, s.clk.Now())
	s.sentJob = append(s.sentJob, jobOf(in.MessageBody))
	return out, err
}

func (s *sendTimes) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := s.Client.ReceiveMessage(ctx, in, optFns...)
	if err == nil {
		s.mu.Lock()
		for _, m := range out.Messages {
			s.received[jobOf(m.Body)] = s.clk.Now()
		}
		s.mu.Unlock()
	}
	return out, err
}

// TestRedrivePacesItsSends: after an outage the DLQ holds many claims,
// and redrive sent every copy due at once, so they reached the claimers
// together (DESIGN.md: wherever many claims are released at once, no 1 s
// window holds more than three arriving). Each copy now starts at least
// half a second after the previous one's answer (SQS stamps a message
// between the two), at jittered gaps, and every copy is sent while its
// DLQ message is still hidden.
func TestRedrivePacesItsSends(t *testing.T) {
	t.Parallel()
	const n, visibility = 12, 4 * time.Second
	dlq, claims := newQueuePair(t, "redrive-pace")
	fill(t, dlq, n, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 8100+i) })
	clk := &pacedClock{t: now}
	api := &sendTimes{Client: sqs.NewFromConfig(env.cfg), clk: clk, sendTook: 300 * time.Millisecond, received: map[string]time.Time{}}
	r := runConfig(t, context.Background(), cli.Config{DynamoDB: dynamodb.NewFromConfig(env.cfg), SQS: api, Now: clk.Now, Sleep: clk.Sleep, Rand: random.New(7)},
		"redrive", "--dlq-url", dlq, "--queue-url", claims, "--visibility", visibility.String(), "--json")
	if rep := decode[map[string]float64](t, r.stdout); r.code != 0 || rep["moved"] != n {
		t.Fatalf("exit %d, report %v; want %d moved", r.code, rep, n)
	}
	if len(api.starts) != n || !api.starts[0].Equal(now) {
		t.Fatalf("%d sends, the first at %v; want %d, the first at once (%v)", len(api.starts), api.starts, n, now)
	}
	gaps := map[time.Duration]bool{}
	for i := 1; i < n; i++ {
		gap := api.starts[i].Sub(api.answers[i-1])
		if gap < 500*time.Millisecond {
			t.Errorf("send %d started %v after send %d answered; want ≥ 500ms (≤ 2 arrivals a second)", i, gap, i-1)
		}
		gaps[gap] = true
	}
	if len(gaps) < n/2 {
		t.Errorf("gaps %v: want them jittered, not one fixed step", gaps)
	}
	for i, id := range api.sentJob {
		if waited := api.starts[i].Sub(api.received[id]); waited >= visibility {
			t.Errorf("job %s's copy sent %v after its receive: its DLQ message was visible again (--visibility %v)", id, waited, visibility)
		}
	}
}

// TestRedriveSendsASingleMessageAtOnce: one message is no herd; it must
// not wait.
func TestRedriveSendsASingleMessageAtOnce(t *testing.T) {
	t.Parallel()
	dlq, claims := newQueuePair(t, "redrive-one")
	fill(t, dlq, 1, func(i int) string { return fmt.Sprintf(`{"job_id":%d,"version":1}`, 8200+i) })
	clk := &pacedClock{t: now}
	slept := false
	r := runConfig(t, context.Background(), cli.Config{DynamoDB: dynamodb.NewFromConfig(env.cfg), SQS: sqs.NewFromConfig(env.cfg), Now: clk.Now,
		Sleep: func(ctx context.Context, d time.Duration) error { slept = true; return clk.Sleep(ctx, d) }},
		"redrive", "--dlq-url", dlq, "--queue-url", claims, "--json")
	if rep := decode[map[string]float64](t, r.stdout); r.code != 0 || rep["moved"] != 1 || slept {
		t.Fatalf("exit %d, report %v, slept %v; want the one message moved without a wait", r.code, rep, slept)
	}
}
