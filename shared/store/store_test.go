package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/redeliver"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type fixture struct {
	s     *store.Store
	db    *dynamodb.Client
	table string
	run   int64               // which run of the test this is (see round)
	id    func(n int64) int64 // job id n of this run of the test (see ids)
}

// One emulator and one stack serve every test here: each test uses job ids
// of its own, so they run in parallel without sharing records.
var env struct {
	db    *dynamodb.Client
	table string
	cfg   aws.Config
}

func TestMain(m *testing.M) {
	os.Exit(func() int {
		ctx := context.Background()
		srv, err := emulator.Start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer srv.Close()
		cfg, err := srv.Config(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		path, err := emulator.TemplatePath()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		stack, err := emulator.Deploy(ctx, cfg, path, emulator.StackName("store"), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stack.Delete(ctx)
		env.db, env.table, env.cfg = dynamodb.NewFromConfig(cfg), stack.TableName, cfg
		return m.Run()
	}())
}

func setup(t *testing.T) fixture {
	t.Helper()
	r := emulator.Round(t)
	t.Parallel()
	return fixture{s: store.New(env.db, env.table, store.Options{}), db: env.db, table: env.table,
		run: r, id: func(n int64) int64 { return r*emulator.RoundIDs + n }}
}

// ids returns the id of this run of t's test function standing for n: n
// itself in the first run, n + emulator.RoundIDs in the second, and so on. Call it
// once per run, from the test function itself.
func ids(t *testing.T) func(n int64) int64 {
	t.Helper()
	base := emulator.Round(t) * emulator.RoundIDs
	return func(n int64) int64 { return base + n }
}

// deleted removes the records of jobs ids when t ends: for a test that
// reads a whole sweep shard, where an earlier run's records would be
// listed among its own.
func (f fixture) deleted(t *testing.T, ids ...int64) {
	t.Cleanup(func() {
		for _, id := range ids {
			if _, err := f.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{
				TableName: &f.table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: job.Key(id)}},
			}); err != nil {
				t.Errorf("delete job %d: %v", id, err)
			}
		}
	})
}

func rec(id int64) job.Record {
	return job.Record{JobID: id, Repo: "octo/app", InstallationID: 42, Labels: []string{"self-hosted", "linux"}, Pool: "linux", RunID: 9}
}

func (f fixture) raw(t *testing.T, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &f.table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem %s: %v", pk, err)
	}
	return out.Item
}

func (f fixture) get(t *testing.T, id int64) job.Record {
	t.Helper()
	r, err := f.s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get %d: %v", id, err)
	}
	return r
}

// The DynamoDB adapter implements the flows' ports in their own types.
var _ webhook.Store = (*store.Store)(nil)

// The reclaimer's port too.
var _ reclaim.Store = (*store.Store)(nil)

// The redeliverer's port too.
var _ redeliver.Store = (*store.Store)(nil)

// TestRedeliveryContract holds the redeliverer's items (mark, attempt
// counts) on DynamoDB to the contract infra/mem is held to.
func TestRedeliveryContract(t *testing.T) {
	t.Parallel()
	contract.TestRedeliveryStore(t, fmt.Sprint("store-", emulator.Round(t)), func(*testing.T) contract.RedeliveryStore {
		return store.New(env.db, env.table, store.Options{})
	})
}

// TestContract holds the DynamoDB adapter to the contract infra/mem is held
// to, the sweep's listing and its paging included, every part of it.
func TestContract(t *testing.T) {
	base := ids(t)(100_000)
	t.Parallel()
	open := func(*testing.T) contract.Store { return store.New(env.db, env.table, store.Options{}) }
	contract.TestStoreCore(t, base, func(t *testing.T) contract.Core { return open(t) })
	contract.TestStoreSweep(t, base, open)
}

// TestSweepIndexProjection: the table the template deploys projects keys
// only into the sweep index (store.SweepProjection): the index is written
// only when sweep_at itself is set, moved or removed, never by the lease.
func TestSweepIndexProjection(t *testing.T) {
	t.Parallel()
	out, err := env.db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &env.table})
	if err != nil {
		t.Fatal(err)
	}
	for _, gsi := range out.Table.GlobalSecondaryIndexes {
		if aws.ToString(gsi.IndexName) != store.SweepIndex {
			continue
		}
		if p := gsi.Projection; p == nil || p.ProjectionType != store.SweepProjection || len(p.NonKeyAttributes) != 0 {
			t.Fatalf("sweep projection %+v, want %s", p, store.SweepProjection)
		}
		return
	}
	t.Fatalf("table %s has no %s index", env.table, store.SweepIndex)
}

