package claim

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/job"
)

type holdQueue struct {
	retries map[string]time.Duration
	err     error
}

func (q *holdQueue) Send(context.Context, job.Message, time.Duration) error {
	return errors.New("hold must not send")
}
func (q *holdQueue) Delete(context.Context, string) error { return errors.New("hold must not delete") }
func (q *holdQueue) RetryAfter(_ context.Context, h string, d time.Duration) error {
	q.retries[h] = d
	return q.err
}

func TestHold(t *testing.T) {
	t.Parallel()
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", ReceiptHandle: "r1", Body: `{"job_id":1,"version":1}`},
		{MessageId: "m2", ReceiptHandle: "r2", Body: `{"job_id":2,"version":1}`},
	}}
	tests := []struct {
		name     string
		ready    error
		queueErr error
		handled  bool
	}{
		{name: "no key yet: every message held", ready: errors.New("github app private key: secret not set yet")},
		{name: "held even when the visibility change fails", ready: errors.New("not set"), queueErr: errors.New("throttled")},
		{name: "ready: the claimer handles the batch", handled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := &holdQueue{retries: map[string]time.Duration{}, err: tt.queueErr}
			var logs bytes.Buffer
			handled := false
			inner := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				handled = true
				return events.SQSEventResponse{}, nil
			}
			h := Hold(inner, func(context.Context) error { return tt.ready }, q, 90*time.Second, slog.New(slog.NewJSONHandler(&logs, nil)))
			resp, err := h(context.Background(), ev)
			if err != nil {
				t.Fatalf("got %v: a handler error would fail the whole batch", err)
			}
			if handled != tt.handled {
				t.Fatalf("inner handler called %v, want %v", handled, tt.handled)
			}
			if tt.handled {
				if len(resp.BatchItemFailures) != 0 || len(q.retries) != 0 {
					t.Errorf("ready: failures %v retries %v, want none", resp.BatchItemFailures, q.retries)
				}
				return
			}
			if len(resp.BatchItemFailures) != 2 || resp.BatchItemFailures[0].ItemIdentifier != "m1" || resp.BatchItemFailures[1].ItemIdentifier != "m2" {
				t.Errorf("failures %v, want m1 and m2", resp.BatchItemFailures)
			}
			if q.retries["r1"] != 90*time.Second || q.retries["r2"] != 90*time.Second {
				t.Errorf("visibility %v, want 90s for both", q.retries)
			}
			if strings.Count(logs.String(), `"decision":"hold"`) != 2 {
				t.Errorf("logs %s, want one hold line per message", logs.String())
			}
		})
	}
}
