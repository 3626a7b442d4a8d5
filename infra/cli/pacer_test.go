package cli

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/random"
)

// TestPacerStopsWhenCancelled: a run stopped (Ctrl-C) while a retry's
// read or write was slow found no wait owed at the next id, so the pacer
// let it through, and retry went on through every id left, each failing
// on the cancelled context, instead of stopping and naming those not
// tried. A cancelled context stops the pacer whether or not it owes a wait.
func TestPacerStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	p := &pacer{now: func() time.Time { return at }, rnd: random.New(1),
		sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	p.sent()
	at = at.Add(time.Minute) // the next id's wait is long past
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx, func() {}); err == nil {
		t.Fatal("wait on a cancelled context: nil, want the context's error")
	}
}
