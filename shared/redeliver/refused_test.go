package redeliver

import (
	"testing"

	"github.com/ghclaim/ghclaim/shared/failure"
)

// TestRefusedForGood: only GitHub's answer about the delivery itself keeps
// the attempt an ask counted; every failure after which GitHub redelivered
// nothing gives it back.
func TestRefusedForGood(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		f    failure.Failure
		want bool
	}{
		{name: "422, too old to redeliver", f: failure.Failure{GitHub: true, Status: 422, Class: failure.NonRetryable}, want: true},
		{name: "404, no such delivery", f: failure.Failure{GitHub: true, Status: 404, Class: failure.NonRetryable}, want: true},
		{name: "400", f: failure.Failure{GitHub: true, Status: 400, Class: failure.NonRetryable}, want: true},
		{name: "410", f: failure.Failure{GitHub: true, Status: 410, Class: failure.NonRetryable}, want: true},
		{name: "409", f: failure.Failure{GitHub: true, Status: 409, Class: failure.NonRetryable}, want: true},
		{name: "451", f: failure.Failure{GitHub: true, Status: 451, Class: failure.NonRetryable}, want: true},
		{name: "401, the App's key is wrong", f: failure.Failure{GitHub: true, Status: 401, Class: failure.NonRetryable}},
		{name: "403, permission withdrawn", f: failure.Failure{GitHub: true, Status: 403, Class: failure.NonRetryable}},
		{name: "429", f: failure.Failure{GitHub: true, Status: 429, Class: failure.RateLimit}},
		{name: "403 secondary limit", f: failure.Failure{GitHub: true, Status: 403, Class: failure.RateLimit}},
		{name: "502", f: failure.Failure{GitHub: true, Status: 502, Class: failure.ServerSide}},
		{name: "a reset connection", f: failure.Failure{Class: failure.Network}},
		{name: "anything else", f: failure.Failure{Class: failure.UnknownRetryable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := refusedForGood(tt.f); got != tt.want {
				t.Errorf("refusedForGood(%+v) = %v, want %v", tt.f, got, tt.want)
			}
		})
	}
}
