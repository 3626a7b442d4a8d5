package janitor_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// TestEndToEnd (EC2 and SSM on moto through the real adapters; GitHub on
// ghfake; the job store in memory): the idle runner of a finished job is
// deleted and its real instance terminated, and a JIT config whose
// instance is gone is deleted, while a busy runner's instance runs on.
// An offline runner of a job this stack never recorded, whose machine is
// another stack's (its ghclaim:stack tag), is left: that stack names its
// runners alike, and the runner is offline while its machine boots.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	// Its own emulator: the janitor lists every machine and runner parameter of
	// the account, and the report is checked for exact counts.
	awsCfg := emulator.OwnForTest(t).ConfigForTest(t)
	instances, params := ec2api.New(awsCfg), ssmapi.New(awsCfg)
	const idle, busy, gone, theirs = int64(5101), int64(5102), int64(5103), int64(5104)

	launch := func(id int64, more ...ec2api.Tag) string {
		t.Helper()
		name := job.RunnerName("linux", id)
		machine, err := provisiontest.RunInstance(ctx, instances, "ami-03cf127a", "t3.micro", append([]ec2api.Tag{
			{Key: provision.TagJobID, Value: strconv.FormatInt(id, 10)},
			{Key: provision.TagPool, Value: "linux"},
			{Key: provision.TagRepo, Value: "octo/app"},
			{Key: provision.TagRunnerName, Value: name},
		}, more...))
		if err != nil {
			t.Fatalf("launch machine of job %d: %v", id, err)
		}
		return machine
	}
	put := func(id int64, instance string) string {
		t.Helper()
		name := provision.ParameterName(job.RunnerName("linux", id))
		if err := provisiontest.PutParameter(ctx, params, &ssmapi.PutParameterInput{Name: name, Value: "jit",
			Type: ssmapi.TypeSecureString, Tags: []ssmapi.Tag{{Key: provision.TagInstanceARN,
				Value: "arn:aws:ec2:us-east-1:123456789012:instance/" + instance}}}); err != nil {
			t.Fatalf("put parameter %s: %v", name, err)
		}
		return name
	}
	state := func(id string) string {
		t.Helper()
		st, err := provisiontest.State(ctx, instances, id)
		if err != nil || st == "" {
			t.Fatalf("describe %s: %v (state %q)", id, err, st)
		}
		return st
	}
	exists := func(name string) bool {
		t.Helper()
		_, err := params.GetParameter(ctx, &ssmapi.GetParameterInput{Name: name})
		if err != nil && !ssmapi.IsCode(err, ssmapi.CodeParameterNotFound) {
			t.Fatalf("get parameter %s: %v", name, err)
		}
		return err == nil
	}

	idleMachine, busyMachine := launch(idle), launch(busy)
	idleParam, busyParam := put(idle, idleMachine), put(busy, busyMachine)
	goneMachine := launch(gone)
	if _, err := instances.TerminateInstances(ctx, &ec2api.TerminateInstancesInput{InstanceIDs: []string{goneMachine}}); err != nil {
		t.Fatal(err)
	}
	goneParam := put(gone, goneMachine)
	theirMachine := launch(theirs, ec2api.Tag{Key: provision.TagStack, Value: "ghclaim-staging"})
	// moto dates parameters by the wall clock: the janitor's clock is an
	// hour later, past every grace.
	now := time.Now().Add(time.Hour)
	f.now = now
	f.runner(t, job.RunnerName("linux", idle), "online", false)
	f.runner(t, job.RunnerName("linux", busy), "online", true)
	f.runner(t, job.RunnerName("linux", theirs), "offline", false)
	f.record(idle, job.Done, "linux-999")
	f.record(busy, job.Done, "linux-999")
	f.record(gone, job.Failed, "")
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Rates: f.rates, Pools: []pool.Pool{linux},
		Provisioner: provision.Registry{pool.ProvisionerEC2: provision.NewEC2(instances, params, slog.New(slog.DiscardHandler))},
		Leftovers:   provision.Leftovers{Instances: instances, Parameters: params, Stack: "ghclaim-prod"},
		Now:         func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	if rep.RunnersDeleted != 1 || rep.RunnersBusy != 1 || rep.UnknownNotOurs != 1 || rep.Errors != 0 {
		t.Errorf("report %+v, want 1 runner deleted, 1 busy, 1 not ours, no error", rep)
	}
	if _, ok := f.fake.RunnerByName(job.RunnerName("linux", theirs)); !ok {
		t.Error("another stack's booting runner was deleted")
	}
	if st := state(theirMachine); st != ec2api.StateRunning {
		t.Errorf("another stack's machine is %s, want running", st)
	}
	if _, ok := f.fake.RunnerByName(job.RunnerName("linux", idle)); ok {
		t.Error("idle runner of a finished job still registered")
	}
	if st := state(idleMachine); st != ec2api.StateShuttingDown && st != ec2api.StateTerminated {
		t.Errorf("machine of the deleted runner is %s, want terminated", st)
	}
	if st := state(busyMachine); st != ec2api.StateRunning {
		t.Errorf("machine of the busy runner is %s, want running", st)
	}
	for name, want := range map[string]bool{idleParam: false, busyParam: true, goneParam: false} {
		if got := exists(name); got != want {
			t.Errorf("parameter %s exists: %t, want %t", name, got, want)
		}
	}
}
