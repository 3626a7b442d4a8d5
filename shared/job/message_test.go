package job

import (
	"errors"
	"testing"
)

func TestDecodeMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    Message
		wantErr bool
	}{
		{"minimal", `{"job_id":7,"version":1}`, Message{JobID: 7, Version: 1}, false},
		{"full", `{"job_id":7,"version":3,"attempt":2,"not_before":1700000000000}`, Message{JobID: 7, Version: 3, Attempt: 2, NotBefore: 1700000000000}, false},
		{"big id stays exact", `{"job_id":9007199254740993,"version":1}`, Message{JobID: 9007199254740993, Version: 1}, false},
		{"missing version", `{"job_id":7}`, Message{}, true},
		{"missing job", `{"version":1}`, Message{}, true},
		{"zero job", `{"job_id":0,"version":1}`, Message{}, true},
		{"negative version", `{"job_id":1,"version":-1}`, Message{}, true},
		{"string id", `{"job_id":"7","version":1}`, Message{}, true},
		{"fractional id", `{"job_id":7.5,"version":1}`, Message{}, true},
		{"not json", `job 7`, Message{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeMessage(tt.body)
			if tt.wantErr {
				if !errors.Is(err, ErrBadMessage) {
					t.Fatalf("got %v, want ErrBadMessage", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestCheckBatch: the queue port's batch rules, shared by the SQS adapter
// and the in-memory queue: up to MaxBatch messages, one delay each.
func TestCheckBatch(t *testing.T) {
	for _, tc := range []struct {
		msgs, delays int
		ok           bool
	}{{1, 1, true}, {MaxBatch, MaxBatch, true}, {MaxBatch + 1, MaxBatch + 1, false}, {3, 2, false}} {
		if err := CheckBatch(tc.msgs, tc.delays); (err == nil) != tc.ok {
			t.Errorf("CheckBatch(%d, %d) = %v, want ok %v", tc.msgs, tc.delays, err, tc.ok)
		}
	}
}
