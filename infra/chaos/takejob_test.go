package chaos

import (
	"context"
	"fmt"
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

// TestTakeJobNeedsAMachine: in the Finished script GitHub hands the job to
// our runner only when a machine holding that registration's config was
// provisioned; a runner comes online on a machine, never by itself. The
// sequence it guards: attempt 1 registers the runner and its provisioning
// fails without effect; GitHub starts the job (the script); attempt 2,
// landing before the in_progress delivery, finds the runner by its 409. Had
// the script put our machineless runner to work, attempt 2 would reuse a
// busy runner and the job would end claimed with one runner and no machine:
// a loss that only the simulation made. When the provisioning did take
// effect (the claimer saw a timeout), the runner does take the job and is
// reused.
func TestTakeJobNeedsAMachine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		pool     string
		fault    Kind // of attempt 1's provisioning
		wantOurs bool
	}{
		{name: "ec2 provisioning failed", pool: PoolEC2, fault: Server},
		{name: "dispatch provisioning failed", pool: PoolDispatch, fault: Server},
		{name: "ec2 provisioned, timeout seen", pool: PoolEC2, fault: AfterEffect, wantOurs: true},
		{name: "dispatch provisioned, timeout seen", pool: PoolDispatch, fault: AfterEffect, wantOurs: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t)
			ctx := context.Background()
			j := testJob(7_100_000_000 + int64(i))
			if tc.pool == PoolEC2 {
				j.Labels = []string{"self-hosted", "linux"}
			}
			p := &plan{Job: j, Pool: tc.pool, Script: Finished}
			r.plans = []*plan{p}
			if !r.deliver(ctx, Delivery{GUID: fmt.Sprintf("q-%d", j.ID), Event: "workflow_job", Body: Payload(j, "queued", "")}) {
				t.Fatal("queued delivery refused")
			}

			// Attempt 1: the runner is registered, the provisioner fails.
			r.inj = NewInjector(random.New(1), 0, map[Kind]int{tc.fault: 1})
			r.inj.SetRate(TargetProvision, 1)
			first, err := r.newClaimer(0)
			if err != nil {
				t.Fatal(err)
			}
			r.claimOne(t, first)
			if rec := r.get(t, j.ID); rec.State != job.Queued || rec.Attempt != 1 {
				t.Fatalf("after attempt 1: got %s attempt %d, want queued attempt 1", rec.State, rec.Attempt)
			}

			// GitHub starts the job.
			ours := job.RunnerName(tc.pool, j.ID)
			if got := r.takeJob(p, "hosted-7"); (got == ours) != tc.wantOurs {
				t.Errorf("job taken by %s, want ours: %v", got, tc.wantOurs)
			}

			// Attempt 2 lands before the in_progress delivery.
			r.inj.SetRate(TargetProvision, 0)
			second, err := r.newClaimer(1)
			if err != nil {
				t.Fatal(err)
			}
			r.claimOne(t, second)
			rep, err := r.account(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Claimed != 1 || rep.Lost != 0 || rep.DuplicateRunners != 0 || rep.DuplicateInstances != 0 {
				t.Errorf("got %s %v, want the job claimed with one runner and one machine", rep.Line(), rep.LostJobs)
			}
		})
	}
}
