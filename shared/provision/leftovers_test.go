package provision

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
)

// TestLiveMachinesLeaveEndedOnesOut (EC2 on moto): EC2 lists a terminated
// instance, tags and all, for about an hour. The janitor's listing asks
// for pending and running ones only: counted live, an ended machine would
// spend a confirmation call of the machine phase's reserve and a clean-up
// every pass for that hour, and keep the parameters it named.
func TestLiveMachinesLeaveEndedOnesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupAWS(t)
	ids := map[int64]string{}
	for _, job := range []int64{5401, 5402} {
		id, err := provisiontest.RunInstance(ctx, f.ec2, "ami-03cf127a", "t3.micro", []ec2api.Tag{
			{Key: TagJobID, Value: fmt.Sprint(job)}, {Key: TagRunnerName, Value: fmt.Sprintf("linux-%d", job)}, {Key: TagPool, Value: "linux"},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[job] = id
	}
	if _, err := f.ec2.TerminateInstances(ctx, &ec2api.TerminateInstancesInput{InstanceIDs: []string{ids[5402]}}); err != nil {
		t.Fatal(err)
	}
	if st, err := provisiontest.State(ctx, f.ec2, ids[5402]); err != nil || st == "" {
		t.Fatalf("setup: the terminated instance is not listed by EC2 (state %q, %v): nothing to leave out", st, err)
	}
	ms, err := Leftovers{Instances: f.ec2}.LiveMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, m := range ms {
		if _, ok := ids[m.JobID]; ok {
			got[m.JobID] = m.ID
		}
	}
	if len(got) != 1 || got[5401] != ids[5401] {
		t.Errorf("live machines of the test's jobs %v, want only job 5401's %s (job 5402's %s is terminated)", got, ids[5401], ids[5402])
	}
}

// TestConfigsFollowEveryPage (SSM on moto): DescribeParameters answers at
// most 50 a page, and a page may hold fewer with a NextToken. The listing
// follows the token: a parameter past the first page is listed too, or a
// leftover there would never be deleted, and Parameter Store's standard
// tier holds 10,000 parameters an account and Region.
func TestConfigsFollowEveryPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Its own emulator: the listing reads every runner parameter of the account.
	f := setupAWSOn(t, emulator.OwnForTest(t))
	const n = configsPage + 5
	f.putConfigs(t, "pages", n)
	c := &describeCounter{Catalog: f.ssm}
	cs, err := Leftovers{Parameters: c}.Configs(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Parameters) != n || c.describes < 2 {
		t.Errorf("got %d parameters in %d DescribeParameters calls, want %d in 2 or more", len(cs.Parameters), c.describes, n)
	}
}