// queriedIndex remembers the index of the last Query.
type queriedIndex struct {
	store.DynamoDB
	index string
}

func (q *queriedIndex) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	q.index = aws.ToString(in.IndexName)
	return q.DynamoDB.Query(ctx, in, opt...)
}

// TestSweepFromTheLegacyIndex: while an upgrade keeps the release's index
// (LegacySweepIndex=keep: "sweep", projection ALL, beside sweep_keys), the
// reclaimer reads it, and finds what it finds in the new one; no other
// index name is taken.
func TestSweepFromTheLegacyIndex(t *testing.T) {
	id := ids(t)
	t.Parallel()
	ctx := context.Background()
	path, err := emulator.TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	stack, err := emulator.Deploy(ctx, env.cfg, path, emulator.StackName(t.Name()), map[string]string{"LegacySweepIndex": "keep"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Delete(context.Background()) })
	old := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	legacy := id(880_001)
	shard := job.Shard(legacy, store.DefaultShards)
	for _, index := range []string{store.LegacySweepIndex, store.SweepIndex} {
		db := &queriedIndex{DynamoDB: env.db}
		s := store.New(db, stack.TableName, store.Options{})
		if err := s.ReadSweepFrom(index); err != nil {
			t.Fatal(err)
		}
		if index == store.LegacySweepIndex {
			if _, err := s.CreateJob(ctx, rec(legacy), old); err != nil {
				t.Fatal(err)
			}
		}
		p, err := s.Stale(ctx, shard, time.Now(), 10, "")
		if err != nil || len(p.Records) != 1 || p.Records[0].JobID != legacy {
			t.Errorf("index %s: page %+v, %v; want job %d, stale since its pending grace", index, p, err, legacy)
		}
		if db.index != index {
			t.Errorf("read from %q, want %s", db.index, index)
		}
	}
	if err := store.New(env.db, stack.TableName, store.Options{}).ReadSweepFrom("sweep-v2"); err == nil || !strings.Contains(err.Error(), "sweep-v2") {
		t.Errorf("an unknown index: %v, want an error naming it", err)
	}

	// The drop deploy removes the old index before it updates the
	// function: a reclaimer still naming it reads the new one meanwhile.
	// (The shared stack has sweep_keys alone.)
	dropped := id(880_002)
	db := &queriedIndex{DynamoDB: env.db}
	s := store.New(db, env.table, store.Options{})
	if err := s.ReadSweepFrom(store.LegacySweepIndex); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateJob(ctx, rec(dropped), old); err != nil {
		t.Fatal(err)
	}
	p, err := s.Stale(ctx, job.Shard(dropped, store.DefaultShards), time.Now(), 100, "")
	found := false
	for _, r := range p.Records {
		found = found || r.JobID == dropped
	}
	if err != nil || !found || db.index != store.SweepIndex {
		t.Errorf("the old index gone: page of %d, %v, last read from %q; want job %d from %s", len(p.Records), err, db.index, dropped, store.SweepIndex)
	}
}

// TestStaleCursor: a page's cursor continues its own shard only; anything
// else fails with ErrBadCursor, naming the cursor.
func TestStaleCursor(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	// Shard 5: ids 205 and 213, stale a year before every other test's.
	old := t0.AddDate(-1, 0, 0)
	f.s.CreateJob(ctx, rec(f.id(205)), old)
	f.s.CreateJob(ctx, rec(f.id(213)), old)
	f.deleted(t, f.id(205), f.id(213))
	p, err := f.s.Stale(ctx, "5", old.Add(time.Hour), 1, "")
	if err != nil || p.Next == "" || len(p.Records) != 1 {
		t.Fatalf("first page %+v, %v; want one record and a cursor", p, err)
	}
	if _, err := f.s.Stale(ctx, "5", old.Add(time.Hour), 1, p.Next); err != nil {
		t.Fatalf("next page of the same shard: %v", err)
	}
	for _, bad := range []string{p.Next[:len(p.Next)-2], "!!", "e30"} {
		if _, err := f.s.Stale(ctx, "5", old.Add(time.Hour), 1, bad); !errors.Is(err, store.ErrBadCursor) || !strings.Contains(err.Error(), bad) {
			t.Errorf("cursor %q: got %v, want ErrBadCursor naming it", bad, err)
		}
	}
	if _, err := f.s.Stale(ctx, "4", old.Add(time.Hour), 1, p.Next); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("shard 5's cursor on shard 4: got %v, want ErrBadCursor", err)
	}
}

