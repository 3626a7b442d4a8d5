package ghfake_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/google/go-github/v62/github"
)

// TestEphemeralRunnerExpires: GitHub removes an ephemeral runner not
// connected for more than a day (EphemeralLifetime): one never online
// counts from its registration, one gone offline from then, one online
// stays. Past that, the runner is gone from the routes: GET 404, not
// listed, DELETE 404, and its name is free for a new JIT config. The fake
// used to keep it for ever.
func TestEphemeralRunnerExpires(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// life changes the runner's status as its process would, moving
		// the clock; it returns when the runner was last connected.
		life func(t *testing.T, f fixture, set func(time.Time), id int64) time.Time
		// online runners never expire.
		online bool
	}{
		{name: "never connected", life: func(*testing.T, fixture, func(time.Time), int64) time.Time { return t0 }},
		{name: "gone offline", life: func(t *testing.T, f fixture, set func(time.Time), id int64) time.Time {
			set(t0.Add(time.Hour))
			mustSet(t, f.fake.SetRunnerByID(id, "online", true))
			set(t0.Add(3 * time.Hour))
			mustSet(t, f.fake.SetRunnerByID(id, "offline", false))
			return t0.Add(3 * time.Hour)
		}},
		{name: "online", online: true, life: func(t *testing.T, f fixture, set func(time.Time), id int64) time.Time {
			mustSet(t, f.fake.SetRunnerByID(id, "online", false))
			return t0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				mu  sync.Mutex
				now = t0
			)
			set := func(at time.Time) { mu.Lock(); defer mu.Unlock(); now = at }
			f := setup(t, ghfake.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
			ctx := context.Background()
			// A token lives an hour: each step past it takes a new one.
			gh := func() *github.Client { return client(t, f.srv.URL+"/", f.fake.IssueToken(inst)) }
			cfg, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq("pool-1"))
			if err != nil {
				t.Fatal(err)
			}
			id := cfg.GetRunner().GetID()
			last := tt.life(t, f, set, id)

			set(last.Add(ghfake.EphemeralLifetime)) // "more than 1 day": not yet
			if _, _, err := gh().Actions.GetRunner(ctx, "octo", "hello", id); err != nil {
				t.Fatalf("a day after its last connection: %v, want the runner still there", err)
			}

			set(last.Add(ghfake.EphemeralLifetime + time.Second))
			late := gh()
			_, _, err = late.Actions.GetRunner(ctx, "octo", "hello", id)
			if tt.online {
				if err != nil {
					t.Errorf("online runner past a day: %v, want it kept (it is connected)", err)
				}
				return
			}
			errorResponse(t, err, 404)
			list, _, err := late.Actions.ListRunners(ctx, "octo", "hello", nil)
			if err != nil {
				t.Fatal(err)
			}
			if list.TotalCount != 0 || len(list.Runners) != 0 {
				t.Errorf("list = %d runners (total %d), want none", len(list.Runners), list.TotalCount)
			}
			if _, ok := f.fake.RunnerByName("pool-1"); ok {
				t.Error("RunnerByName found the expired runner, want it gone")
			}
			_, err = late.Actions.RemoveRunner(ctx, "octo", "hello", id)
			errorResponse(t, err, 404)
			if _, resp, err := late.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq("pool-1")); err != nil || resp.StatusCode != 201 {
				t.Errorf("JIT config for the expired runner's name: %v, want 201 (the name is free)", err)
			}
		})
	}
}

func mustSet(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
