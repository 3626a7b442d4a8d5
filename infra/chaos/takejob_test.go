package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
)

// claimOne waits for the next claim message (its delay included) and runs
// it through c, deleting it unless it is a batch item failure, as poll does.
func (r *run) claimOne(t *testing.T, c *claim.Claimer) {
	t.Helper()
	for range 6 {
		res, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(r.world.QueueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 5, VisibilityTimeout: 30,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			continue
		}
		m := res.Messages[0]
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body)}}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.Handle(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "r-" + aws.ToString(m.MessageId)}), ev)
		if err != nil {
			t.Fatalf("claimer: %v", err)
		}
		r.deleteHandled(ev, resp)
		return
	}
	t.Fatal("no claim message within 30 s")
}

// TestMachineRunsTheJob: a runner comes online only on a machine that
// holds its registration's config, and GitHub then gives it the job. Attempt
// 1 registers the runner and its provisioning fails, without effect or with
// it (the claimer saw a timeout, the machine is up); attempt 2 claims. In
// every case exactly one runner comes online, takes the job, GitHub
// sends in_progress and completed, the record ends done, and neither the
// runner nor the machine outlives the job.
func TestMachineRunsTheJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		pool  string
		fault Kind // of attempt 1's provisioning
	}{
		{name: "ec2 provisioning failed", pool: PoolEC2, fault: Server},
		{name: "dispatch provisioning failed", pool: PoolDispatch, fault: Server},
		{name: "ec2 provisioned, timeout seen", pool: PoolEC2, fault: AfterEffect},
		{name: "dispatch provisioned, timeout seen", pool: PoolDispatch, fault: AfterEffect},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t)
			r.cfg.NeverBootRate, r.cfg.DieRate, r.cfg.BootDelay, r.cfg.RunTime = -1, -1, 2*time.Second, 100*time.Millisecond
			ctx := context.Background()
			j := testJob(7_100_000_000 + int64(i))
			if tc.pool == PoolEC2 {
				j.Labels = []string{"self-hosted", "linux"}
			}
			p := &plan{Job: j, Pool: tc.pool, Script: Plain, status: "queued", rnd: rand.New(rand.NewPCG(1, 2))}
			r.plans, r.byJob, r.fleet, r.simCtx = []*plan{p}, map[int64]*plan{j.ID: p}, newFleet(1), ctx
			r.setGitHubJob(p, "queued", "", "", 0)
			if !r.deliver(ctx, Delivery{GUID: fmt.Sprintf("q-%d", j.ID), Event: "workflow_job", Body: Payload(j, "queued", "")}) {
				t.Fatal("queued delivery refused")
			}

			// Attempt 1: the runner is registered, the provisioner fails.
			r.inj = NewInjector(random.New(1), 0, map[Kind]int{tc.fault: 1})
			r.inj.SetRate(TargetProvision, 1)
			first, _, err := r.newClaimer(0)
			if err != nil {
				t.Fatal(err)
			}
			r.claimOne(t, first)
			if rec := r.get(t, j.ID); rec.State != job.Queued || rec.Attempt != 1 {
				t.Fatalf("after attempt 1: got %s attempt %d, want queued attempt 1", rec.State, rec.Attempt)
			}

			// Attempt 2 claims; the machine boots and runs the job.
			r.inj.SetRate(TargetProvision, 0)
			second, _, err := r.newClaimer(1)
			if err != nil {
				t.Fatal(err)
			}
			r.claimOne(t, second)
			r.fleet.wg.Wait()
			// A dispatch has no idempotency key: attempt 2 may hand out a
			// second config, but only after deleting attempt 1's
			// registration, so at most one runner ever comes online.
			if online, ran := r.fleet.online.Load(), r.fleet.ran.Load(); online != 1 || ran != 1 {
				t.Errorf("machines whose runner came online: %d, that ran the job: %d; want 1 and 1 (%d drew boots)",
					online, ran, r.fleet.count(fateBoots))
			}
			if !p.ours || p.status != "completed" {
				t.Errorf("GitHub: job %s, ours %v; want completed by our runner", p.status, p.ours)
			}
			if rec := r.get(t, j.ID); rec.State != job.Done {
				t.Errorf("record: got %s, want done", rec.State)
			}
			rep, err := r.account(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Ran != 1 || rep.Lost != 0 || rep.OrphanRunners != 0 || rep.OrphanMachines != 0 {
				t.Errorf("got %s %v, want the job run by our runner, nothing left behind", rep.Line(), rep.LostJobs)
			}
		})
	}
}
