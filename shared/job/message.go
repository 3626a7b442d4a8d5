package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxDelay is SQS's cap on a message's DelaySeconds: a longer delay is
// chained through the message's not_before.
const MaxDelay = 900 * time.Second

// ErrBadMessage marks a message body that is not a claim message.
var ErrBadMessage = errors.New("job: bad claim message")

// DecodeMessage parses and validates a claim message body. Numbers must be
// JSON integers (not strings), decoded exactly (job ids exceed 2^53 some day).
func DecodeMessage(body string) (Message, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	var m Message
	var err error
	if m.JobID, err = integer(raw, "job_id", true, 1); err != nil {
		return Message{}, err
	}
	if m.Version, err = integer(raw, "version", true, 1); err != nil {
		return Message{}, err
	}
	a, err := integer(raw, "attempt", false, 0)
	if err != nil {
		return Message{}, err
	}
	m.Attempt = int(a)
	if m.NotBefore, err = integer(raw, "not_before", false, 0); err != nil {
		return Message{}, err
	}
	return m, nil
}

func integer(raw map[string]json.RawMessage, name string, required bool, min int64) (int64, error) {
	v, ok := raw[name]
	if !ok || string(v) == "null" {
		if required {
			return 0, fmt.Errorf("%w: %s is required", ErrBadMessage, name)
		}
		return 0, nil
	}
	x, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || x < min {
		return 0, fmt.Errorf("%w: %s %s is not an integer ≥ %d", ErrBadMessage, name, v, min)
	}
	return x, nil
}

// MaxBatch is SQS's cap on the entries of one SendMessageBatch: the most
// messages a queue port's SendBatch takes in one call.
const MaxBatch = 10

// CheckBatch is a SendBatch's argument check, the same for every
// implementation of the port: more than MaxBatch messages (SQS refuses
// the call as TooManyEntriesInBatchRequest) or a delay count that does
// not match sends nothing.
func CheckBatch(msgs, delays int) error {
	switch {
	case msgs > MaxBatch:
		return fmt.Errorf("send batch: AWS.SimpleQueueService.TooManyEntriesInBatchRequest: %d entries, at most %d", msgs, MaxBatch)
	case delays != msgs:
		return fmt.Errorf("send batch: %d delays for %d messages", delays, msgs)
	}
	return nil
}
