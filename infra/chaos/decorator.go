package chaos

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/store"
)

// DynamoDB injects faults and kill points into a store.DynamoDB.
type DynamoDB struct {
	// Caller names the function making the calls, for the figures.
	Caller string
	Next   store.DynamoDB
	In     *Injector
}

var _ store.DynamoDB = (*DynamoDB)(nil)

// GetItem is dynamodb.Client.GetItem with faults.
func (d *DynamoDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return do(ctx, d.In, TargetDynamoDB, d.Caller, "GetItem", func(ctx context.Context) (*dynamodb.GetItemOutput, error) {
		return d.Next.GetItem(ctx, in, opt...)
	})
}

// PutItem is dynamodb.Client.PutItem with faults.
func (d *DynamoDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return do(ctx, d.In, TargetDynamoDB, d.Caller, "PutItem", func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return d.Next.PutItem(ctx, in, opt...)
	})
}

// UpdateItem is dynamodb.Client.UpdateItem with faults.
func (d *DynamoDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return do(ctx, d.In, TargetDynamoDB, d.Caller, "UpdateItem", func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return d.Next.UpdateItem(ctx, in, opt...)
	})
}

// Query is dynamodb.Client.Query with faults.
func (d *DynamoDB) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return do(ctx, d.In, TargetDynamoDB, d.Caller, "Query", func(ctx context.Context) (*dynamodb.QueryOutput, error) {
		return d.Next.Query(ctx, in, opt...)
	})
}

// BatchGetItem is dynamodb.Client.BatchGetItem with faults.
func (d *DynamoDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return do(ctx, d.In, TargetDynamoDB, d.Caller, "BatchGetItem", func(ctx context.Context) (*dynamodb.BatchGetItemOutput, error) {
		return d.Next.BatchGetItem(ctx, in, opt...)
	})
}

// SQS injects faults and kill points into a queue.SQS.
type SQS struct {
	// Caller names the function making the calls, for the figures.
	Caller string
	Next   queue.SQS
	In     *Injector
}

var _ queue.SQS = (*SQS)(nil)

// SendMessage is sqs.Client.SendMessage with faults.
func (s *SQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return do(ctx, s.In, TargetSQS, s.Caller, "SendMessage", func(ctx context.Context) (*sqs.SendMessageOutput, error) {
		return s.Next.SendMessage(ctx, in, opt...)
	})
}

// SendMessageBatch is sqs.Client.SendMessageBatch with faults: the whole
// call fails or is killed, as a lost connection would, or SQS answers 200
// and refuses some entries (RefuseEntries), which are never sent.
func (s *SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return do(ctx, s.In, TargetSQS, s.Caller, "SendMessageBatch", func(ctx context.Context) (*sqs.SendMessageBatchOutput, error) {
		var refused []int
		if s.In != nil {
			refused = s.In.RefuseEntries(TargetSQS, len(in.Entries))
		}
		if len(refused) == 0 {
			return s.Next.SendMessageBatch(ctx, in, opt...)
		}
		var failed []sqstypes.BatchResultErrorEntry
		sent := *in
		sent.Entries = nil
		for i, e := range in.Entries {
			if slices.Contains(refused, i) {
				failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"),
					Message: aws.String("We encountered an internal error. Please try again."), SenderFault: false})
				continue
			}
			sent.Entries = append(sent.Entries, e)
		}
		out := &sqs.SendMessageBatchOutput{}
		if len(sent.Entries) > 0 {
			o, err := s.Next.SendMessageBatch(ctx, &sent, opt...)
			if err != nil {
				return nil, err
			}
			out = o
		}
		out.Failed = append(out.Failed, failed...)
		return out, nil
	})
}

// DeleteMessage is sqs.Client.DeleteMessage with faults.
func (s *SQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return do(ctx, s.In, TargetSQS, s.Caller, "DeleteMessage", func(ctx context.Context) (*sqs.DeleteMessageOutput, error) {
		return s.Next.DeleteMessage(ctx, in, opt...)
	})
}

// ChangeMessageVisibility is sqs.Client.ChangeMessageVisibility with faults.
func (s *SQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return do(ctx, s.In, TargetSQS, s.Caller, "ChangeMessageVisibility", func(ctx context.Context) (*sqs.ChangeMessageVisibilityOutput, error) {
		return s.Next.ChangeMessageVisibility(ctx, in, opt...)
	})
}

// Provisioner injects faults and kill points into the claimer's
// provisioner port. Errors are wrapped as the adapters wrap EC2's.
type Provisioner struct {
	// Caller names the function making the calls, for the figures.
	Caller string
	Next   claim.Provisioner
	In     *Injector
	// Provisioned, when set, is told of every Provision the adapter carried
	// out (it returned no error), also when the caller then sees an
	// after-effect fault or is killed: from then on a machine holds req's
	// JIT config, on the machine res names.
	Provisioned func(provision.Request, provision.Result)
}

var (
	_ claim.Provisioner   = (*Provisioner)(nil)
	_ janitor.Provisioner = (*Provisioner)(nil)
)

// Provision is provision.Provisioner.Provision with faults.
func (p *Provisioner) Provision(ctx context.Context, req provision.Request) (provision.Result, error) {
	return do(ctx, p.In, TargetProvision, p.Caller, "RunInstances", func(ctx context.Context) (provision.Result, error) {
		res, err := p.Next.Provision(ctx, req)
		if err == nil && p.Provisioned != nil {
			p.Provisioned(req, res)
		}
		return res, err
	})
}

// Cleanup is provision.Provisioner.Cleanup with faults.
func (p *Provisioner) Cleanup(ctx context.Context, req provision.Request) error {
	_, err := do(ctx, p.In, TargetProvision, p.Caller, "DeleteParameter", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.Next.Cleanup(ctx, req)
	})
	return err
}

