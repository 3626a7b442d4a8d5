package provision

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/failure"
)

// TestEC2WaitsForAFreshInstanceToBeKnown: DescribeInstances may not know
// an instance CreateFleet has just launched. The adapter reads it again
// after 5 s, doubling, for at most two minutes of waiting (as the SDK's
// InstanceExists waiter did), and only then puts the JIT config.
func TestEC2WaitsForAFreshInstanceToBeKnown(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := []struct {
		name       string
		misses     int
		throttles  int // reads refused for the account's request rate
		wantSleeps []time.Duration
		wantErr    string
	}{
		{name: "known at once", misses: 0},
		{name: "known at the third read", misses: 2, wantSleeps: []time.Duration{5 * s, 10 * s}},
		// A burst of claims spends the account's EC2 request tokens: a
		// throttled read is waited out as an unknown one. It once ended
		// the launched machine (undo) for a read made only for its owner.
		{name: "throttled twice, then known", throttles: 2, wantSleeps: []time.Duration{5 * s, 10 * s}},
		{name: "never known: gives up after two minutes", misses: 1000,
			wantSleeps: []time.Duration{5 * s, 10 * s, 20 * s, 40 * s, 45 * s}, wantErr: "still unknown to DescribeInstances after 2m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, params := newFleetEC2(), &fakeParameters{}
			inst.freshMisses, inst.throttles = tt.misses, tt.throttles
			a := NewEC2(inst, params, nil)
			var slept []time.Duration
			a.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			res, err := a.Provision(context.Background(), request(ec2Pool(), 42))
			if !reflect.DeepEqual(slept, tt.wantSleeps) {
				t.Errorf("waits: got %v, want %v", slept, tt.wantSleeps)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				if len(params.puts) != 0 {
					t.Errorf("JIT config put for an instance EC2 never described")
				}
				if alive := inst.alive(); len(alive) != 0 {
					t.Errorf("instances %v left running without a config, want the launched one terminated", alive)
				}
				return
			}
			if err != nil || res.InstanceID == "" || len(params.puts) != 1 {
				t.Fatalf("got %+v, %v with %d puts, want the launched instance and its config", res, err, len(params.puts))
			}
		})
	}
}

// TestFleetDoubleRefusesDescribesEC2Refuses pins the double's strictness: a
// lookup the adapter might one day page with MaxResults must meet EC2's
// refusals here, not first in production.
func TestFleetDoubleRefusesDescribesEC2Refuses(t *testing.T) {
	e := newFleetEC2()
	for _, c := range []struct {
		name string
		in   ec2api.DescribeInstancesInput
		code string
	}{
		{"ids and max results", ec2api.DescribeInstancesInput{InstanceIDs: []string{"i-0001"}, MaxResults: 5}, "InvalidParameterCombination"},
		{"max results below 5", ec2api.DescribeInstancesInput{MaxResults: 4}, "InvalidParameterValue"},
		{"max results above 1000", ec2api.DescribeInstancesInput{MaxResults: 1001}, "InvalidParameterValue"},
	} {
		_, err := e.DescribeInstances(context.Background(), &c.in)
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != c.code {
			t.Errorf("%s: err %v, want %s", c.name, err, c.code)
		}
	}
	out, err := e.DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{
		Filters: []ec2api.Filter{{Name: "tag:" + TagJobID, Values: []string{"7"}}}, MaxResults: 1000})
	if err != nil || out == nil {
		t.Fatalf("a filtered lookup pages with MaxResults on EC2: %v", err)
	}
}

// TestThrottledDescribeStaysRateLimit: a launched instance's read that
// EC2 keeps refusing for the account's request rate is waited out; when
// the wait ends (the claim's time, or describeWait) the machine is ended
// and the error is the throttle's, classified rate_limit (at least a
// minute before the next attempt), not network or unknown_retryable (the
// ladder's first rung, 30 s: more load on a throttled account).
func TestThrottledDescribeStaysRateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cutAt  int // the sleep that meets the claim's end; 0: never
		inText string
	}{
		{name: "the claim's time ends during the waits", cutAt: 3, inText: "context deadline exceeded"},
		{name: "describeWait passes", inText: "throttled, for 2m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inst, params := newFleetEC2(), &fakeParameters{}
			inst.throttles = 1000
			a := NewEC2(inst, params, nil)
			n := 0
			a.sleep = func(context.Context, time.Duration) error {
				if n++; tc.cutAt > 0 && n >= tc.cutAt {
					return context.DeadlineExceeded
				}
				return nil
			}
			_, err := a.Provision(context.Background(), request(ec2Pool(), 42))
			if err == nil || !strings.Contains(err.Error(), tc.inText) {
				t.Fatalf("got %v, want an error saying %q", err, tc.inText)
			}
			if alive := inst.alive(); len(alive) != 0 {
				t.Fatalf("left running without a config: %v", alive)
			}
			if cl := failure.Classify(err); cl.Class != failure.RateLimit {
				t.Fatalf("throttled describe ended in %v, classified %s; want rate_limit", err, cl.Class)
			}
		})
	}
}

// scriptedEC2 answers reads by id from a script ("throttle", "notfound",
// "canceled"), then as fleetEC2 does.
type scriptedEC2 struct {
	*fleetEC2
	script []string
}

func (s *scriptedEC2) DescribeInstances(ctx context.Context, in *ec2api.DescribeInstancesInput) (*ec2api.DescribeInstancesOutput, error) {
	if len(in.InstanceIDs) > 0 && len(s.script) > 0 {
		step := s.script[0]
		s.script = s.script[1:]
		switch step {
		case "throttle":
			return nil, provisiontest.ClientError("EC2", "DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.")
		case "notfound":
			return nil, provisiontest.ClientError("EC2", "DescribeInstances", "InvalidInstanceID.NotFound", "The instance ID does not exist")
		case "canceled":
			// ec2api's own retry of a throttle: the context ended
			// during its wait between two attempts.
			return nil, &smithy.OperationError{ServiceID: "EC2", OperationName: "DescribeInstances",
				Err: &smithy.CanceledError{Err: context.DeadlineExceeded}}
		}
	}
	return s.fleetEC2.DescribeInstances(ctx, in)
}

// TestDescribeGiveUpNamesItsLastAnswer: how a give-up is classified
// follows the reads' last answer. The claim's time ending inside a
// throttled read (ec2api's own retry wait) after throttles is still the
// throttle (rate_limit), not network; one throttle among reads that found
// the instance unknown for the whole wait is no throttle.
func TestDescribeGiveUpNamesItsLastAnswer(t *testing.T) {
	t.Parallel()
	unknown := []string{"notfound", "throttle"}
	for range 20 {
		unknown = append(unknown, "notfound")
	}
	for _, tc := range []struct {
		name   string
		script []string
		class  failure.Class
	}{
		{name: "time ends inside a throttled read", script: []string{"throttle", "throttle", "canceled"}, class: failure.RateLimit},
		{name: "one throttle among unknown reads", script: unknown, class: failure.UnknownRetryable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inst := &scriptedEC2{fleetEC2: newFleetEC2(), script: tc.script}
			a := NewEC2(inst, &fakeParameters{}, nil)
			a.sleep = func(context.Context, time.Duration) error { return nil }
			_, err := a.Provision(context.Background(), request(ec2Pool(), 42))
			if cl := failure.Classify(err); err == nil || cl.Class != tc.class {
				t.Fatalf("ended in %v, classified %s; want %s", err, cl.Class, tc.class)
			}
			if alive := inst.alive(); len(alive) != 0 {
				t.Fatalf("left running without a config: %v", alive)
			}
		})
	}
}
