package mem

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/job"
)

// SQS's limits, which Queue enforces as SQS does.
const (
	maxDelay      = 900 * time.Second
	maxVisibility = 12 * time.Hour
	maxBodyBytes  = 256 * 1024
)

// Sent is one message a flow sent.
type Sent struct {
	ID  string
	Msg job.Message
	// At is the clock's time at the send; Delay the whole seconds asked.
	At    time.Time
	Delay time.Duration
}

// Arrival is when the message becomes visible.
func (s Sent) Arrival() time.Time { return s.At.Add(s.Delay) }

// Queue is an in-memory claims queue: it records what was sent, deleted
// and made visible again, against an injected clock.
type Queue struct {
	now clock.Func

	mu         sync.Mutex
	seq        int
	sent       []Sent
	deleted    []string
	visibility map[string]time.Duration
	// Fail, when set, is asked before every call; a non-nil answer fails it.
	Fail func(method string) error
	// FailEntry, when set, is asked for every entry of a SendBatch; a
	// non-nil answer refuses that entry alone, as SQS reports in a batch
	// answer's Failed list, and the others are sent.
	FailEntry func(m job.Message) error
}

// NewQueue returns an empty queue on the clock now.
func NewQueue(now clock.Func) *Queue {
	return &Queue{now: now, visibility: map[string]time.Duration{}}
}

func (q *Queue) fail(method string) error {
	if q.Fail == nil {
		return nil
	}
	return q.Fail(method)
}

// Send records m, visible after delay rounded up to whole seconds. Like
// SQS it refuses a delay over 900 s and a body over 256 KB.
func (q *Queue) Send(ctx context.Context, m job.Message, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.fail("Send"); err != nil {
		return err
	}
	s, err := q.entry(m, delay)
	if err != nil {
		return err
	}
	q.sent = append(q.sent, s)
	return nil
}

// SendBatch records msgs[i], visible after delays[i], as one
// SendMessageBatch: every entry leaves at the same instant. It returns one
// error per message (nil: sent). Like SQS it refuses a whole batch of more
// than 10 entries, and each entry on its own (delay, body, FailEntry).
func (q *Queue) SendBatch(ctx context.Context, msgs []job.Message, delays []time.Duration) []error {
	if err := ctx.Err(); err != nil {
		return each(err, len(msgs))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	errs := make([]error, len(msgs))
	all := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if len(msgs) == 0 {
		return errs
	}
	if err := job.CheckBatch(len(msgs), len(delays)); err != nil {
		return all(err)
	}
	if err := q.fail("SendBatch"); err != nil {
		return all(err)
	}
	for i, m := range msgs {
		if q.FailEntry != nil {
			if err := q.FailEntry(m); err != nil {
				errs[i] = err
				continue
			}
		}
		s, err := q.entry(m, delays[i])
		if err != nil {
			errs[i] = err
			continue
		}
		q.sent = append(q.sent, s)
	}
	return errs
}

func (q *Queue) entry(m job.Message, delay time.Duration) (Sent, error) {
	delay = max(delay, 0)
	if delay > maxDelay {
		return Sent{}, fmt.Errorf("send job %d: InvalidParameterValue: DelaySeconds %s is over 900", m.JobID, delay)
	}
	b, err := json.Marshal(m)
	if err != nil || len(b) > maxBodyBytes {
		return Sent{}, fmt.Errorf("send job %d: InvalidParameterValue: body of %d bytes", m.JobID, len(b))
	}
	q.seq++
	secs := math.Ceil(delay.Seconds())
	return Sent{ID: "m-" + strconv.Itoa(q.seq), Msg: m, At: q.now(), Delay: time.Duration(secs) * time.Second}, nil
}

// Delete records a deleted receipt handle.
func (q *Queue) Delete(ctx context.Context, receiptHandle string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.fail("Delete"); err != nil {
		return err
	}
	q.deleted = append(q.deleted, receiptHandle)
	return nil
}

// RetryAfter records the visibility asked for a received message. Like SQS
// it refuses a visibility that would end 12 hours or more after the receive.
func (q *Queue) RetryAfter(ctx context.Context, receiptHandle string, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.fail("RetryAfter"); err != nil {
		return err
	}
	secs := time.Duration(math.Ceil(max(d, 0).Seconds())) * time.Second
	// SQS counts the 12 hours from the receive, which always lies a little
	// in the past: 12 h itself is already beyond the limit.
	if secs >= maxVisibility {
		return fmt.Errorf("change message visibility: InvalidParameterValue: total visibility %s is beyond the 12 hour limit", secs)
	}
	q.visibility[receiptHandle] = secs
	return nil
}

// Sent returns every message sent so far, in order.
func (q *Queue) Sent() []Sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Sent(nil), q.sent...)
}

// Deleted returns every receipt handle deleted so far.
func (q *Queue) Deleted() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.deleted...)
}

// Visibility returns the visibility last asked for receiptHandle.
func (q *Queue) Visibility(receiptHandle string) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.visibility[receiptHandle]
	return d, ok
}

// each is err for every one of n messages.
func each(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