// Running is claim.Provisioner.Running (EC2's DescribeInstances) with faults.
func (p *Provisioner) Running(ctx context.Context, req provision.Request) (string, error) {
	return do(ctx, p.In, TargetProvision, p.Caller, "DescribeInstances", func(ctx context.Context) (string, error) {
		return p.Next.Running(ctx, req)
	})
}

// Leftovers injects faults into the janitor's inventory of machines and
// JIT configs (EC2 and SSM). Errors are wrapped as the adapters wrap AWS's.
type Leftovers struct {
	// Caller names the function making the calls, for the figures.
	Caller string
	Next   janitor.Leftovers
	In     *Injector
}

var _ janitor.Leftovers = (*Leftovers)(nil)

// LiveMachines is provision.Leftovers.LiveMachines (DescribeInstances) with faults.
func (l *Leftovers) LiveMachines(ctx context.Context) ([]pool.Machine, error) {
	return do(ctx, l.In, TargetProvision, l.Caller, "DescribeInstances", l.Next.LiveMachines)
}

// Configs is provision.Leftovers.Configs (DescribeParameters) with faults.
func (l *Leftovers) Configs(ctx context.Context, before time.Time) (pool.ConfigList, error) {
	return do(ctx, l.In, TargetProvision, l.Caller, "DescribeParameters", func(ctx context.Context) (pool.ConfigList, error) {
		return l.Next.Configs(ctx, before)
	})
}

// DeleteConfig is provision.Leftovers.DeleteConfig (DeleteParameter) with faults.
func (l *Leftovers) DeleteConfig(ctx context.Context, name string) error {
	_, err := do(ctx, l.In, TargetProvision, l.Caller, "DeleteParameter", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, l.Next.DeleteConfig(ctx, name)
	})
	return err
}

// GitHub adds kill points to the claimer's GitHub port. Faults of GitHub
// itself are injected on the wire (Middleware), where the real client turns
// them into its own typed errors.
type GitHub struct {
	Next claim.GitHub
}

var _ claim.GitHub = (*GitHub)(nil)

// GenerateJIT is claim.GitHub.GenerateJIT with a kill point.
func (g *GitHub) GenerateJIT(ctx context.Context, installationID int64, req ghapp.JITRequest) (ghapp.JIT, error) {
	return do(ctx, nil, TargetGitHub, "claimer", "GenerateJIT", func(ctx context.Context) (ghapp.JIT, error) {
		return g.Next.GenerateJIT(ctx, installationID, req)
	})
}

// FindRunner is claim.GitHub.FindRunner with a kill point.
func (g *GitHub) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	return do(ctx, nil, TargetGitHub, "claimer", "FindRunner", func(ctx context.Context) (ghapp.Runner, error) {
		return g.Next.FindRunner(ctx, installationID, scope, owner, repo, name)
	})
}

// DeleteRunner is claim.GitHub.DeleteRunner with a kill point.
func (g *GitHub) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error {
	_, err := do(ctx, nil, TargetGitHub, "claimer", "DeleteRunner", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.Next.DeleteRunner(ctx, installationID, scope, owner, repo, runnerID)
	})
	return err
}

// JobStatus is claim.GitHub.JobStatus with a kill point.
func (g *GitHub) JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error) {
	return do(ctx, nil, TargetGitHub, "claimer", "JobStatus", func(ctx context.Context) (string, error) {
		return g.Next.JobStatus(ctx, installationID, owner, repo, jobID)
	})
}

// Repository is claim.GitHub.Repository with a kill point.
func (g *GitHub) Repository(ctx context.Context, installationID int64, owner, repo string) (ghapp.Repository, error) {
	return do(ctx, nil, TargetGitHub, "claimer", "Repository", func(ctx context.Context) (ghapp.Repository, error) {
		return g.Next.Repository(ctx, installationID, owner, repo)
	})
}

// Compress scales the delays of claim messages by Scale (0 < Scale ≤ 1),
// rounding up to whole seconds: the run's time compression for waits the
// configuration cannot shorten (the rate-limit floor and snap jitter of
// shared/backoff, the reclaimer's spread window). Records keep their
// uncompressed due_at, so a message only ever arrives earlier than its
// record says, never later: the reclaimer sees no more stale records than
// it would without compression.
type Compress struct {
	Next  queue.SQS
	Scale float64
}

var _ queue.SQS = (*Compress)(nil)

// SendMessage sends with DelaySeconds scaled.
func (c *Compress) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if c.Scale > 0 && c.Scale < 1 && in.DelaySeconds > 0 {
		cp := *in
		cp.DelaySeconds = int32(math.Ceil(float64(in.DelaySeconds) * c.Scale))
		in = &cp
	}
	return c.Next.SendMessage(ctx, in, opt...)
}

// SendMessageBatch sends with every entry's DelaySeconds scaled.
func (c *Compress) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if c.Scale > 0 && c.Scale < 1 {
		cp := *in
		cp.Entries = slices.Clone(in.Entries)
		for i, e := range cp.Entries {
			if e.DelaySeconds > 0 {
				cp.Entries[i].DelaySeconds = int32(math.Ceil(float64(e.DelaySeconds) * c.Scale))
			}
		}
		in = &cp
	}
	return c.Next.SendMessageBatch(ctx, in, opt...)
}

// DeleteMessage passes through.
func (c *Compress) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return c.Next.DeleteMessage(ctx, in, opt...)
}

// ChangeMessageVisibility passes through: the claimer's visibility changes
// are already seconds.
func (c *Compress) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return c.Next.ChangeMessageVisibility(ctx, in, opt...)
}
