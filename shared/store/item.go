package store

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// recordItem is the DynamoDB shape of a job record (DESIGN.md, data model).
// Attributes whose value is a default are not written: attempt 0 is
// absent, and updated_at and due_at equal to created_at (a record never
// updated or re-queued since its creation: its first message is sent at
// creation) are absent and read back as created_at. Every update sets the
// ones it changes explicitly, so only CreateJob's put relies on this; it
// keeps the webhook's put small (the emulator's time per put grows with
// the number of attributes, DynamoDB's with the bytes).
type recordItem struct {
	PK               string           `dynamodbav:"pk"`
	State            string           `dynamodbav:"state"`
	Version          int64            `dynamodbav:"version"`
	Attempt          int              `dynamodbav:"attempt,omitempty"`
	FirstFailureAt   int64            `dynamodbav:"first_failure_at,omitempty"`
	DueAt            int64            `dynamodbav:"due_at,omitempty"`
	LeaseOwner       string           `dynamodbav:"lease_owner,omitempty"`
	LeaseExpiresAt   int64            `dynamodbav:"lease_expires_at,omitempty"`
	LastErrorClass   string           `dynamodbav:"last_error_class,omitempty"`
	LastError        string           `dynamodbav:"last_error,omitempty"`
	Repo             string           `dynamodbav:"repo,omitempty"`
	InstallationID   int64            `dynamodbav:"installation_id,omitempty"`
	Labels           []string         `dynamodbav:"labels,omitempty"`
	Pool             string           `dynamodbav:"pool,omitempty"`
	Public           bool             `dynamodbav:"public,omitempty"`
	UserOwned        bool             `dynamodbav:"user_owned,omitempty"`
	RunnerName       string           `dynamodbav:"runner_name,omitempty"`
	Scope            string           `dynamodbav:"runner_scope,omitempty"`
	TriedRunner      string           `dynamodbav:"tried_runner,omitempty"`
	TriedScope       string           `dynamodbav:"tried_scope,omitempty"`
	RunID            int64            `dynamodbav:"run_id,omitempty"`
	CreatedAt        int64            `dynamodbav:"created_at,omitempty"`
	UpdatedAt        int64            `dynamodbav:"updated_at,omitempty"`
	ExpiresAt        int64            `dynamodbav:"expires_at,omitempty"`
	SweepShard       string           `dynamodbav:"sweep_shard,omitempty"`
	SweepAt          int64            `dynamodbav:"sweep_at,omitempty"`
	Replacements     int              `dynamodbav:"replacements,omitempty"`
	ReplacementsBase int              `dynamodbav:"replacements_base,omitempty"`
	LivenessChecks   int              `dynamodbav:"liveness_checks,omitempty"`
	Waits            int              `dynamodbav:"waits,omitempty"`
	History          []transitionItem `dynamodbav:"history,omitempty"`
}

func marshal(r job.Record) (map[string]types.AttributeValue, error) {
	it := recordItem{
		PK: job.Key(r.JobID), State: string(r.State), Version: r.Version, Attempt: r.Attempt,
		FirstFailureAt: r.FirstFailureAt, DueAt: r.DueAt, LeaseOwner: r.LeaseOwner,
		LeaseExpiresAt: r.LeaseExpiresAt, LastErrorClass: r.LastErrorClass, LastError: r.LastError,
		Repo: r.Repo, InstallationID: r.InstallationID, Labels: r.Labels, Pool: r.Pool, Public: r.Public, UserOwned: r.UserOwned,
		RunnerName: r.RunnerName, Scope: r.Scope, TriedRunner: r.TriedRunner, TriedScope: r.TriedScope, RunID: r.RunID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ExpiresAt: r.ExpiresAt, SweepShard: r.SweepShard, SweepAt: r.SweepAt,
		Replacements: r.Replacements, ReplacementsBase: r.ReplacementsBase, LivenessChecks: r.LivenessChecks, Waits: r.Waits,
		History: historyItems(r.History),
	}
	if it.UpdatedAt == it.CreatedAt {
		it.UpdatedAt = 0 // omitted: read back as created_at
	}
	if it.DueAt == it.CreatedAt {
		it.DueAt = 0 // omitted: read back as created_at
	}
	m, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode job %d: %w", r.JobID, err)
	}
	return m, nil
}

func unmarshal(m map[string]types.AttributeValue) (job.Record, error) {
	var it recordItem
	if err := attributevalue.UnmarshalMap(m, &it); err != nil {
		return job.Record{}, fmt.Errorf("decode job record: %w", err)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(it.PK, "job#"), 10, 64)
	if err != nil || !strings.HasPrefix(it.PK, "job#") {
		return job.Record{}, fmt.Errorf("decode job record: bad pk %q", it.PK)
	}
	if it.UpdatedAt == 0 {
		it.UpdatedAt = it.CreatedAt // never updated since its creation
	}
	if it.DueAt == 0 {
		it.DueAt = it.CreatedAt // never re-queued since its creation
	}
	return job.Record{
		JobID: id, State: job.State(it.State), Version: it.Version, Attempt: it.Attempt,
		FirstFailureAt: it.FirstFailureAt, DueAt: it.DueAt, LeaseOwner: it.LeaseOwner,
		LeaseExpiresAt: it.LeaseExpiresAt, LastErrorClass: it.LastErrorClass, LastError: it.LastError,
		Repo: it.Repo, InstallationID: it.InstallationID, Labels: it.Labels, Pool: it.Pool, Public: it.Public, UserOwned: it.UserOwned,
		RunnerName: it.RunnerName, Scope: it.Scope, TriedRunner: it.TriedRunner, TriedScope: it.TriedScope, RunID: it.RunID, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		ExpiresAt: it.ExpiresAt, SweepShard: it.SweepShard, SweepAt: it.SweepAt,
		Replacements: it.Replacements, ReplacementsBase: it.ReplacementsBase, LivenessChecks: it.LivenessChecks, Waits: it.Waits,
		History: historyOf(it.History),
	}, nil
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(pk)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func num(av types.AttributeValue) (int64, bool) {
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseInt(v.Value, 10, 64)
	return x, err == nil
}
