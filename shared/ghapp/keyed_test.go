package ghapp_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

type notSet struct{}

func (notSet) Error() string { return "secret not set yet" }
func (notSet) NotSet() bool  { return true }

// TestKeyedWaitsForItsKey: a client built before the private key exists
// answers with the source's "not set" error (recognisable by the caller),
// then works as soon as the key is there, with no rebuild by the caller.
func TestKeyedWaitsForItsKey(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	pemBytes, _ := testKey(t)
	var (
		mu    sync.Mutex
		key   []byte
		reads int
	)
	source := func(context.Context) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if key == nil {
			return nil, notSet{}
		}
		return key, nil
	}
	k, err := ghapp.NewKeyed(ghapp.Config{AppID: appID, BaseURL: f.srv.URL}, source)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})

	_, err = k.JobStatus(ctx, inst, "octo", "hello", 7)
	var ns interface{ NotSet() bool }
	if !errors.As(err, &ns) || !ns.NotSet() {
		t.Fatalf("before the key: got %v, want the source's NotSet error", err)
	}
	if n := f.fake.Stats().TokenRequests[inst]; n != 0 {
		t.Fatalf("%d token requests without a key, want 0", n)
	}

	mu.Lock()
	key = pemBytes // make app wrote it
	mu.Unlock()
	for range 2 {
		st, err := k.JobStatus(ctx, inst, "octo", "hello", 7)
		if err != nil || st != "queued" {
			t.Fatalf("after the key: got %q, %v; want queued", st, err)
		}
	}
	if n := f.fake.Stats().TokenRequests[inst]; n != 1 {
		t.Errorf("%d token requests, want 1: the client must be reused while the key is unchanged", n)
	}
	if _, err := k.GenerateJIT(ctx, inst, repoJIT("pool-7")); err != nil {
		t.Fatalf("GenerateJIT: %v", err)
	}
	if _, err := k.FindRunner(ctx, inst, ghapp.ScopeRepo, "octo", "hello", "pool-7"); err != nil {
		t.Fatalf("FindRunner: %v", err)
	}
}

// TestKeyedServesTheAppLevelCalls: the janitor's and the redeliverer's
// calls (installations, repositories, runner lists, the delivery log, a
// redelivery) wait for the key like the claimer's, so those functions too
// run when deployed before make app instead of failing at init.
func TestKeyedServesTheAppLevelCalls(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	pemBytes, _ := testKey(t)
	var (
		mu  sync.Mutex
		key []byte
	)
	k, err := ghapp.NewKeyed(ghapp.Config{AppID: appID, BaseURL: f.srv.URL}, func(context.Context) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if key == nil {
			return nil, notSet{}
		}
		return key, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.fake.SetInstallation(inst, "octo", true, "hello")
	d := f.fake.RecordDelivery(ghfake.HookDelivery{GUID: "g-1", Event: "workflow_job", Action: "queued", StatusCode: 502})
	calls := map[string]func() error{
		"installations": func() error { _, err := k.Installations(ctx); return err },
		"repositories":  func() error { _, err := k.Repositories(ctx, inst); return err },
		"runners":       func() error { _, err := k.ListRunners(ctx, inst, ghapp.ScopeRepo, "octo", "hello"); return err },
		"deliveries":    func() error { _, err := k.ListHookDeliveries(ctx, "", 10); return err },
		"redeliver":     func() error { return k.RedeliverHookDelivery(ctx, d.ID) },
	}
	for name, call := range calls {
		var ns interface{ NotSet() bool }
		if err := call(); !errors.As(err, &ns) || !ns.NotSet() {
			t.Errorf("%s before the key: got %v, want the source's NotSet error", name, err)
		}
	}
	mu.Lock()
	key = pemBytes
	mu.Unlock()
	for name, call := range calls {
		if err := call(); err != nil {
			t.Errorf("%s after the key: %v", name, err)
		}
	}
}

func TestKeyedBadKeyIsAnError(t *testing.T) {
	t.Parallel()
	k, err := ghapp.NewKeyed(ghapp.Config{AppID: appID}, func(context.Context) ([]byte, error) { return []byte("not a pem"), nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Ready(context.Background()); err == nil {
		t.Fatal("got no error for a key that does not parse")
	}
}
