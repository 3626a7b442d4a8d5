package provision

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestReplacementGetsItsOwnMachineOnMoto: a new attempt of a job whose
// first runner was taken by another job (its machine is at work on that
// job) starts a machine of its own, tagged with its runner name and
// replacement, and its Cleanup ends only that machine; the taken runner's
// machine keeps running. Before, the job-tag lookup reused the busy
// machine and Cleanup ended it.
func TestReplacementGetsItsOwnMachineOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupAWS(t)
	const id = 5101
	p := ec2Pool()
	p.Provisioner.LaunchTemplate, p.Provisioner.LaunchTemplateVersion = "runner-5101", "$Latest"
	f.launchTemplate(t, "runner-5101")
	subnets, err := provisiontest.Subnets(ctx, f.ec2)
	if err != nil || len(subnets) == 0 {
		t.Fatalf("DescribeSubnets: %v", err)
	}
	p.Provisioner.Subnets = []string{subnets[0]}
	adapter := NewEC2(f.ec2, f.ssm, nil)

	first := request(p, id)
	old, err := adapter.Provision(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	second := request(p, id)
	second.RunnerName, second.Replacement = job.RunnerNameAt(p.Name, id, 1), 1
	second.JITConfig = jit + "-r1" // a new registration
	repl, err := adapter.Provision(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if repl.Reused || repl.InstanceID == "" || repl.InstanceID == old.InstanceID {
		t.Fatalf("replacement: got %+v, want a new machine, not the taken runner's %s", repl, old.InstanceID)
	}
	if got, err := adapter.Running(ctx, second); err != nil || got != repl.InstanceID {
		t.Errorf("Running(replacement) = %q, %v; want %s", got, err, repl.InstanceID)
	}
	for _, inst := range f.jobInstances(t, id) {
		if inst.InstanceID == repl.InstanceID {
			if tags := tagMap(inst.Tags); tags[TagRunnerName] != second.RunnerName || tags[TagReplacement] != "1" {
				t.Errorf("replacement tags %v, want runner name %s and replacement 1", tags, second.RunnerName)
			}
		}
	}

	if err := adapter.Cleanup(ctx, second); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, inst := range f.jobInstances(t, id) {
		states[inst.InstanceID] = inst.State.Name
	}
	if s := states[old.InstanceID]; s != ec2api.StateRunning && s != ec2api.StatePending {
		t.Errorf("the taken runner's machine %s is %s after the replacement's cleanup, want still running", old.InstanceID, s)
	}
	if s := states[repl.InstanceID]; s == ec2api.StateRunning || s == ec2api.StatePending {
		t.Errorf("the replacement's machine %s is %s after its cleanup, want ended", repl.InstanceID, s)
	}
}
