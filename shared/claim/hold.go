package claim

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/obs"
)

// DefaultHoldDelay is how long Hold keeps a batch's messages invisible
// while the claimer is not ready (no GitHub App private key yet).
const DefaultHoldDelay = time.Minute

// Handler is the claimer's SQS handler (Claimer.Handle).
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Hold wraps handle for a claimer that may start before it can work: the
// stack deployed, `make app` not run yet, so there is no private key.
// While ready fails, no message is started (no lease, no attempt, the
// ladder does not move): each comes back after delay (RetryAfter, or the
// queue's visibility timeout if that fails) as a batch item failure, and
// the function keeps running instead of failing at init in a crash loop.
// A message held past the queue's maxReceiveCount is dead-lettered; its
// record stays queued and the reclaimer re-enqueues it (DESIGN.md), so
// holding delays a job but never loses it.
func Hold(handle Handler, ready func(ctx context.Context) error, q Queue, delay time.Duration, log *slog.Logger) Handler {
	if delay <= 0 {
		delay = DefaultHoldDelay
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		err := ready(ctx)
		if err == nil {
			return handle(ctx, ev)
		}
		var resp events.SQSEventResponse
		for _, m := range ev.Records {
			attrs := []slog.Attr{
				slog.String("decision", "hold"),
				slog.String("message_id", m.MessageId),
				slog.Int64(obs.KeyDelay, delay.Milliseconds()),
				slog.String(obs.KeyReason, err.Error()),
			}
			if rerr := q.RetryAfter(ctx, m.ReceiptHandle, delay); rerr != nil {
				attrs = append(attrs, slog.String("error", rerr.Error()))
			}
			log.LogAttrs(ctx, slog.LevelWarn, "claim hold: not ready", attrs...)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
		return resp, nil
	}
}
