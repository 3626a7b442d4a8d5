package eventsource

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/ghclaim/ghclaim/shared/clock"
)

// Schedule is an EventBridge schedule rule invoking one function with "Scheduled Event"s.
//
// Unlike EventBridge, it never overlaps invocations: a tick that comes while the previous
// invocation still runs is skipped (time.Ticker drops it). Overlap is safe for the reclaimer
// anyway (its take-backs are conditional); skipping keeps one execution environment enough.
type Schedule struct {
	// Every is the rate, as in rate(…) (required).
	Every time.Duration
	// RuleARN goes into the event's resources.
	RuleARN string
	// Region and Account go into the event (defaults us-east-1, 123456789012).
	Region  string
	Account string
	// Now stamps the event's time (default time.Now).
	Now clock.Func
	// NewID returns event ids (default: a counter).
	NewID func() string
	// Log receives one line per failed invocation (default: discard).
	Log *slog.Logger
	// OnInvoke, if set, is told about every invocation's outcome.
	OnInvoke func(err error)

	mu    sync.Mutex
	seq   int
	stats ScheduleStats
}

// ScheduleStats counts the schedule's invocations.
type ScheduleStats struct {
	Invocations int
	Errors      int
}

// Stats returns the counters so far.
func (s *Schedule) Stats() ScheduleStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Run invokes fn every Every until ctx ends, the first time one period after start (as a new
// rule does). It returns ctx's error.
func (s *Schedule) Run(ctx context.Context, fn Invoker) error {
	if s.Every <= 0 {
		return fmt.Errorf("eventsource: Schedule.Every must be positive, got %s", s.Every)
	}
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			_ = s.Fire(ctx, fn)
		}
	}
}

// Fire invokes fn once with a scheduled event, as one tick of the rule does.
func (s *Schedule) Fire(ctx context.Context, fn Invoker) error {
	payload, err := json.Marshal(s.Event())
	if err != nil {
		return fmt.Errorf("encode scheduled event: %w", err)
	}
	_, err = fn.Invoke(ctx, payload)
	s.mu.Lock()
	s.stats.Invocations++
	if err != nil {
		s.stats.Errors++
	}
	s.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		s.logger().Warn("schedule: invocation failed", "rule", s.RuleARN, "error", err.Error())
	}
	if s.OnInvoke != nil {
		s.OnInvoke(err)
	}
	return err
}

// Event is the next scheduled event of the rule.
func (s *Schedule) Event() events.CloudWatchEvent {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	region, account := s.Region, s.Account
	if region == "" {
		region = "us-east-1"
	}
	if account == "" {
		account = "123456789012"
	}
	var id string
	if s.NewID != nil {
		id = s.NewID()
	} else {
		s.mu.Lock()
		s.seq++
		id = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq)
		s.mu.Unlock()
	}
	ev := events.CloudWatchEvent{
		Version:    "0",
		ID:         id,
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  account,
		Time:       now.UTC().Truncate(time.Second),
		Region:     region,
		Detail:     json.RawMessage(`{}`),
	}
	if s.RuleARN != "" {
		ev.Resources = []string{s.RuleARN}
	} else {
		ev.Resources = []string{}
	}
	return ev
}

func (s *Schedule) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}
