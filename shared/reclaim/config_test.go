package reclaim_test

import (
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestNewRefusesIncompleteConfig: New names the missing field of Config
// instead of building a reclaimer that panics on its first pass.
func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  reclaim.Config
	}{
		{name: "Store", cfg: reclaim.Config{Queue: mem.NewQueue(nil)}},
		{name: "Queue", cfg: reclaim.Config{Store: mem.NewStore(job.Timing{})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := reclaim.New(tt.cfg)
			if want := "Config." + tt.name + " is required"; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("New = %v, want an error saying %q", err, want)
			}
		})
	}
}
