package reclaim_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// registryCleanup is the reclaimer's Provisioner over the real
// provisioners, as functions/reclaimer wires it.
func registryCleanup(reg provision.Registry) reclaim.Provisioner {
	return reclaim.ProvisionerFunc(func(ctx context.Context, l reclaim.Leftover) error {
		return reg.Cleanup(ctx, provision.Request{JobID: l.JobID, RunID: l.RunID, Repo: l.Repo, Pool: l.Pool, RunnerName: l.RunnerName, KeepMachines: l.KeepMachines})
	})
}

const appID = int64(99)

var appKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

// runnerRoutes are the GitHub routes a runner cleanup calls.
var runnerRoutes = []string{ghfake.RouteRepoRunners, ghfake.RouteRepoRunner, ghfake.RouteRepoDeleteRunner}

// TestAbandonRemovesLeftovers (end to end: the EC2 provisioner on moto's
// SSM and EC2; the job store in memory): a claimer died holding the lease of a job
// past max age, after registering the job's runner, writing its JIT config
// to SSM and launching its machine. The reclaimer abandons the job and
// removes all three (the machine terminated), except a busy runner (at
// work: GitHub refuses to delete it, and its machine must run on), and it
// leaves GitHub, and so the machine, alone while the installation's shared
// rate reading says exhausted.
func TestAbandonRemovesLeftovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		busy          bool
		exhausted     bool
		wantRunner    bool // the runner is still registered
		wantParameter bool // the SSM parameter is still there (and the machine runs)
		wantGitHub    bool // runner routes were called
		wantReport    reclaim.Report
	}{
		{name: "idle runner and parameter removed", wantGitHub: true, wantReport: reclaim.Report{CleanedUp: 1}},
		{name: "busy runner left with its machine", busy: true, wantRunner: true, wantParameter: true, wantGitHub: true, wantReport: reclaim.Report{}},
		// The runner may be busy: its machine is not ended blind.
		{name: "rate exhausted: GitHub not called, the machine left", exhausted: true, wantRunner: true, wantParameter: true, wantReport: reclaim.Report{CleanupRateLimited: 1}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			ctx := context.Background()
			id := int64(300 + i) // SSM parameters are global to the emulator
			name := job.RunnerName("linux", id)

			fake, gh, rates, url := f.github(t)
			// What the dead attempt left: a registered runner, its JIT config in SSM.
			dead, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: url, Now: f.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dead.GenerateJIT(ctx, 42, ghapp.JITRequest{Scope: pool.ScopeRepo, Owner: "octo", Repo: "app", Name: name, Labels: []string{"self-hosted", "linux"}}); err != nil {
				t.Fatalf("register the dead attempt's runner: %v", err)
			}
			if tt.busy {
				if err := fake.SetRunner(name, "online", true); err != nil {
					t.Fatal(err)
				}
			}
			awsCfg := emulator.ForTest(t).ConfigForTest(t)
			params := ssmapi.New(awsCfg)
			param := provision.ParameterName(name)
			if err := provisiontest.PutParameter(ctx, params, &ssmapi.PutParameterInput{Name: param, Value: "jit-config", Type: ssmapi.TypeSecureString}); err != nil {
				t.Fatalf("put parameter: %v", err)
			}
			// And its machine, tagged with the job and the attempt's runner as the EC2 provisioner tags it.
			machines := ec2api.New(awsCfg)
			machine, err := provisiontest.RunInstance(ctx, machines, "ami-03cf127a", "t3.micro", []ec2api.Tag{
				{Key: provision.TagJobID, Value: strconv.FormatInt(id, 10)},
				{Key: provision.TagRunnerName, Value: name}})
			if err != nil {
				t.Fatalf("launch the dead attempt's machine: %v", err)
			}

			// The job: failing since long before max age, its last claimer dead.
			old := t0.Add(-2 * time.Hour)
			l := f.claiming(t, id, old, old.Add(lease))
			if err := f.store.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: 4, FirstFailureAt: old, Due: old.Add(time.Minute)}, old.Add(time.Second)); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if _, _, err := f.store.Acquire(ctx, id, l.Version+1, "claimer-dead", old.Add(2*time.Minute), old.Add(time.Minute)); err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			if tt.exhausted {
				rd := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(20 * time.Minute), ObservedAt: t0.Add(-time.Minute)}
				if err := f.store.SaveRate(ctx, 42, rd); err != nil {
					t.Fatal(err)
				}
			}
			before := fake.Stats()

			p := pool.Pool{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo,
				Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: "lt-runner"}}
			rep := f.run(t, f.reclaimer(t, 1, func(c *reclaim.Config) {
				c.GitHub, c.Rates, c.Pools = gh, rates, []pool.Pool{p}
				c.Provisioner = registryCleanup(provision.Registry{pool.ProvisionerEC2: provision.NewEC2(machines, params, slog.New(slog.DiscardHandler))})
			}))

			if rep.Abandoned != 1 || rep.CleanedUp != tt.wantReport.CleanedUp || rep.CleanupRateLimited != tt.wantReport.CleanupRateLimited || rep.CleanupFailed != 0 {
				t.Errorf("report %+v, want 1 abandoned, cleaned up %d, rate limited %d, no failure",
					rep, tt.wantReport.CleanedUp, tt.wantReport.CleanupRateLimited)
			}
			if r := f.get(t, id); r.State != job.Abandoned {
				t.Errorf("job %d: %s, want abandoned", id, r.State)
			}
			if _, ok := fake.RunnerByName(name); ok != tt.wantRunner {
				t.Errorf("runner %s registered: %t, want %t", name, ok, tt.wantRunner)
			}
			_, err = params.GetParameter(ctx, &ssmapi.GetParameterInput{Name: param})
			if gone := ssmapi.IsCode(err, ssmapi.CodeParameterNotFound); gone == tt.wantParameter {
				t.Errorf("parameter %s: %v; want it kept %t", param, err, tt.wantParameter)
			}
			st, err := provisiontest.State(ctx, machines, machine)
			if err != nil || st == "" {
				t.Fatalf("describe the machine %s: %v (state %q)", machine, err, st)
			}
			if ended := st == ec2api.StateShuttingDown || st == ec2api.StateTerminated; ended == tt.wantParameter {
				t.Errorf("machine %s is %s, want it running %t", machine, st, tt.wantParameter)
			}
			after := fake.Stats()
			calls := 0
			for _, route := range runnerRoutes {
				calls += after.Calls[route] - before.Calls[route]
			}
			if (calls > 0) != tt.wantGitHub {
				t.Errorf("%d runner calls to GitHub, want some: %t", calls, tt.wantGitHub)
			}
		})
	}
}
