package provision

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

type fakeSender struct {
	mu    sync.Mutex
	sends []*sqs.SendMessageInput
	err   error
}

func (f *fakeSender) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends = append(f.sends, in)
	if f.err != nil {
		return nil, f.err
	}
	return &sqs.SendMessageOutput{MessageId: aws.String("msg-1")}, nil
}

func TestDispatchProvision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		queueURL  string
		wantGroup string
		wantDedup string
	}{
		{name: "standard queue: no FIFO attributes", queueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/mac-jobs"},
		{name: "fifo queue: one group per job, dedup by runner and config", queueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/mac-jobs.fifo",
			wantGroup: "mac-42", wantDedup: "mac-42." + shortHash(jit)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			log, buf := logBuffer()
			sender := &fakeSender{}
			d := NewDispatch(sender, log)
			req := request(dispatchPool(tt.queueURL), 42)
			res, err := d.Provision(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res != (Result{MessageID: "msg-1"}) {
				t.Errorf("result: got %+v, want message msg-1", res)
			}
			if len(sender.sends) != 1 {
				t.Fatalf("SendMessage calls: got %d, want 1", len(sender.sends))
			}
			in := sender.sends[0]
			if aws.ToString(in.QueueUrl) != tt.queueURL {
				t.Errorf("queue: got %q, want %q", aws.ToString(in.QueueUrl), tt.queueURL)
			}
			if got := aws.ToString(in.MessageGroupId); got != tt.wantGroup {
				t.Errorf("group id: got %q, want %q", got, tt.wantGroup)
			}
			if got := aws.ToString(in.MessageDeduplicationId); got != tt.wantDedup {
				t.Errorf("dedup id: got %q, want %q", got, tt.wantDedup)
			}
			var body DispatchMessage
			if err := json.Unmarshal([]byte(aws.ToString(in.MessageBody)), &body); err != nil {
				t.Fatal(err)
			}
			want := DispatchMessage{JobID: 42, RunID: 9042, Repo: "octo/hello", RunnerName: "mac-42", Pool: "mac",
				Labels: []string{"self-hosted", "macOS"}, JITConfig: jit}
			if !reflect.DeepEqual(body, want) {
				t.Errorf("body: got %#v, want %#v", body, want)
			}
			if strings.Contains(aws.ToString(in.MessageDeduplicationId), jit) {
				t.Error("dedup id carries the JIT config")
			}
			if logs := buf.String(); strings.Contains(logs, jit) || !strings.Contains(logs, `"message_id":"msg-1"`) {
				t.Errorf("logs: got %s, want the message id and no JIT config", logs)
			}
		})
	}
}

func TestDeduplicationID(t *testing.T) {
	t.Parallel()
	a := DeduplicationID("mac-42", jit)
	if a != DeduplicationID("mac-42", jit) {
		t.Error("not stable for the same dispatch")
	}
	// A fresh config (the claimer regenerated the runner) must not be
	// deduplicated away, or the host keeps only the dead config.
	if a == DeduplicationID("mac-42", jit+"x") {
		t.Error("a regenerated config shares the dedup id of the stale one")
	}
	if a == DeduplicationID("mac-43", jit) {
		t.Error("two jobs share a dedup id")
	}
	if len(a) > 128 {
		t.Errorf("got %d characters, SQS allows 128", len(a))
	}
}

func TestDispatchProvisionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		req      Request
		sendErr  error
		wantCode string
		wantIs   error
		wantSent int
	}{
		{name: "send error keeps its AWS code", req: request(dispatchPool("https://q/jobs"), 42),
			sendErr: &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"}, wantCode: "AWS.SimpleQueueService.NonExistentQueue", wantSent: 1},
		{name: "ec2 pool is refused", req: request(ec2Pool(), 42), wantIs: ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sender := &fakeSender{err: tt.sendErr}
			_, err := NewDispatch(sender, nil).Provision(context.Background(), tt.req)
			if err == nil {
				t.Fatal("got nil error")
			}
			var api smithy.APIError
			if tt.wantCode != "" && (!errors.As(err, &api) || api.ErrorCode() != tt.wantCode) {
				t.Errorf("got %v, want a wrapped smithy.APIError %s", err, tt.wantCode)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("got %v, want errors.Is %v", err, tt.wantIs)
			}
			if strings.Contains(err.Error(), jit) {
				t.Errorf("JIT config in error: %v", err)
			}
			if len(sender.sends) != tt.wantSent {
				t.Errorf("SendMessage calls: got %d, want %d", len(sender.sends), tt.wantSent)
			}
		})
	}
}

func TestDispatchMessageRedacts(t *testing.T) {
	t.Parallel()
	m := DispatchMessage{JobID: 42, RunnerName: "mac-42", JITConfig: jit}
	log, buf := logBuffer()
	log.Info("received", "msg", m)
	for _, s := range []string{m.String(), buf.String()} {
		if strings.Contains(s, jit) || !strings.Contains(s, "REDACTED") {
			t.Errorf("got %s, want the config redacted", s)
		}
	}
}
