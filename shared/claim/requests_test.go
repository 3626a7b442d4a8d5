package claim_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRequestsPerClaim: a claim costs the fewest AWS requests. The lease
// write comes first and returns the record (no read before it), the
// outcome is one fenced write, the shared rate item is read only while
// the process's own reading is cold, stale or low (here: first claim), and the handled message is not deleted by the claimer (the
// event source mapping deletes what the batch response does not report),
// so a steady claim is two DynamoDB writes and nothing else.
// A chained hop costs one send and nothing else.
func TestRequestsPerClaim(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{concurrency: 1})
	methods := []string{"Get", "Acquire", "Release", "Finish", "LoadRate", "SaveRate"}
	snapshot := func() map[string]int {
		m := map[string]int{}
		for _, k := range methods {
			m[k] = h.store.Calls(k)
		}
		return m
	}
	type want struct {
		store map[string]int
		sends int
	}
	for i, tc := range []struct {
		name string
		msg  func(id int64)
		want want
	}{
		{name: "first claim of the refresh interval", msg: func(id int64) { h.seed(t, id) },
			// The first reading of the process is shared (ratelimit.PersistRule).
			want: want{store: map[string]int{"Acquire": 1, "Finish": 1, "LoadRate": 1, "SaveRate": 1}}},
		{name: "next claim within the interval", msg: func(id int64) { h.seed(t, id) },
			want: want{store: map[string]int{"Acquire": 1, "Finish": 1}}},
		{name: "chained hop", msg: func(id int64) {
			h.record(t, id)
			if err := h.queue.Send(t.Context(), job.Message{JobID: id, Version: 1, NotBefore: job.Millis(h.clock.Now().Add(time.Hour))}, 0); err != nil {
				t.Fatal(err)
			}
		}, want: want{store: map[string]int{}, sends: 1}},
	} {
		id := int64(9901 + i)
		tc.msg(id)
		before, sent := snapshot(), len(h.queue.Sent())
		msgs := h.receive(t, 1)
		if resp := h.invoke(t, c, msgs...); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: batch item failures %v", tc.name, resp.BatchItemFailures)
		}
		after := snapshot()
		for _, k := range methods {
			if got := after[k] - before[k]; got != tc.want.store[k] {
				t.Errorf("%s: %d %s requests, want %d", tc.name, got, k, tc.want.store[k])
			}
		}
		if got := len(h.queue.Sent()) - sent; got != tc.want.sends {
			t.Errorf("%s: %d messages sent, want %d", tc.name, got, tc.want.sends)
		}
		if _, ok := h.queue.Visibility(msgs[0].ReceiptHandle); ok {
			t.Errorf("%s: the claimer changed the handled message's visibility", tc.name)
		}
		if n := len(h.queue.Deleted()); n != 0 {
			t.Errorf("%s: the claimer deleted %d messages itself, want none", tc.name, n)
		}
	}
	if r := h.get(t, 9901); r.State != job.Claimed {
		t.Fatalf("record %s, want claimed", r.State)
	}
}
