package store

import (
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// itemSize is an item's size as DynamoDB bills it (developer guide, "Item
// sizes and formats"): names and string values in UTF-8 bytes, a number 1
// byte per two significant digits plus 1, a list or map 3 bytes plus 1 per
// element plus its elements.
func itemSize(m map[string]types.AttributeValue) int {
	total := 0
	for name, v := range m {
		total += len(name) + valueSize(v)
	}
	return total
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		digits := len(strings.Trim(strings.TrimLeft(v.Value, "-"), "0"))
		return (digits+1)/2 + 1
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + itemSize(v.Value)
	}
	panic("unsized attribute type")
}

// largestHistory is a full history whose every entry is as large as an
// entry gets: the longest state, class and actor, a two-digit attempt that
// changes with every entry, and an error far past the kept tail.
func largestHistory() []job.Transition {
	var h []job.Transition
	for i := range job.MaxHistory + 3 {
		h = job.AppendHistory(h, job.Transition{
			At: 1796040000000 + int64(i)*600000, From: job.Abandoned, To: job.Abandoned, Attempt: 10 + i,
			Class: "unknown_retryable", Error: strings.Repeat("é", 4000), Actor: job.ActorReclaimer,
		})
	}
	return h
}

func TestHistorySizeIsBounded(t *testing.T) {
	t.Parallel()
	r := job.Record{JobID: 7, State: job.Abandoned, Version: 40, Attempt: 22, Repo: "octo/app", InstallationID: 42,
		Labels: []string{"self-hosted", "linux"}, Pool: "linux", LastError: strings.Repeat("x", 1024), LastErrorClass: "unknown_retryable"}
	bare, err := marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	r.History = largestHistory()
	if len(r.History) != job.MaxHistory {
		t.Fatalf("history of %d entries, want the cap %d", len(r.History), job.MaxHistory)
	}
	full, err := marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	added := itemSize(full) - itemSize(bare)
	t.Logf("a full history at its largest adds %d bytes", added)
	if added > 800 {
		t.Errorf("a full history adds %d bytes to the item, want well under 1 KB (≤ 800)", added)
	}
}

// TestHistoryEntryIsOneString: an entry is one string value in the item
// (one attribute value, not a map of five), its '|' in error text cannot
// shift the fields, and entries written as maps before are still read.
func TestHistoryEntryIsOneString(t *testing.T) {
	t.Parallel()
	two := 2
	h := []job.Transition{
		{At: 1000, To: job.Pending, Actor: job.ActorWebhook},
		{At: 2000, From: job.Pending, To: job.Queued, Attempt: two, Class: "server_side", Error: "a|b 502", Actor: job.ActorClaimer},
	}
	item, err := marshal(job.Record{JobID: 9, State: job.Queued, History: h})
	if err != nil {
		t.Fatal(err)
	}
	l, ok := item["history"].(*types.AttributeValueMemberL)
	if !ok || len(l.Value) != 2 {
		t.Fatalf("history is %#v, want a list of 2", item["history"])
	}
	for i, v := range l.Value {
		if _, ok := v.(*types.AttributeValueMemberS); !ok {
			t.Fatalf("entry %d is %T, want a string", i, v)
		}
	}
	got, err := unmarshal(item)
	if err != nil {
		t.Fatal(err)
	}
	want := []job.Transition{h[0], h[1]}
	want[1].Error = "a¦b 502"
	if !reflect.DeepEqual(got.History, want) {
		t.Fatalf("read back %+v, want %+v", got.History, want)
	}

	// The map form of the same entries.
	item["history"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": n(1000), "t": str("pending"), "b": str("webhook")}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": n(2000), "t": str("queued"), "n": n(2), "c": str("server_side"), "e": str("a¦b 502"), "b": str("claimer")}},
	}}
	if got, err = unmarshal(item); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.History, want) {
		t.Fatalf("map entries read back %+v, want %+v", got.History, want)
	}
}