// TestRecordItemShape: what the contract cannot see, the item's DynamoDB
// types: labels a list (L), expires_at epoch seconds (N) as TTL requires,
// set at creation because the record is the dedup key; defaults are not
// written (the webhook's put is smaller) and read back as their values.
func TestRecordItemShape(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	if _, err := f.s.CreateJob(ctx, rec(f.id(101)), t0); err != nil {
		t.Fatal(err)
	}
	item := f.raw(t, job.Key(f.id(101)))
	if _, ok := item["labels"].(*types.AttributeValueMemberL); !ok {
		t.Error("labels must be stored as a list (L)")
	}
	exp, ok := item["expires_at"].(*types.AttributeValueMemberN)
	if want := fmt.Sprint(t0.Add(store.DefaultRecordTTL).Unix()); !ok || exp.Value != want {
		t.Errorf("expires_at = %v, want N %s (creation + record TTL, epoch seconds)", item["expires_at"], want)
	}
	// The webhook's put writes no default: attempt 0, updated_at and due_at
	// equal to created_at are absent, and readers get them back.
	for _, a := range []string{"attempt", "updated_at", "due_at"} {
		if v, ok := item[a]; ok {
			t.Errorf("created item has %s = %v, want it absent (a default)", a, v)
		}
	}
	if got := f.get(t, f.id(101)); got.Attempt != 0 || got.UpdatedAt != t0.UnixMilli() || got.CreatedAt != t0.UnixMilli() || got.DueAt != t0.UnixMilli() {
		t.Errorf("read back attempt %d, created %d, updated %d, due %d; want 0 and %d for the rest", got.Attempt, got.CreatedAt, got.UpdatedAt, got.DueAt, t0.UnixMilli())
	}
	_, err := f.s.CreateJob(ctx, rec(f.id(101)), t0.Add(time.Minute))
	var ce *job.ConflictError
	if !errors.As(err, &ce) || !ce.Found || ce.Current.UpdatedAt != t0.UnixMilli() || ce.Current.Attempt != 0 {
		t.Errorf("second create: %v, want a conflict carrying updated_at %d, attempt 0", err, t0.UnixMilli())
	}
	// Once written, they are read as written.
	l, _, err := f.s.Acquire(ctx, f.id(101), 1, "a", t0.Add(3*time.Minute), t0.Add(time.Minute))
	must(t, err)
	must(t, f.s.Extend(ctx, l, 2, "", t0.Add(2*time.Minute)))
	if got := f.get(t, f.id(101)); got.Attempt != 2 || got.UpdatedAt != t0.Add(2*time.Minute).UnixMilli() || got.CreatedAt != t0.UnixMilli() || got.DueAt != t0.UnixMilli() {
		t.Errorf("after an update: attempt %d, updated %d, created %d, due %d; want 2, %d, %d, %d", got.Attempt, got.UpdatedAt, got.CreatedAt, got.DueAt, t0.Add(2*time.Minute).UnixMilli(), t0.UnixMilli(), t0.UnixMilli())
	}
	due := t0.Add(10 * time.Minute)
	must(t, f.s.Release(ctx, l, store.Retry{Version: l.Version + 1, Attempt: 2, Due: due}, t0.Add(3*time.Minute)))
	if got := f.get(t, f.id(101)); got.DueAt != due.UnixMilli() {
		t.Errorf("after a release: due %d, want %d", got.DueAt, due.UnixMilli())
	}
}

