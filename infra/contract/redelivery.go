package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// RedeliveryStore is the redeliverer's port (shared/redeliver.Store).
type RedeliveryStore interface {
	LoadMark(ctx context.Context) (job.DeliveryMark, error)
	SaveMark(ctx context.Context, m job.DeliveryMark, now time.Time) error
	CountRedelivery(ctx context.Context, guid string, id int64, max int, now time.Time) (int, error)
	Redeliveries(ctx context.Context, guid string, now time.Time) (job.RedeliveryCount, error)
	RefundRedelivery(ctx context.Context, guid string, count int) error
}

// TestRedeliveryStore holds a redeliverer store to its contract. GUIDs are
// prefixed with prefix, so one table serves several runs; the mark is one
// item per table, so the mark subtest builds on whatever mark it finds and
// must not run beside another writer of the mark.
func TestRedeliveryStore(t *testing.T, prefix string, open func(t *testing.T) RedeliveryStore) {
	ctx := context.Background()
	t.Run("mark moves forward only", func(t *testing.T) {
		s := open(t)
		var base int64
		switch cur, err := s.LoadMark(ctx); {
		case errors.Is(err, job.ErrNotFound):
		case err != nil:
			t.Fatalf("LoadMark: %v", err)
		default:
			base = cur.ID
		}
		at := T0.Add(1234567 * time.Microsecond) // sub-millisecond part: the table keeps milliseconds
		want := job.DeliveryMark{ID: base + 10, DeliveredAt: T0.Add(1234 * time.Millisecond)}
		if err := s.SaveMark(ctx, job.DeliveryMark{ID: base + 10, DeliveredAt: at}, T0); err != nil {
			t.Fatalf("SaveMark: %v", err)
		}
		if err := s.SaveMark(ctx, job.DeliveryMark{ID: base + 5, DeliveredAt: T0}, T0); err != nil {
			t.Fatalf("SaveMark of an older mark: %v, want a silent refusal", err)
		}
		got, err := s.LoadMark(ctx)
		if err != nil {
			t.Fatalf("LoadMark: %v", err)
		}
		if got.ID != want.ID || !got.DeliveredAt.Equal(want.DeliveredAt) {
			t.Errorf("LoadMark = %+v, want %+v", got, want)
		}
	})
	t.Run("a read under way is kept beside the mark", func(t *testing.T) {
		s := open(t)
		var base int64
		if cur, err := s.LoadMark(ctx); err == nil {
			base = cur.ID
		}
		topAt := T0.Add(2500 * time.Millisecond)
		retry := []job.DeliveryRef{{ID: base + 3, GUID: prefix + "-a", Action: "queued", DeliveredAt: T0.Add(time.Second)}, {ID: base + 7, GUID: prefix + "-b", DeliveredAt: T0}}
		under := job.DeliveryMark{ID: base, DeliveredAt: T0, Resume: job.DeliveryResume{
			Cursor: fmt.Sprintf("v1_%d", base+50), Top: base + 90, TopAt: topAt, Redelivered: []string{prefix + "-r1", prefix + "-r2"}},
			Retry: retry}
		if err := s.SaveMark(ctx, under, T0); err != nil {
			t.Fatalf("SaveMark with a read under way: %v", err)
		}
		got, err := s.LoadMark(ctx)
		if err != nil {
			t.Fatalf("LoadMark: %v", err)
		}
		slices.Sort(got.Resume.Redelivered)
		if got.ID != base || got.Resume.Cursor != under.Resume.Cursor || got.Resume.Top != base+90 ||
			!got.Resume.TopAt.Equal(topAt) || !slices.Equal(got.Resume.Redelivered, under.Resume.Redelivered) ||
			!slices.EqualFunc(got.Retry, retry, func(a, b job.DeliveryRef) bool {
				return a.ID == b.ID && a.GUID == b.GUID && a.Action == b.Action && a.DeliveredAt.Equal(b.DeliveredAt)
			}) {
			t.Fatalf("LoadMark = %+v, want %+v", got, under)
		}
		// The read ends: the mark moves to its top, nothing is under way or
		// carried.
		if err := s.SaveMark(ctx, job.DeliveryMark{ID: base + 90, DeliveredAt: topAt}, T0); err != nil {
			t.Fatalf("SaveMark: %v", err)
		}
		if got, err := s.LoadMark(ctx); err != nil || got.ID != base+90 || got.Resuming() || got.Resume.Redelivered != nil || got.Retry != nil {
			t.Errorf("LoadMark after the read ended = %+v, %v; want mark %d and no read under way", got, err, base+90)
		}
	})
	t.Run("a mark's lists as DynamoDB keeps them: empty is none, a set has no duplicates", func(t *testing.T) {
		s := open(t)
		var base int64
		if cur, err := s.LoadMark(ctx); err == nil {
			base = cur.ID
		}
		// An empty list is not written (an empty set cannot be), so it
		// reads back as none.
		empty := job.DeliveryMark{ID: base + 1, DeliveredAt: T0, Retry: []job.DeliveryRef{},
			Resume: job.DeliveryResume{Cursor: "v1_1", Top: base + 2, TopAt: T0, Redelivered: []string{}}}
		if err := s.SaveMark(ctx, empty, T0); err != nil {
			t.Fatalf("SaveMark with empty lists: %v", err)
		}
		got, err := s.LoadMark(ctx)
		if err != nil || got.Retry != nil || got.Resume.Redelivered != nil {
			t.Fatalf("LoadMark = %+v, %v; want no retry list and no redelivered set (nil, not empty)", got, err)
		}
		// The redelivered GUIDs are a string set: DynamoDB refuses one
		// with a GUID twice (ValidationException), and nothing changes.
		dup := empty
		dup.ID = base + 3
		dup.Resume.Redelivered = []string{prefix + "-d", prefix + "-d"}
		if err := s.SaveMark(ctx, dup, T0); err == nil {
			t.Fatal("SaveMark with a GUID twice in the redelivered set: no error, want DynamoDB's refusal")
		}
		if got, err := s.LoadMark(ctx); err != nil || got.ID != base+1 {
			t.Fatalf("after the refused save: LoadMark = %+v, %v; want mark %d as it was", got, err, base+1)
		}
	})
	t.Run("attempts are bounded per guid", func(t *testing.T) {
		s := open(t)
		guid, other := prefix+"-bounded", prefix+"-other"
		for want := 1; want <= 3; want++ {
			n, err := s.CountRedelivery(ctx, guid, 7, 3, T0)
			if err != nil || n != want {
				t.Fatalf("CountRedelivery #%d = %d, %v, want %d, nil", want, n, err, want)
			}
		}
		if _, err := s.CountRedelivery(ctx, guid, 7, 3, T0); !errors.Is(err, job.ErrAttemptsSpent) {
			t.Fatalf("CountRedelivery past max: err = %v, want ErrAttemptsSpent", err)
		}
		if n, err := s.CountRedelivery(ctx, other, 7, 3, T0); err != nil || n != 1 {
			t.Errorf("CountRedelivery of another guid = %d, %v, want 1, nil", n, err)
		}
		// A higher bound (a changed RedeliveryMaxAttempts) allows more.
		if n, err := s.CountRedelivery(ctx, guid, 7, 4, T0); err != nil || n != 4 {
			t.Errorf("CountRedelivery with max 4 = %d, %v, want 4, nil", n, err)
		}
	})
	t.Run("an expired count is absent", func(t *testing.T) {
		s := open(t)
		guid := fmt.Sprintf("%s-expired", prefix)
		if _, err := s.CountRedelivery(ctx, guid, 7, 1, T0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CountRedelivery(ctx, guid, 7, 1, T0.Add(job.RedeliveryTTL-time.Minute)); !errors.Is(err, job.ErrAttemptsSpent) {
			t.Fatalf("inside its TTL: err = %v, want ErrAttemptsSpent", err)
		}
		if n, err := s.CountRedelivery(ctx, guid, 7, 1, T0.Add(job.RedeliveryTTL+time.Minute)); err != nil || n != 1 {
			t.Errorf("past its TTL = %d, %v, want 1, nil (TTL deletion is lazy: the count is gone)", n, err)
		}
	})
	t.Run("a count says when and for which entry it was asked, and a refund takes it back", func(t *testing.T) {
		s := open(t)
		guid := prefix + "-refund"
		if c, err := s.Redeliveries(ctx, guid, T0); err != nil || c != (job.RedeliveryCount{}) {
			t.Fatalf("Redeliveries of a guid never counted = %+v, %v; want zero, nil", c, err)
		}
		at := T0.Add(1234567 * time.Microsecond) // the table keeps milliseconds
		if _, err := s.CountRedelivery(ctx, guid, 7, 3, at); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CountRedelivery(ctx, guid, 42, 3, at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		want := job.RedeliveryCount{Attempts: 2, AskedAt: T0.Add(time.Minute + 1234*time.Millisecond), AskedID: 42}
		if c, err := s.Redeliveries(ctx, guid, T0.Add(time.Hour)); err != nil || c.Attempts != want.Attempts || !c.AskedAt.Equal(want.AskedAt) || c.AskedID != want.AskedID {
			t.Fatalf("Redeliveries = %+v, %v; want %+v", c, err, want)
		}
		// A refund of a count that moved on changes nothing.
		if err := s.RefundRedelivery(ctx, guid, 1); err != nil {
			t.Fatalf("RefundRedelivery of a stale count: %v, want a silent refusal", err)
		}
		if c, _ := s.Redeliveries(ctx, guid, T0.Add(time.Hour)); c.Attempts != 2 {
			t.Fatalf("after a stale refund: %d attempts, want 2", c.Attempts)
		}
		if err := s.RefundRedelivery(ctx, guid, 2); err != nil {
			t.Fatalf("RefundRedelivery: %v", err)
		}
		if c, _ := s.Redeliveries(ctx, guid, T0.Add(time.Hour)); c.Attempts != 1 {
			t.Fatalf("after the refund: %d attempts, want 1", c.Attempts)
		}
		if n, err := s.CountRedelivery(ctx, guid, 7, 2, T0.Add(2*time.Minute)); err != nil || n != 2 {
			t.Errorf("CountRedelivery after the refund = %d, %v; want 2 (the refunded attempt is there again)", n, err)
		}
		// Past its TTL the count is absent.
		if c, err := s.Redeliveries(ctx, guid, T0.Add(job.RedeliveryTTL+time.Hour)); err != nil || c != (job.RedeliveryCount{}) {
			t.Errorf("Redeliveries past the TTL = %+v, %v; want zero", c, err)
		}
	})
}
