package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/store"
)

// opRecorder passes each request on and notes its operation and the
// partition key it names, once per operation: the SDK's retries of a
// request the loaded emulator failed (Amz-Sdk-Request: attempt=2 and
// later) are not noted.
type opRecorder struct {
	next dynamodb.HTTPClient
	mu   sync.Mutex
	ops  []string
}

func (r *opRecorder) Do(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var in struct {
		Key, Item map[string]map[string]string
	}
	_ = json.Unmarshal(body, &in)
	pk := in.Key["pk"]["S"] + in.Item["pk"]["S"]
	if !strings.Contains(req.Header.Get("Amz-Sdk-Request"), "attempt=") {
		return nil, fmt.Errorf("request without Amz-Sdk-Request: its retries cannot be told apart")
	}
	if strings.Contains(req.Header.Get("Amz-Sdk-Request"), "attempt=1;") {
		r.mu.Lock()
		r.ops = append(r.ops, req.Header.Get("X-Amz-Target")+" "+pk)
		r.mu.Unlock()
	}
	return r.next.Do(req)
}

// TestRateWritesAreUpdatesOfTheRateItem: sharing a reading or a block is
// one UpdateItem of rate#<installation> and nothing else. The roles of the
// functions that share rate state (template.yaml, checked by
// infra/emulator's TestRateWritersMayUpdateTheRateItems) allow exactly
// that; moto enforces no IAM, so this pins the request the roles must
// allow.
func TestRateWritesAreUpdatesOfTheRateItem(t *testing.T) {
	inst := ids(t)(990_001)
	t.Parallel()
	opts := env.db.Options()
	rec := &opRecorder{next: opts.HTTPClient}
	opts.HTTPClient = rec
	s := store.New(dynamodb.New(opts), env.table, store.Options{})
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	if err := s.SaveRate(ctx, inst, ratelimit.Reading{Limit: 5000, Remaining: 10, ResetAt: now.Add(time.Hour), ObservedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveBlock(ctx, inst, now.Add(time.Minute), time.Minute); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprint("DynamoDB_20120810.UpdateItem rate#", inst), fmt.Sprint("DynamoDB_20120810.UpdateItem rate#", inst)}
	if len(rec.ops) != len(want) || rec.ops[0] != want[0] || rec.ops[1] != want[1] {
		t.Errorf("requests %q, want %q", rec.ops, want)
	}
}

// TestBlockOutlivesAnOldTTL: a block written on a rate item whose TTL
// (set by a primary reading days ago) has passed moves the TTL past the
// block, so DynamoDB's TTL sweep cannot drop the item, block included,
// while the block runs.
func TestBlockOutlivesAnOldTTL(t *testing.T) {
	inst := ids(t)(990_002)
	t.Parallel()
	s := store.New(env.db, env.table, store.Options{})
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	old := now.Add(-72 * time.Hour)
	if err := s.SaveRate(ctx, inst, ratelimit.Reading{Limit: 5000, Remaining: 10, ResetAt: old.Add(time.Hour), ObservedAt: old}); err != nil {
		t.Fatal(err)
	}
	until := now.Add(time.Minute)
	if err := s.SaveBlock(ctx, inst, until, time.Minute); err != nil {
		t.Fatal(err)
	}
	out, err := env.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &env.table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint("rate#", inst)}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var it struct {
		ExpiresAt int64 `dynamodbav:"expires_at"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		t.Fatal(err)
	}
	if it.ExpiresAt < until.Unix() {
		t.Errorf("expires_at %s, before the block's end %s: TTL may delete the block", time.Unix(it.ExpiresAt, 0).UTC(), until)
	}
}

// TestRateItemWithoutCountedAt: a rate item written before counted_at
// existed (a stack upgraded while a reading was shared) counts from its
// updated_at: an exhaustion on it still refuses a higher count observed
// just after, and a higher count observed more than Crossing after it
// replaces it.
func TestRateItemWithoutCountedAt(t *testing.T) {
	t.Parallel()
	s := store.New(env.db, env.table, store.Options{})
	ctx := context.Background()
	const inst = 990_003
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	reset := now.Add(30 * time.Minute)
	num := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	if _, err := env.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &env.table, Item: map[string]types.AttributeValue{
		"pk":    &types.AttributeValueMemberS{Value: "rate#990003"},
		"limit": num(5000), "remaining": num(0), "reset_at": num(reset.UnixMilli()),
		"updated_at": num(now.UnixMilli()), "expires_at": num(reset.Add(24 * time.Hour).Unix()),
	}}); err != nil {
		t.Fatal(err)
	}
	save := func(remaining int, at time.Duration) ratelimit.Reading {
		t.Helper()
		if err := s.SaveRate(ctx, inst, ratelimit.Reading{Limit: 5000, Remaining: remaining, ResetAt: reset, ObservedAt: now.Add(at)}); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadRate(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := save(40, 100*time.Millisecond); got.Remaining != 0 || !got.Counted().Equal(now) {
		t.Fatalf("after a higher count observed 100 ms later: %+v, want the exhaustion, counted at %v", got, now)
	}
	if got := save(400, ratelimit.Crossing+time.Second); got.Remaining != 400 || !got.Counted().Equal(now.Add(ratelimit.Crossing+time.Second)) {
		t.Fatalf("after a higher count observed %v later: %+v, want it (the limit rose)", ratelimit.Crossing+time.Second, got)
	}
}