func TestLeaseFencing(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	if _, err := f.s.CreateJob(ctx, rec(f.id(7)), t0); err != nil {
		t.Fatal(err)
	}

	lease, got, err := f.s.Acquire(ctx, f.id(7), 1, "a", t0.Add(3*time.Minute), t0)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if got.State != job.Claiming || got.Version != 2 || lease.Version != 2 || got.LeaseOwner != "a" {
		t.Fatalf("after Acquire: %+v lease %+v", got, lease)
	}
	if _, _, err := f.s.Acquire(ctx, f.id(7), 1, "b", t0.Add(3*time.Minute), t0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second Acquire of the same version: got %v, want ErrConflict", err)
	}

	thief := store.Lease{JobID: f.id(7), Owner: "b", Version: 2}
	if err := f.s.Release(ctx, thief, store.Retry{Version: 3, Due: t0}, t0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Release by another owner: got %v, want ErrLeaseLost", err)
	}

	ff := t0.Add(time.Second)
	retry := store.Retry{Version: 3, Attempt: 1, FirstFailureAt: ff, Due: t0.Add(30 * time.Second), ErrorClass: "server_side", Error: "502"}
	if err := f.s.Release(ctx, lease, retry, t0); err != nil {
		t.Fatalf("Release: %v", err)
	}
	got = f.get(t, f.id(7))
	if got.State != job.Queued || got.Version != 3 || got.Attempt != 1 || got.FirstFailureAt != ff.UnixMilli() || got.LeaseOwner != "" {
		t.Fatalf("after Release: %+v", got)
	}
	if got.SweepAt != t0.Add(30*time.Second+store.DefaultQueuedGrace).UnixMilli() {
		t.Errorf("sweep_at after Release: got %d", got.SweepAt)
	}

	// The ladder position survives a second lease and release.
	lease2, _, err := f.s.Acquire(ctx, f.id(7), 3, "c", t0.Add(4*time.Minute), t0)
	if err != nil {
		t.Fatalf("re-Acquire: %v", err)
	}
	if err := f.s.Release(ctx, lease, store.Retry{Version: 5, Due: t0}, t0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale lease after re-acquire: got %v, want ErrLeaseLost", err)
	}
	if err := f.s.Finish(ctx, lease2, store.Outcome{State: job.Claimed, Attempt: 2, RunnerName: "linux-7"}, t0); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	got = f.get(t, f.id(7))
	if got.State != job.Claimed || got.RunnerName != "linux-7" || got.FirstFailureAt != ff.UnixMilli() || got.Attempt != 2 {
		t.Fatalf("after Finish: %+v", got)
	}
	if got.SweepShard != job.Shard(f.id(7), store.DefaultShards) || got.SweepAt != t0.Add(job.DefaultRunnerStartGrace).UnixMilli() || got.ExpiresAt == 0 {
		t.Errorf("a claimed record stays in the sweep index until its runner-start grace and gets a TTL: %+v", got)
	}
}

