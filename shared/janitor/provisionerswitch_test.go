package janitor_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
)

// TestMachineEndedThroughEC2AfterProvisionerSwitch: pool linux moved from
// ec2 to dispatch while a machine of a finished job still ran. The
// janitor routed its clean-up by the pool's provisioner of today, the
// dispatch one, which ends nothing: the machine ran on, reported ended.
// A machine of the EC2 listing is ended through EC2.
func TestMachineEndedThroughEC2AfterProvisionerSwitch(t *testing.T) {
	t.Parallel()
	const id = int64(88002)
	f := setup(t)
	f.now = t0.Add(-2 * time.Hour)
	f.machine(t, id) // launched by the ec2 pool linux
	f.now = t0
	f.record(id, job.Done, "linux-999")
	moved := linux
	moved.Provisioner = pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/hosts"}
	reg := provision.Registry{pool.ProvisionerEC2: f.prov, pool.ProvisionerDispatch: provision.NewDispatch(nil, nil)}
	rep, err := f.janitorOf(t, f.gh, reg, moved).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, m := range f.prov.Machines(id) {
		if !m.Stopped {
			live++
		}
	}
	if live != 0 || rep.MachinesEnded != 1 {
		t.Fatalf("report MachinesEnded=%d with %d machine(s) of the done job still running; want it ended through EC2", rep.MachinesEnded, live)
	}
}
