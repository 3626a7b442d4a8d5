package mem

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// redeliveries is the redeliverer's bookkeeping (shared/redeliver.Store):
// the mark of the last completed pass and the attempt count per GUID.
type redeliveries struct {
	mark     job.DeliveryMark
	hasMark  bool
	attempts map[string]attemptCount
}

type attemptCount struct {
	n         int
	askedAt   time.Time
	askedID   int64
	expiresAt int64 // epoch seconds, as the table's TTL attribute
}

// LoadMark returns the mark of the last completed pass, or an error
// wrapping job.ErrNotFound.
func (s *Store) LoadMark(ctx context.Context) (job.DeliveryMark, error) {
	if err := ctx.Err(); err != nil {
		return job.DeliveryMark{}, err
	}
	defer s.enter("LoadMark")()
	if !s.red.hasMark {
		return job.DeliveryMark{}, fmt.Errorf("redelivery mark: %w", job.ErrNotFound)
	}
	m := s.red.mark
	m.Resume.Redelivered = slices.Clone(m.Resume.Redelivered)
	m.Retry = slices.Clone(m.Retry)
	return m, nil
}

// SaveMark stores m unless the stored mark is at a higher ID.
func (s *Store) SaveMark(ctx context.Context, m job.DeliveryMark, _ time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.enter("SaveMark")()
	// The redelivered GUIDs are a string set in the table: DynamoDB
	// refuses one with a member twice, whatever the stored mark.
	if set := m.Resume.Redelivered; m.Resume.Cursor != "" && len(slices.Compact(slices.Sorted(slices.Values(set)))) != len(set) {
		return fmt.Errorf("put redelivery mark %d: ValidationException: Input collection %v contains duplicates", m.ID, set)
	}
	if s.red.hasMark && s.red.mark.ID > m.ID {
		return nil
	}
	m.DeliveredAt = job.FromMillis(job.Millis(m.DeliveredAt)) // the table's precision
	m.Resume.TopAt = job.FromMillis(job.Millis(m.Resume.TopAt))
	// An empty list is not written, so it reads back as none (nil).
	m.Resume.Redelivered = nilIfEmpty(m.Resume.Redelivered)
	m.Retry = nilIfEmpty(m.Retry)
	for i := range m.Retry {
		m.Retry[i].DeliveredAt = job.FromMillis(job.Millis(m.Retry[i].DeliveredAt))
	}
	if m.Resume.Cursor == "" {
		m.Resume = job.DeliveryResume{}
	}
	s.red.mark, s.red.hasMark = m, true
	return nil
}

// CountRedelivery adds one to guid's attempts unless it has max already (an
// error wrapping job.ErrAttemptsSpent). A count past its expires_at counts
// as absent, as in the table (TTL deletion is lazy).
func (s *Store) CountRedelivery(ctx context.Context, guid string, id int64, max int, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	defer s.enter("CountRedelivery")()
	if guid == "" {
		return 0, fmt.Errorf("count redelivery: empty guid")
	}
	if s.red.attempts == nil {
		s.red.attempts = map[string]attemptCount{}
	}
	c := s.red.attempts[guid]
	if c.expiresAt < now.Unix() {
		c = attemptCount{}
	}
	if c.n >= max {
		return c.n, fmt.Errorf("count redelivery %s: %w", guid, job.ErrAttemptsSpent)
	}
	c.n++
	c.askedAt = job.FromMillis(job.Millis(now)) // the table's precision
	c.askedID = id
	c.expiresAt = now.Add(job.RedeliveryTTL).Unix()
	s.red.attempts[guid] = c
	return c.n, nil
}

// Redeliveries returns guid's count, its last count's time and log id; none (or
// one past its expires_at) is the zero count.
func (s *Store) Redeliveries(ctx context.Context, guid string, now time.Time) (job.RedeliveryCount, error) {
	if err := ctx.Err(); err != nil {
		return job.RedeliveryCount{}, err
	}
	defer s.enter("Redeliveries")()
	c, ok := s.red.attempts[guid]
	if !ok || c.expiresAt < now.Unix() {
		return job.RedeliveryCount{}, nil
	}
	return job.RedeliveryCount{Attempts: c.n, AskedAt: c.askedAt, AskedID: c.askedID}, nil
}

// RefundRedelivery takes one back from guid's count if it is still count.
func (s *Store) RefundRedelivery(ctx context.Context, guid string, count int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.enter("RefundRedelivery")()
	if c, ok := s.red.attempts[guid]; ok && c.n == count {
		c.n--
		s.red.attempts[guid] = c
	}
	return nil
}

// nilIfEmpty is a copy of l, nil when l has no element.
func nilIfEmpty[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return slices.Clone(l)
}