// TestStaleSkipsUndecodableItems: an item in the sweep index that is no job
// record (written by hand, or by a newer version) is reported, not fatal:
// the records behind it in its shard must still reach the reclaimer.
func TestStaleSkipsUndecodableItems(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	// Shard 3 of 8: ids 11 and 19, and a bad item sorting before them.
	if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &f.table, Item: map[string]types.AttributeValue{
		"pk":          &types.AttributeValueMemberS{Value: "job#not-a-number"},
		"state":       &types.AttributeValueMemberS{Value: "queued"},
		"sweep_shard": &types.AttributeValueMemberS{Value: "3"},
		"sweep_at":    &types.AttributeValueMemberN{Value: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	f.s.CreateJob(ctx, rec(f.id(11)), t0)
	f.s.CreateJob(ctx, rec(f.id(19)), t0)
	p, err := f.s.Stale(ctx, "3", t0.Add(time.Hour), 0, "")
	if err != nil {
		t.Fatalf("Stale: %v", err)
	}
	// Other tests of this package share the table (and shard 3: job 523
	// of TestEveryConditionClauseHolds): only this test's jobs count.
	var ids []int64
	for _, r := range p.Records {
		if r.JobID == f.id(11) || r.JobID == f.id(19) {
			ids = append(ids, r.JobID)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("records %v of %+v, want jobs 11 and 19", ids, p.Records)
	}
	if len(p.Undecodable) != 1 || p.Undecodable[0] != "job#not-a-number" {
		t.Fatalf("undecodable %v, want [job#not-a-number]", p.Undecodable)
	}
}

// retriedUpdate plays the SDK's retry of a request whose first answer was
// lost: the first UpdateItem takes effect, the caller only sees the second.
type retriedUpdate struct{ *dynamodb.Client }

func (r retriedUpdate) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := r.Client.UpdateItem(ctx, in, opt...); err != nil {
		return nil, err
	}
	return r.Client.UpdateItem(ctx, in, opt...)
}

// TestTakeBackRetriedAfterItTookEffect: the reclaimer's take-back whose
// answer was lost and that the SDK retried is ours, returned as written,
// not a race (which would send no message and leave the job queued for
// QUEUED_GRACE); another pass's take-back of the same read is still a
// conflict. Jobs 74 and 82: shard 2, which no other test reads.
func TestTakeBackRetriedAfterItTookEffect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	s := store.New(retriedUpdate{env.db}, env.table, store.Options{})
	for _, id := range []int64{f.id(74), f.id(82)} {
		if _, err := f.s.CreateJob(ctx, rec(id), t0); err != nil {
			t.Fatal(err)
		}
	}
	read := f.get(t, f.id(74))
	due := t0.Add(time.Hour)
	got, err := s.TakeBack(ctx, read, job.Queued, due, "lost message", t0.Add(time.Hour))
	if err != nil {
		t.Fatalf("TakeBack retried after it took effect: %v, want the record as taken back", err)
	}
	if got.State != job.Queued || got.Version != read.Version+1 || got.DueAt != job.Millis(due) {
		t.Fatalf("got %+v, want queued at version %d due %v", got, read.Version+1, due)
	}
	// Another pass took job 82 back first (an earlier instant): a conflict.
	read = f.get(t, f.id(82))
	if _, err := f.s.TakeBack(ctx, read, job.Queued, due, "lost message", t0.Add(59*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeBack(ctx, read, job.Queued, due, "lost message", t0.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("another pass's take-back: got %v, want ErrConflict", err)
	}
}

// TestFencedChangesRetriedAfterTheyTookEffect: a Finish or Release whose
// answer was lost and that the SDK retried fails its fence against our own
// write; that is our change made, not a lost lease (which would skip the
// clean-up of a failed claim and log a lease lost). A change under someone
// else's lease is still ErrLeaseLost. Jobs 90, 98 and 106: shard 2, which
// no other test reads.
func TestFencedChangesRetriedAfterTheyTookEffect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	retried := store.New(retriedUpdate{env.db}, env.table, store.Options{})
	lease := func(id int64, owner string) store.Lease {
		t.Helper()
		if _, err := f.s.CreateJob(ctx, rec(id), t0); err != nil {
			t.Fatal(err)
		}
		l, _, err := f.s.Acquire(ctx, id, 1, owner, t0.Add(3*time.Minute), t0)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := lease(f.id(90), "me")
	if err := retried.Finish(ctx, l, store.Outcome{State: job.Failed, Attempt: 1, ErrorClass: "non_retryable", Error: "github 422"}, t0.Add(time.Second)); err != nil {
		t.Fatalf("Finish retried after it took effect: %v, want nil", err)
	}
	if got := f.get(t, f.id(90)); got.State != job.Failed {
		t.Fatalf("job 90: %s, want failed", got.State)
	}
	l = lease(f.id(98), "me")
	if err := retried.Release(ctx, l, store.Retry{Version: l.Version + 1, Attempt: 1, Due: t0.Add(time.Minute)}, t0.Add(time.Second)); err != nil {
		t.Fatalf("Release retried after it took effect: %v, want nil", err)
	}
	if got := f.get(t, f.id(98)); got.State != job.Queued || got.Version != l.Version+1 {
		t.Fatalf("job 98: %s v%d, want queued v%d", got.State, got.Version, l.Version+1)
	}
	// Another claimer's lease: still lost, whatever the record says.
	other := lease(f.id(106), "other")
	mine := store.Lease{JobID: f.id(106), Owner: "me", Version: other.Version}
	if err := retried.Finish(ctx, mine, store.Outcome{State: job.Claimed, Attempt: 1}, t0.Add(time.Second)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Finish under another's lease: %v, want ErrLeaseLost", err)
	}
}

// TestAcquireRetriedAfterItTookEffect: a lease write whose answer was lost
// and that the SDK retried fails its condition against our own write; that
// is our lease, not a conflict, or the job would sit out a whole lease.
// Jobs 50 and 58: shard 2, which no other test reads.
func TestAcquireRetriedAfterItTookEffect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.s.CreateJob(ctx, rec(f.id(50)), t0)
	s := store.New(retriedUpdate{env.db}, env.table, store.Options{})
	lease, got, err := s.Acquire(ctx, f.id(50), 1, "me", t0.Add(3*time.Minute), t0)
	if err != nil {
		t.Fatalf("Acquire retried after it took effect: %v, want our lease", err)
	}
	if lease.Version != 2 || lease.Owner != "me" || got.State != job.Claiming || got.Version != 2 {
		t.Fatalf("got lease %+v record %+v", lease, got)
	}
	// Somebody else's lease at that version is still a conflict.
	f.s.CreateJob(ctx, rec(f.id(58)), t0)
	if _, _, err := f.s.Acquire(ctx, f.id(58), 1, "other", t0.Add(time.Minute), t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Acquire(ctx, f.id(58), 1, "me", t0.Add(time.Minute), t0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("another owner's lease: got %v, want ErrConflict", err)
	}
}

// throttledBatchGet plays DynamoDB under read throttling: each BatchGetItem
// reads only its first key and hands the rest back as UnprocessedKeys.
type throttledBatchGet struct {
	*dynamodb.Client
	calls int
}

func (d *throttledBatchGet) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.calls++
	first := map[string]types.KeysAndAttributes{}
	rest := map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		first[table] = types.KeysAndAttributes{Keys: ka.Keys[:1], ConsistentRead: ka.ConsistentRead}
		if len(ka.Keys) > 1 {
			rest[table] = types.KeysAndAttributes{Keys: ka.Keys[1:], ConsistentRead: ka.ConsistentRead}
		}
	}
	out, err := d.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: first}, opt...)
	if err != nil {
		return nil, err
	}
	out.UnprocessedKeys = rest
	return out, nil
}

