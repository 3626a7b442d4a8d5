package job_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ghclaim/ghclaim/shared/job"
)

func TestCompactKeepsTheErrorsTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{name: "short text stays", in: "502 Bad Gateway", want: "502 Bad Gateway"},
		{name: "exactly the cap stays", in: strings.Repeat("x", job.MaxHistoryError), want: strings.Repeat("x", job.MaxHistoryError)},
		{name: "the cause is kept", in: "POST /repos/o/r/actions/runners/generate-jitconfig: 502 Bad Gateway", want: "…: 502 Bad Gateway"},
		{name: "never a cut rune", in: strings.Repeat("é", 100), want: "…" + strings.Repeat("é", 8)},
		// DynamoDB keeps valid UTF-8 only (the SDK replaces a stray byte);
		// the in-memory store must keep the same text.
		{name: "a stray byte is replaced as DynamoDB would", in: "bad \xc3 byte", want: "bad \uFFFD byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := job.Transition{Error: tt.in}.Compact().Error
			if got != tt.want || len(got) > job.MaxHistoryError || !utf8.ValidString(got) {
				t.Errorf("got %q (%d bytes), want %q within %d bytes", got, len(got), tt.want, job.MaxHistoryError)
			}
		})
	}
}

func TestChainedFollowsTheLastEntry(t *testing.T) {
	t.Parallel()
	h := []job.Transition{{To: job.Pending}, {From: job.Pending, To: job.Claiming, Attempt: 2}}
	lease := job.Chained(h, job.Transition{From: job.Done, To: job.Queued, Attempt: 9}, false)
	if lease.From != job.Claiming || lease.Attempt != 2 {
		t.Errorf("a write that does not set the attempt: got %+v, want from claiming at attempt 2", lease)
	}
	release := job.Chained(h, job.Transition{To: job.Queued, Attempt: 3}, true)
	if release.From != job.Claiming || release.Attempt != 3 {
		t.Errorf("a write that sets the attempt: got %+v, want from claiming at attempt 3", release)
	}
	if first := job.Chained(nil, job.Transition{To: job.Done, Attempt: 4}, false); first.From != "" || first.Attempt != 0 {
		t.Errorf("the first entry: got %+v, want no from-state, attempt 0", first)
	}
}

func TestAppendHistoryKeepsTheNewest(t *testing.T) {
	t.Parallel()
	var h []job.Transition
	for i := range 3 * job.MaxHistory {
		h = job.AppendHistory(h, job.Transition{At: int64(i)})
	}
	if len(h) != job.MaxHistory || h[0].At != int64(2*job.MaxHistory) || h[len(h)-1].At != int64(3*job.MaxHistory-1) {
		t.Errorf("got %d entries from %d to %d, want the newest %d", len(h), h[0].At, h[len(h)-1].At, job.MaxHistory)
	}
}
