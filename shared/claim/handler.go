package claim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// errNotHandled marks a message that must come back (a batch item failure)
// although nothing went wrong: it is newer than its record, or it was not
// started before the deadline.
var errNotHandled = errors.New("claim: message not handled yet")

// Handle is the SQS event handler (ReportBatchItemFailures). It returns
// an error only for a handler-level fault; per-message problems are batch
// item failures.
func (c *Claimer) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer c.cfg.Metrics.Flush()
	invocation := c.cfg.InstanceID
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		invocation += "/" + lc.AwsRequestID
	}
	n := len(ev.Records)
	errs := make([]error, n)
	started := make([]bool, n)
	// Workers take messages in order; each checks the deadline when it
	// takes one, so a message waiting for a free worker is not started late.
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(c.cfg.Concurrency, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if c.closeToDeadline(ctx) {
					continue
				}
				started[i] = true
				errs[i] = c.handleSafely(ctx, ev.Records[i], invocation)
			}
		}()
	}
	wg.Wait()

	var unstarted []int
	for i := range n {
		if !started[i] {
			unstarted = append(unstarted, i)
		}
	}
	if len(unstarted) > 0 {
		c.releaseUnstarted(ctx, ev, unstarted)
		for _, i := range unstarted {
			errs[i] = errNotHandled
		}
	}
	var resp events.SQSEventResponse
	for i, err := range errs {
		if err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	return resp, nil
}

// handleSafely is handleMessage with a panic contained to its message: a
// batch item failure (it comes back after the visibility timeout, and its
// lease, if it took one, is taken over then), logged at error; the batch's
// other messages are answered as they went. A panic in a worker killed the
// process: the whole batch came back, each message's receive count went
// up, and a message that always panics took its batch-mates to the
// dead-letter queue with it.
func (c *Claimer) handleSafely(ctx context.Context, m events.SQSMessage, invocation string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.cfg.Logger.LogAttrs(ctx, slog.LevelError, "claim panic", slog.String("message_id", m.MessageId),
				slog.String("error", fmt.Sprint(p)), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("claim: panic handling message %s", m.MessageId)
		}
	}()
	return c.handleMessage(ctx, m, invocation)
}

// leaseOwner is the fencing owner of one received message: the
// invocation (process id and Lambda request id), the SQS message id and a
// digest of the receipt handle. Two copies of one job's message in one
// batch, even two receives of the same SQS message, are two owners, so
// exactly one of them takes the lease; an SDK retry of the one Acquire
// carries the same owner and is still recognised as ours.
func leaseOwner(invocation string, m events.SQSMessage) string {
	sum := sha256.Sum256([]byte(m.ReceiptHandle))
	return invocation + "/" + m.MessageId + "/" + hex.EncodeToString(sum[:4])
}

// closeToDeadline reports whether less than SafetyMargin is left.
func (c *Claimer) closeToDeadline(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && dl.Sub(c.cfg.Now()) < c.cfg.SafetyMargin
}

// answerReserve is the time the handler keeps to answer before its
// invocation's deadline: Lambda discards the answer of an invocation that
// timed out and fails its whole batch, so every message, the handled ones
// too, would come back after the visibility timeout.
const answerReserve = 500 * time.Millisecond

// releaseUnstarted makes the messages nobody started visible again at
// once, spread so that they do not all start claimers in the same second.
// A message whose visibility cannot be changed, or that there is no time
// left to release before the answer is due (answerReserve), comes back
// after the queue's visibility timeout instead: later, never lost.
func (c *Claimer) releaseUnstarted(ctx context.Context, ev events.SQSEvent, idx []int) {
	delays := reclaim.Spread(len(idx), c.cfg.Rand)
	// The work context may be done already: the release has its own,
	// which ends when the answer is due.
	until := c.cfg.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-answerReserve).Before(until) {
		until = dl.Add(-answerReserve)
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), until)
	defer cancel()
	for k, i := range idx {
		m := ev.Records[i]
		if !c.cfg.Now().Before(until) {
			c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim deadline_release",
				slog.String("decision", "deadline_release"),
				slog.Int("left", len(idx)-k),
				slog.String("error", "no time left before the answer is due: they come back after the visibility timeout"))
			break
		}
		err := c.cfg.Queue.RetryAfter(rctx, m.ReceiptHandle, delays[k])
		attrs := []slog.Attr{
			slog.String("decision", "deadline_release"),
			slog.String("message_id", m.MessageId),
			slog.Int64(obs.KeyDelay, delays[k].Milliseconds()),
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim deadline_release", attrs...)
	}
	c.cfg.Metrics.Count(metricDeadline, float64(len(idx)))
}
