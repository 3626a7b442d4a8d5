package contract

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// Queue is the claims queue as the flows see it: the union of the ports of
// shared/claim (Send, RetryAfter), shared/webhook (Send) and shared/reclaim
// (SendBatch).
type Queue interface {
	Send(ctx context.Context, m job.Message, delay time.Duration) error
	SendBatch(ctx context.Context, msgs []job.Message, delays []time.Duration) []error
	RetryAfter(ctx context.Context, receiptHandle string, d time.Duration) error
}

// Sent is what reached the queue: the message and the whole seconds of
// delay it was sent with.
type Sent struct {
	Msg   job.Message
	Delay time.Duration
}

// QueueWorld is one queue under test: Sent lists what reached it so far, in
// order; Receipt returns the receipt handle of a message received from it
// now (sending one if the queue needs it).
type QueueWorld struct {
	Queue   Queue
	Sent    func() []Sent
	Receipt func(t *testing.T) string
}

// TestQueue runs the claims-queue contract: SQS's limits hold whichever
// implementation a flow test uses (delays rounded up to whole seconds,
// never early; at most 900 s; at most 10 entries a batch, each refused on
// its own; a visibility that ends less than 12 hours after the receive).
func TestQueue(t *testing.T, open func(t *testing.T) QueueWorld) {
	ctx := context.Background()
	msg := func(id int64) job.Message { return job.Message{JobID: id, Version: 1} }
	since := func(w QueueWorld, n int) []Sent { return w.Sent()[n:] }

	t.Run("send rounds the delay up and refuses more than 900 s", func(t *testing.T) {
		w := open(t)
		n := len(w.Sent())
		for _, d := range []time.Duration{1500 * time.Millisecond, -time.Second, 900 * time.Second} {
			if err := w.Queue.Send(ctx, msg(1), d); err != nil {
				t.Fatalf("send with delay %s: %v", d, err)
			}
		}
		if err := w.Queue.Send(ctx, msg(1), 901*time.Second); err == nil {
			t.Fatal("a delay of 901 s was accepted; SQS refuses more than 900")
		}
		got := since(w, n)
		want := []time.Duration{2 * time.Second, 0, 900 * time.Second}
		if len(got) != len(want) {
			t.Fatalf("%d messages reached the queue, want %d: %+v", len(got), len(want), got)
		}
		for i, s := range got {
			if s.Delay != want[i] || s.Msg != msg(1) {
				t.Errorf("message %d: %+v, want delay %s", i, s, want[i])
			}
		}
	})

	t.Run("a done context sends nothing", func(t *testing.T) {
		w := open(t)
		n := len(w.Sent())
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := w.Queue.Send(done, msg(5), 0); !errors.Is(err, context.Canceled) {
			t.Errorf("send with a done context: %v, want context.Canceled", err)
		}
		for i, err := range w.Queue.SendBatch(done, []job.Message{msg(6), msg(7)}, []time.Duration{0, 0}) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("batch entry %d with a done context: %v, want context.Canceled", i, err)
			}
		}
		if got := since(w, n); len(got) != 0 {
			t.Errorf("reached the queue with a done context: %+v", got)
		}
	})

	t.Run("a batch refuses each bad entry on its own", func(t *testing.T) {
		w := open(t)
		n := len(w.Sent())
		errs := w.Queue.SendBatch(ctx, []job.Message{msg(2), msg(3), msg(4)},
			[]time.Duration{0, 1200 * time.Millisecond, 901 * time.Second})
		if len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] == nil {
			t.Fatalf("errors %v, want nil, nil and a refusal of the 901 s entry", errs)
		}
		got := since(w, n)
		if len(got) != 2 || got[0].Msg.JobID != 2 || got[0].Delay != 0 || got[1].Msg.JobID != 3 || got[1].Delay != 2*time.Second {
			t.Fatalf("reached the queue: %+v, want jobs 2 (0 s) and 3 (2 s)", got)
		}
	})

	t.Run("a batch of more than 10 sends nothing", func(t *testing.T) {
		w := open(t)
		n := len(w.Sent())
		msgs := make([]job.Message, 11)
		delays := make([]time.Duration, 11)
		for i := range msgs {
			msgs[i] = msg(int64(10 + i))
		}
		for i, err := range w.Queue.SendBatch(ctx, msgs, delays) {
			if err == nil {
				t.Errorf("entry %d of 11 accepted", i)
			}
		}
		if got := since(w, n); len(got) != 0 {
			t.Fatalf("%d messages reached the queue, want none", len(got))
		}
	})

	t.Run("visibility of less than 12 hours from the receive", func(t *testing.T) {
		// SQS counts the 12 hours from the message's receive, so a
		// visibility of 12 h asked any time after it is beyond the limit.
		w := open(t)
		r := w.Receipt(t)
		if err := w.Queue.RetryAfter(ctx, r, 12*time.Hour-time.Minute); err != nil {
			t.Fatalf("12 h less a minute: %v", err)
		}
		if err := w.Queue.RetryAfter(ctx, r, 12*time.Hour); err == nil {
			t.Fatal("a visibility of 12 h after the receive was accepted; SQS refuses it")
		}
	})
}
