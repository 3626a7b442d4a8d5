package mem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/pool"
)

func request(typ string, id int64, config string) pool.Request {
	return pool.Request{JobID: id, RunID: 1, Repo: "octo/app", RunnerName: "linux-7", JITConfig: config,
		Pool: pool.Pool{Name: "linux", Provisioner: pool.Provisioner{Type: typ}}}
}

// TestProvisioner: the promises of the EC2 adapter, which the claimer's
// flow tests rely on.
func TestProvisioner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := mem.NewProvisioner()
	capacity := errors.New("InsufficientInstanceCapacity")

	p.Fail(capacity, 1)
	if _, err := p.Provision(ctx, request(pool.ProvisionerEC2, 7, "cfg-1")); !errors.Is(err, capacity) {
		t.Fatalf("got %v, want the injected failure", err)
	}
	if c, ok := p.Config("linux-7"); !ok || c != "cfg-1" || len(p.Machines(7)) != 0 {
		t.Fatalf("after a failed launch: config %q (%v), %d machines; want the config left, no machine", c, ok, len(p.Machines(7)))
	}
	first, err := p.Provision(ctx, request(pool.ProvisionerEC2, 7, "cfg-2"))
	if err != nil || first.Reused || first.InstanceID == "" {
		t.Fatalf("first launch: %+v, %v", first, err)
	}
	again, err := p.Provision(ctx, request(pool.ProvisionerEC2, 7, "cfg-3"))
	if err != nil || !again.Reused || again.InstanceID != first.InstanceID || len(p.Machines(7)) != 1 {
		t.Fatalf("repeat: %+v, %v, %d machines; want the first machine reused", again, err, len(p.Machines(7)))
	}
	if id, _ := p.Running(ctx, request(pool.ProvisionerEC2, 7, "")); id != first.InstanceID {
		t.Fatalf("running %q, want %q", id, first.InstanceID)
	}
	if id, _ := p.Running(ctx, request(pool.ProvisionerDispatch, 7, "")); id != "" {
		t.Fatalf("dispatch running %q, want \"\": a dispatch pool cannot tell", id)
	}
	if err := p.Cleanup(ctx, request(pool.ProvisionerEC2, 7, "")); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Config("linux-7"); ok {
		t.Fatal("config left after Cleanup")
	}
	if err := p.Cleanup(ctx, request(pool.ProvisionerEC2, 7, "")); err != nil {
		t.Fatalf("second Cleanup: %v, want success with nothing to remove", err)
	}
	if _, err := p.Provision(ctx, request(pool.ProvisionerEC2, 8, "")); !errors.Is(err, pool.ErrInvalidRequest) {
		t.Fatalf("empty config: got %v, want ErrInvalidRequest", err)
	}
	p.Stop(7)
	if id, _ := p.Running(ctx, request(pool.ProvisionerEC2, 7, "")); id != "" {
		t.Fatalf("running %q after Stop, want none", id)
	}
}
