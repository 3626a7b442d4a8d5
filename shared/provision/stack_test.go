package provision

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// TestStacksLeaveEachOthersMachines (EC2 and SSM on moto): two stacks in
// one account and Region share EC2 and /ghclaim/runners/. Each tags what
// it launches and writes with its name; its per-job lookup and its
// janitor's listings skip the other stack's machines and configs, while an
// untagged machine or config (from before stacks were tagged) stays
// visible to both.
func TestStacksLeaveEachOthersMachines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupAWS(t)
	f.launchTemplate(t, "runner-stacks")
	p := ec2Pool()
	p.Provisioner.LaunchTemplate, p.Provisioner.LaunchTemplateVersion, p.Provisioner.Subnets = "runner-stacks", "$Latest", nil
	a := NewEC2(f.ec2, f.ssm, nil).InStack("ci-a")
	b := NewEC2(f.ec2, f.ssm, nil).InStack("ci-b")
	const ofA, legacy = int64(5201), int64(5202)

	reqA := request(p, ofA)
	resA, err := a.Provision(ctx, reqA)
	if err != nil {
		t.Fatalf("stack a: Provision: %v", err)
	}
	insts := f.jobInstances(t, ofA)
	if len(insts) != 1 || tagMap(insts[0].Tags)[TagStack] != "ci-a" {
		t.Fatalf("stack a's machine: got %+v, want one tagged %s=ci-a", insts, TagStack)
	}
	if got := f.parameterTags(t, ParameterName(reqA.RunnerName))[TagStack]; got != "ci-a" {
		t.Errorf("stack a's config: tag %s = %q, want ci-a", TagStack, got)
	}

	// Stack b looking for (or cleaning up) the same attempt does not see a's machine.
	if id, err := b.Running(ctx, reqA); err != nil || id != "" {
		t.Errorf("stack b: Running = %q, %v; want no machine (%s is stack a's)", id, err, resA.InstanceID)
	}
	if err := b.Cleanup(ctx, reqA); err != nil {
		t.Fatalf("stack b: Cleanup: %v", err)
	}
	if st, err := provisiontest.State(ctx, f.ec2, resA.InstanceID); err != nil || st != ec2api.StateRunning {
		t.Errorf("stack a's machine after stack b's Cleanup: %q, %v; want running", st, err)
	}
	if id, err := a.Running(ctx, reqA); err != nil || id != resA.InstanceID {
		t.Errorf("stack a: Running = %q, %v; want its own %s", id, err, resA.InstanceID)
	}
	if _, err := a.Provision(ctx, reqA); err != nil { // puts back the config b's Cleanup removed (IAM refuses that on AWS)
		t.Fatalf("stack a: Provision again: %v", err)
	}

	// A machine and a config from before stacks were tagged are everyone's.
	reqOld := request(p, legacy)
	old, err := provisiontest.RunInstance(ctx, f.ec2, "ami-03cf127a", "t3.micro", []ec2api.Tag{
		{Key: TagJobID, Value: fmt.Sprint(legacy)}, {Key: TagRunnerName, Value: reqOld.RunnerName}, {Key: TagPool, Value: "linux"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := provisiontest.PutParameter(ctx, f.ssm, &ssmapi.PutParameterInput{Name: ParameterName(reqOld.RunnerName),
		Value: "jit", Type: ssmapi.TypeSecureString}); err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]*EC2{"a": a, "b": b} {
		if id, err := e.Running(ctx, reqOld); err != nil || id != old {
			t.Errorf("stack %s: Running of the untagged machine's job = %q, %v; want %s", name, id, err, old)
		}
	}

	// The janitor's listings, scoped alike.
	for _, tt := range []struct {
		stack       string
		wantA, want bool // a's machine and config; the untagged ones
	}{
		{stack: "ci-a", wantA: true, want: true},
		{stack: "ci-b", wantA: false, want: true},
		{stack: "", wantA: true, want: true},
	} {
		l := Leftovers{Instances: f.ec2, Parameters: f.ssm, Stack: tt.stack}
		ms, err := l.LiveMachines(ctx)
		if err != nil {
			t.Fatalf("stack %q: LiveMachines: %v", tt.stack, err)
		}
		ids := make([]string, 0, len(ms))
		for _, m := range ms {
			ids = append(ids, m.ID)
			// Where the runner was registered, for the janitor's look-up.
			if want, mine := map[string]string{resA.InstanceID: reqA.Pool.Scope, old: ""}[m.ID]; mine && m.Scope != want {
				t.Errorf("stack %q: machine %s listed with scope %q, want %q", tt.stack, m.ID, m.Scope, want)
			}
		}
		if got := slices.Contains(ids, resA.InstanceID); got != tt.wantA {
			t.Errorf("stack %q: lists stack a's machine: %t, want %t", tt.stack, got, tt.wantA)
		}
		if got := slices.Contains(ids, old); got != tt.want {
			t.Errorf("stack %q: lists the untagged machine: %t, want %t", tt.stack, got, tt.want)
		}
		cs, err := l.Configs(ctx, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatalf("stack %q: Configs: %v", tt.stack, err)
		}
		names := make([]string, 0, len(cs.Parameters))
		for _, c := range cs.Parameters {
			names = append(names, c.Name)
		}
		if got := slices.Contains(names, ParameterName(reqA.RunnerName)); got != tt.wantA {
			t.Errorf("stack %q: lists stack a's config: %t, want %t", tt.stack, got, tt.wantA)
		}
		if got := slices.Contains(names, ParameterName(reqOld.RunnerName)); got != tt.want {
			t.Errorf("stack %q: lists the untagged config: %t, want %t", tt.stack, got, tt.want)
		}
	}
}

// parameterTags returns parameter name's tags.
func (f awsFixture) parameterTags(t *testing.T, name string) map[string]string {
	t.Helper()
	out, err := f.ssm.ListTagsForResource(context.Background(), &ssmapi.ListTagsForResourceInput{
		ResourceType: ssmapi.ResourceTypeParameter, ResourceID: name})
	if err != nil {
		t.Fatalf("ListTagsForResource %s: %v", name, err)
	}
	got := map[string]string{}
	for _, tg := range out.TagList {
		got[tg.Key] = tg.Value
	}
	return got
}
