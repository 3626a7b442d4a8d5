package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/pool"
)

// Sender is the part of the SQS API the Dispatch adapter uses.
type Sender interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// DispatchMessage is the JSON body a pull-based host receives. Its field
// names are the contract with those hosts. The host must treat JITConfig as a
// credential, and the queue should be encrypted (SSE-SQS or SSE-KMS).
type DispatchMessage struct {
	JobID      int64    `json:"job_id"`
	RunID      int64    `json:"run_id"`
	Repo       string   `json:"repo"`
	RunnerName string   `json:"runner_name"`
	Pool       string   `json:"pool"`
	Labels     []string `json:"labels"`
	JITConfig  string   `json:"jit_config"`
}

// LogValue redacts JITConfig when a host logs a received message.
func (m DispatchMessage) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("job_id", m.JobID), slog.String("repo", m.Repo),
		slog.String("runner_name", m.RunnerName), slog.String("pool", m.Pool),
		slog.String("jit_config", redactedOrEmpty(m.JITConfig)))
}

// String redacts JITConfig, so %v of a message is safe to log.
func (m DispatchMessage) String() string {
	return fmt.Sprintf("{JobID:%d RunID:%d Repo:%s RunnerName:%s Pool:%s Labels:%v JITConfig:%s}",
		m.JobID, m.RunID, m.Repo, m.RunnerName, m.Pool, m.Labels, redactedOrEmpty(m.JITConfig))
}

// Dispatch hands a job to a host that pulls work from the pool's SQS queue
// (pool.Provisioner.QueueURL). Labels in the message are the pool's labels,
// the ones the JIT runner registers with.
//
// Deduplication. On a FIFO queue (URL ending in ".fifo") the message gets
// MessageGroupId = runner name (one group per job, so a stuck job never
// blocks others) and MessageDeduplicationId = "<runner name>.<digest of the
// JIT config>": SQS drops a repeat of the same dispatch for five minutes. The
// digest is part of the id on purpose: a later attempt carries a freshly
// generated config (the claimer deleted the stale runner), and deduplicating
// that message away would leave the host with only the dead config and lose
// the job. On a standard queue SQS may deliver any message more than once and
// does not deduplicate; beyond the five minutes neither does FIFO. So the
// host must dedupe by runner_name itself: start at most one runner per
// runner_name at a time, prefer the newest message, and drop a message whose
// config GitHub refuses. GitHub is the last guard: a JIT config is single-use
// and registers exactly one runner named runner_name.
//
// Cleanup has nothing to take back: a sent message cannot be unsent, and
// once the claimer deletes the runner its config no longer registers.
type Dispatch struct {
	sender Sender
	log    *slog.Logger
}

var (
	_ Provisioner = (*Dispatch)(nil)
	_ Sender      = (*sqs.Client)(nil)
)

// NewDispatch returns the Dispatch adapter. log may be nil.
func NewDispatch(sender Sender, log *slog.Logger) *Dispatch {
	return &Dispatch{sender: sender, log: orDiscard(log)}
}

// Provision sends the job's dispatch message.
func (d *Dispatch) Provision(ctx context.Context, req Request) (Result, error) {
	if err := req.Validate(); err != nil {
		return Result{}, err
	}
	p := req.Pool.Provisioner
	if p.Type != pool.ProvisionerDispatch || p.QueueURL == "" {
		return Result{}, fmt.Errorf("%w: pool %q is not a dispatch pool with a queue url", ErrInvalidRequest, req.Pool.Name)
	}
	body, err := json.Marshal(DispatchMessage{
		JobID: req.JobID, RunID: req.RunID, Repo: req.Repo, RunnerName: req.RunnerName,
		Pool: req.Pool.Name, Labels: req.Pool.Labels, JITConfig: req.JITConfig,
	})
	if err != nil {
		return Result{}, fmt.Errorf("provision job %d: encode dispatch message: %w", req.JobID, err)
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(p.QueueURL), MessageBody: aws.String(string(body))}
	if strings.HasSuffix(p.QueueURL, ".fifo") {
		in.MessageGroupId = aws.String(req.RunnerName)
		in.MessageDeduplicationId = aws.String(DeduplicationID(req.RunnerName, req.JITConfig))
	}
	out, err := d.sender.SendMessage(ctx, in)
	if err != nil {
		return Result{}, fmt.Errorf("provision job %d: send dispatch message to %s: %w", req.JobID, p.QueueURL, err)
	}
	id := aws.ToString(out.MessageId)
	d.log.LogAttrs(ctx, slog.LevelInfo, "provisioned",
		slog.Int64("job_id", req.JobID), slog.Int64("run_id", req.RunID),
		slog.String("pool", req.Pool.Name), slog.String("provisioner", pool.ProvisionerDispatch),
		slog.String("runner_name", req.RunnerName), slog.String("message_id", id))
	return Result{MessageID: id}, nil
}

// Cleanup does nothing: see Dispatch.
func (d *Dispatch) Cleanup(context.Context, Request) error { return nil }

// DeduplicationID is the FIFO MessageDeduplicationId of a dispatch: the
// runner name and a short digest of the JIT config (never the config).
func DeduplicationID(runnerName, jitConfig string) string {
	return runnerName + "." + shortHash(jitConfig)
}
