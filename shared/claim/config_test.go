package claim_test

import (
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestNewRefusesIncompleteConfig: New names the missing field of Config
// instead of building a claimer that fails on its first message.
func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	full := func() claim.Config {
		return claim.Config{
			Pools: []pool.Pool{{Name: "linux", Labels: []string{"self-hosted"}}},
			Store: mem.NewStore(job.Timing{}), Queue: mem.NewQueue(nil), GitHub: noGitHub{},
			Provisioner: mem.NewProvisioner(), Policy: backoff.Default(),
		}
	}
	tests := []struct {
		name  string
		unset func(*claim.Config)
	}{
		{name: "Store", unset: func(c *claim.Config) { c.Store = nil }},
		{name: "Queue", unset: func(c *claim.Config) { c.Queue = nil }},
		{name: "GitHub", unset: func(c *claim.Config) { c.GitHub = nil }},
		{name: "Provisioner", unset: func(c *claim.Config) { c.Provisioner = nil }},
		{name: "Policy", unset: func(c *claim.Config) { c.Policy = nil }},
		{name: "Pools", unset: func(c *claim.Config) { c.Pools = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := full()
			tt.unset(&cfg)
			_, err := claim.New(cfg)
			if want := "Config." + tt.name + " is required"; err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("New = %v, want an error saying %q", err, want)
			}
		})
	}
}

// noGitHub stands in for a GitHub client New never calls.
type noGitHub struct{ claim.GitHub }