// TestStaleReadsUnprocessedKeys: the records behind a page of keys come
// back whole even when DynamoDB leaves some keys unprocessed; the store
// asks again for them. Jobs 302, 310, 318: shard 6 a year before the other
// tests' records.
func TestStaleReadsUnprocessedKeys(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	old := t0.AddDate(-1, 0, -1)
	ids := []int64{f.id(302), f.id(310), f.id(318)}
	f.deleted(t, ids...)
	for i, id := range ids {
		if _, err := f.s.CreateJob(ctx, rec(id), old.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	db := &throttledBatchGet{Client: env.db}
	s := store.New(db, env.table, store.Options{})
	p, err := s.Stale(ctx, "6", old.Add(time.Hour), 3, "")
	if err != nil {
		t.Fatalf("Stale: %v", err)
	}
	var got []int64
	for _, r := range p.Records {
		got = append(got, r.JobID)
		if r.Repo != "octo/app" || r.State != job.Pending {
			t.Errorf("record %+v, want the whole pending record", r)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) || db.calls != 3 {
		t.Fatalf("records %v in %d BatchGetItem calls, want %v (oldest first) in 3", got, db.calls, ids)
	}
}

// staleIndex plays the sweep index's eventual consistency: its Query
// answers with keys the table's records have moved on from.
type staleIndex struct {
	*dynamodb.Client
	keys []map[string]types.AttributeValue
}

func (d staleIndex) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{Items: d.keys}, nil
}

// TestStaleSkipsRecordsThatMovedOn: a key the (eventually consistent) index
// still lists, whose record a consistent read shows gone, done, or moved to
// a later sweep_at, is not handed to the reclaimer: taking it back on that
// read would re-enqueue a job somebody just wrote.
func TestStaleSkipsRecordsThatMovedOn(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	old := t0.AddDate(-1, 0, -2)
	now := old.Add(time.Hour)
	// Shard 7: 303 stale, 311 released to a later due, 319 done, 327 never written.
	for _, id := range []int64{f.id(303), f.id(311), f.id(319)} {
		if _, err := f.s.CreateJob(ctx, rec(id), old); err != nil {
			t.Fatal(err)
		}
	}
	l, _, err := f.s.Acquire(ctx, f.id(311), 1, "a", now.Add(time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Release(ctx, l, store.Retry{Version: 3, Attempt: 1, Due: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.MarkDone(ctx, store.Done{JobID: f.id(319)}, now); err != nil {
		t.Fatal(err)
	}
	idx := staleIndex{Client: env.db}
	for _, id := range []int64{f.id(303), f.id(311), f.id(319), f.id(327)} {
		idx.keys = append(idx.keys, map[string]types.AttributeValue{
			"pk":          &types.AttributeValueMemberS{Value: job.Key(id)},
			"sweep_shard": &types.AttributeValueMemberS{Value: "7"},
			"sweep_at":    &types.AttributeValueMemberN{Value: fmt.Sprint(job.Millis(old.Add(store.DefaultPendingGrace)))},
		})
	}
	p, err := store.New(idx, env.table, store.Options{}).Stale(ctx, "7", now, 0, "")
	if err != nil {
		t.Fatalf("Stale: %v", err)
	}
	if len(p.Records) != 1 || p.Records[0].JobID != f.id(303) || len(p.Undecodable) != 0 {
		t.Fatalf("records %+v, undecodable %v; want job 303 only", p.Records, p.Undecodable)
	}
}

// putTwice applies every PutItem twice and answers the second: what an SDK
// retry of a put that took effect (a 500 or a timeout after DynamoDB
// applied it) looks like to the store.
type putTwice struct{ store.DynamoDB }

func (p putTwice) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if _, err := p.DynamoDB.PutItem(ctx, in, optFns...); err != nil {
		return nil, err
	}
	return p.DynamoDB.PutItem(ctx, in, optFns...)
}

// TestCreateRetriedAfterItTookEffect: the retried put's refusal carries the
// record it wrote itself, which is a created job, not a duplicate delivery
// (the webhook would send no claim message); another create of the same
// job, even in the same millisecond, is still a conflict.
func TestCreateRetriedAfterItTookEffect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	s := store.New(putTwice{f.db}, f.table, store.Options{})
	got, err := s.CreateJob(ctx, rec(f.id(131)), t0)
	if err != nil {
		t.Fatalf("create retried after it took effect: %v, want the record", err)
	}
	if got.State != job.Pending || got.Version != 1 {
		t.Errorf("created %s v%d, want pending v1", got.State, got.Version)
	}
	if r := f.get(t, f.id(131)); len(r.History) != 1 || r.History[0] != (job.Transition{At: t0.UnixMilli(), To: job.Pending, Actor: job.ActorWebhook}) {
		t.Errorf("history %+v, want the creation entry alone (its token unseen by readers)", r.History)
	}
	var ce *job.ConflictError
	if _, err := f.s.CreateJob(ctx, rec(f.id(131)), t0); !errors.As(err, &ce) || !ce.Found {
		t.Errorf("another delivery's create in the same millisecond: %v, want a conflict", err)
	}
}

// TestCountRedeliveryRetriedAfterItTookEffect: a count whose answer was
// lost and that the SDK retried counts once. At a delivery's last allowed
// attempt the retry is refused by the count it made itself; that must not
// read as spent (the redeliverer would never ask GitHub, and GitHub never
// redelivers by itself). The same holds for the put that restarts an
// expired count. Another caller's count at max is still refused.
func TestCountRedeliveryRetriedAfterItTookEffect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	retried := store.New(retriedUpdate{env.db}, env.table, store.Options{})
	last, twice := fmt.Sprint("retried-last-", f.run), fmt.Sprint("retried-twice-", f.run)
	if n, err := retried.CountRedelivery(ctx, last, 7, 1, t0); n != 1 || err != nil {
		t.Fatalf("the only allowed count, retried: %d, %v; want 1, nil", n, err)
	}
	if n, err := f.s.CountRedelivery(ctx, last, 7, 1, t0); n != 1 || !errors.Is(err, job.ErrAttemptsSpent) {
		t.Errorf("a second count at max 1: %d, %v; want 1, ErrAttemptsSpent", n, err)
	}
	for want := 1; want <= 2; want++ {
		if n, err := retried.CountRedelivery(ctx, twice, 7, 3, t0); n != want || err != nil {
			t.Fatalf("count %d, retried: %d, %v; want %d, nil (one per call)", want, n, err, want)
		}
	}
	later := t0.Add(job.RedeliveryTTL + time.Hour) // the count expired, not yet deleted
	restart := store.New(putTwice{retriedUpdate{env.db}}, env.table, store.Options{})
	if n, err := restart.CountRedelivery(ctx, last, 7, 1, later); n != 1 || err != nil {
		t.Errorf("restart of an expired count, retried: %d, %v; want 1, nil", n, err)
	}
	if n, err := f.s.CountRedelivery(ctx, last, 7, 1, later); n != 1 || !errors.Is(err, job.ErrAttemptsSpent) {
		t.Errorf("a count after the restart at max 1: %d, %v; want 1, ErrAttemptsSpent", n, err)
	}
}

// TestRecheckRetriedAfterItTookEffect: a counted liveness check whose
// answer was lost and that the SDK retried (the version does not move, so
// the retry passes its condition again) is one check, not two.
func TestRecheckRetriedAfterItTookEffect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	id := f.id(139)
	if _, err := f.s.CreateJob(ctx, rec(id), t0); err != nil {
		t.Fatal(err)
	}
	l, _, err := f.s.Acquire(ctx, id, 1, "m-139", t0.Add(5*time.Minute), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Finish(ctx, l, store.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-139"}, t0); err != nil {
		t.Fatal(err)
	}
	retried := store.New(retriedUpdate{env.db}, env.table, store.Options{})
	got, err := retried.Recheck(ctx, f.get(t, id), t0.Add(20*time.Minute), job.CheckIdle, t0.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.LivenessChecks != 1 || f.get(t, id).LivenessChecks != 1 {
		t.Errorf("checks: returned %d, stored %d; want 1 (one check, retried)", got.LivenessChecks, f.get(t, id).LivenessChecks)
	}
}

// TestMarkDoneAndRequeueRetriedAfterTheyTookEffect: a done or an
// operator's requeue whose answer was lost and that the SDK retried is
// refused by its own write. MarkDone must still name the state it replaced
// (claimed: the webhook hands that job's runner on; none: it created the
// record) and Requeue must return the requeued record (the CLI then sends
// the claim message), not a race. Another writer's refusal stays one.
func TestMarkDoneAndRequeueRetriedAfterTheyTookEffect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	retried := store.New(retriedUpdate{env.db}, env.table, store.Options{})
	finished := func(id int64, st job.State) {
		t.Helper()
		if _, err := f.s.CreateJob(ctx, rec(id), t0); err != nil {
			t.Fatal(err)
		}
		l, _, err := f.s.Acquire(ctx, id, 1, fmt.Sprintf("m-%d", id), t0.Add(5*time.Minute), t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.s.Finish(ctx, l, store.Outcome{State: st, Attempt: 1, RunnerName: fmt.Sprintf("linux-%d", id)}, t0); err != nil {
			t.Fatal(err)
		}
	}

	finished(f.id(141), job.Claimed)
	if prev, err := retried.MarkDone(ctx, store.Done{JobID: f.id(141)}, t0.Add(time.Minute)); prev != job.Claimed || err != nil {
		t.Errorf("done of a claimed job, retried: %q, %v; want claimed, nil", prev, err)
	}
	if prev, err := f.s.MarkDone(ctx, store.Done{JobID: f.id(141)}, t0.Add(2*time.Minute)); prev != job.Claimed || !errors.Is(err, store.ErrTerminal) {
		t.Errorf("a later done: %q, %v; want ErrTerminal, with claimed, the state before the first", prev, err)
	}
	if prev, err := retried.MarkDone(ctx, store.Done{JobID: f.id(143), Repo: "octo/app", InstallationID: 42}, t0); prev != "" || err != nil {
		t.Errorf("done creating the record, retried: %q, %v; want none, nil", prev, err)
	}
	if got := f.get(t, f.id(143)); got.State != job.Done {
		t.Errorf("job 143 %s, want done", got.State)
	}

	finished(f.id(147), job.Failed)
	read := f.get(t, f.id(147))
	got, err := retried.Requeue(ctx, job.Requeue{Read: read, By: "ops", Due: t0.Add(time.Hour)}, t0.Add(time.Hour))
	if err != nil || got.State != job.Queued || got.Version != read.Version+1 {
		t.Fatalf("requeue, retried: %+v, %v; want queued v%d", got, err, read.Version+1)
	}
	if _, err := f.s.Requeue(ctx, job.Requeue{Read: read, By: "other", Due: t0.Add(time.Hour)}, t0.Add(time.Hour)); !errors.Is(err, job.ErrConflict) {
		t.Errorf("another requeue of the same read: %v, want a conflict", err)
	}
}

// TestTakeBackAndRecheckMoveAStrayHome: a record written when SWEEP_SHARDS
// was higher sits in a shard above today's count, which the reclaimer
// reads only now and then (its strays). Its take-back, and a liveness
// recheck of a claimed one, move it to its shard under today's count.
func TestTakeBackAndRecheckMoveAStrayHome(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	wide := store.New(env.db, env.table, store.Options{Shards: 64})
	// Jobs 189 and 253: shard 61 of 64 and 5 of 8 (the latter read by
	// TestStaleCursor only a year before t0).
	for _, id := range []int64{f.id(189), f.id(253)} {
		if _, err := wide.CreateJob(ctx, rec(id), t0); err != nil {
			t.Fatal(err)
		}
		if got := f.get(t, id).SweepShard; got != "61" {
			t.Fatalf("job %d created in shard %q, want 61 of 64", id, got)
		}
	}
	home := job.Shard(f.id(189), store.DefaultShards)

	got, err := f.s.TakeBack(ctx, f.get(t, f.id(189)), job.Queued, t0.Add(time.Minute), "outbox_lost", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got.SweepShard != home || f.get(t, f.id(189)).SweepShard != home {
		t.Errorf("taken back: shard %q (stored %q), want %q", got.SweepShard, f.get(t, f.id(189)).SweepShard, home)
	}

	l, _, err := f.s.Acquire(ctx, f.id(253), 1, "m-253", t0.Add(5*time.Minute), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Finish(ctx, l, store.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-253"}, t0); err != nil {
		t.Fatal(err)
	}
	if sh := f.get(t, f.id(253)).SweepShard; sh != "61" {
		t.Fatalf("claimed in shard %q, want still 61", sh)
	}
	got, err = f.s.Recheck(ctx, f.get(t, f.id(253)), t0.Add(20*time.Minute), job.CheckIdle, t0.Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := job.Shard(f.id(253), store.DefaultShards); got.SweepShard != want {
		t.Errorf("rechecked: shard %q, want %q", got.SweepShard, want)
	}
}
