package provision

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// withCapacity is ec2Pool (types c7g.large, m7g.large; subnets a, b, c)
// with the given purchase option.
func withCapacity(capacity string) pool.Pool {
	p := ec2Pool()
	p.Provisioner.Capacity = capacity
	return p
}

// assertOneMachine checks that the job has exactly one live machine, the
// reported one, where want says ("market/type/subnet"), and that its JIT
// config is stored tagged with that machine's ARN.
func assertOneMachine(t *testing.T, inst *fleetEC2, params *fakeParameters, res Result, want string) {
	t.Helper()
	alive := inst.alive()
	if len(alive) != 1 || alive[res.InstanceID] == "" {
		t.Fatalf("live machines %v, want exactly the reported %s", alive, res.InstanceID)
	}
	if got := alive[res.InstanceID]; got != want {
		t.Errorf("machine runs at %s, want %s", got, want)
	}
	put := params.stored["/ghclaim/runners/linux-42"]
	if put == nil || len(put.Tags) != 1 {
		t.Fatalf("stored parameter %+v, want one with its instance tag", put)
	}
	if got, want := put.Tags[0].Value, "arn:aws:ec2:"+fakeRegion+":"+fakeAccount+":instance/"+res.InstanceID; got != want {
		t.Errorf("parameter tag %s, want %s", got, want)
	}
}

// A zone or type without capacity costs no attempt: the launch moves to the
// next option (type × subnet, then on-demand after spot) within the call.
func TestEC2CapacityMovesToTheNextOption(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		capacity  string
		refuse    map[string]string
		want      string // market/type/subnet of the machine
		wantFleet []string
	}{
		{name: "preferred type has no capacity in the job's subnet: the next subnet", capacity: pool.CapacityOnDemand,
			refuse: map[string]string{"on-demand/c7g.large/subnet-a": "InsufficientInstanceCapacity"},
			want:   "on-demand/c7g.large/subnet-b", wantFleet: []string{"on-demand"}},
		{name: "preferred type has no capacity anywhere: the next type", capacity: pool.CapacityOnDemand,
			refuse: map[string]string{"on-demand/c7g.large/*": "InsufficientInstanceCapacity"},
			want:   "on-demand/m7g.large/subnet-a", wantFleet: []string{"on-demand"}},
		{name: "spot", capacity: pool.CapacitySpot,
			want: "spot/c7g.large/subnet-a", wantFleet: []string{"spot"}},
		{name: "spot unavailable everywhere: on-demand", capacity: pool.CapacitySpotThenOnDemand,
			refuse: map[string]string{"spot/*/*": "InsufficientInstanceCapacity"},
			want:   "on-demand/c7g.large/subnet-a", wantFleet: []string{"spot", "on-demand"}},
		{name: "spot price too low and on-demand short in the job's zone", capacity: pool.CapacitySpotThenOnDemand,
			refuse: map[string]string{"spot/*/*": "SpotMaxPriceTooLow", "on-demand/*/subnet-a": "InsufficientInstanceCapacity"},
			want:   "on-demand/c7g.large/subnet-b", wantFleet: []string{"spot", "on-demand"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, params := newFleetEC2(), &fakeParameters{}
			for k, v := range tt.refuse {
				inst.refuse[k] = v
			}
			res, err := NewEC2(inst, params, nil).Provision(context.Background(), request(withCapacity(tt.capacity), 42))
			if err != nil {
				t.Fatalf("Provision: %v", err)
			}
			assertOneMachine(t, inst, params, res, tt.want)
			var markets []string
			tokens := map[string]bool{}
			for _, f := range inst.fleets {
				markets = append(markets, string(f.TargetCapacitySpecification.DefaultTargetCapacityType))
				tokens[f.ClientToken] = true
			}
			if len(markets) != len(tt.wantFleet) || len(tokens) != len(markets) {
				t.Fatalf("fleets %v with %d tokens, want %v, one token each", markets, len(tokens), tt.wantFleet)
			}
			for i := range markets {
				if markets[i] != tt.wantFleet[i] {
					t.Errorf("fleet %d: got %s, want %s", i+1, markets[i], tt.wantFleet[i])
				}
			}
		})
	}
}

// Only when every option of every market lacks capacity does the attempt
// fail, as server_side: the retry ladder tries again later.
func TestEC2CapacityEveryOptionFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		capacity  string
		refuse    map[string]string
		wantCalls int
	}{
		{name: "on-demand", capacity: pool.CapacityOnDemand,
			refuse: map[string]string{"on-demand/*/*": "InsufficientInstanceCapacity"}, wantCalls: 1},
		{name: "spot only", capacity: pool.CapacitySpot,
			refuse: map[string]string{"spot/*/*": "UnfulfillableCapacity"}, wantCalls: 1},
		{name: "spot then on-demand", capacity: pool.CapacitySpotThenOnDemand,
			refuse: map[string]string{"spot/*/*": "InsufficientInstanceCapacity", "on-demand/*/*": "InsufficientInstanceCapacity"}, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, params := newFleetEC2(), &fakeParameters{}
			inst.refuse = tt.refuse
			_, err := NewEC2(inst, params, nil).Provision(context.Background(), request(withCapacity(tt.capacity), 42))
			if err == nil {
				t.Fatal("Provision: got nil error, want the capacity failure")
			}
			if f := failure.Classify(err); f.Class != failure.ServerSide {
				t.Errorf("class: got %s (%s), want server_side (the retry ladder)", f.Class, f.Reason)
			}
			if alive := inst.alive(); len(alive) != 0 {
				t.Errorf("live machines %v, want none", alive)
			}
			if len(params.puts) != 0 {
				t.Errorf("PutParameter calls: got %d, want none without a machine", len(params.puts))
			}
			if got := inst.calls(); got != tt.wantCalls {
				t.Errorf("CreateFleet calls: got %d, want %d (every market once)", got, tt.wantCalls)
			}
		})
	}
}

// An attempt that found no capacity leaves its empty answer under its
// token for at least 24 h; the next attempt (a new runner registration)
// must get a fresh answer, and however often the job is provisioned
// afterwards it has one machine.
func TestEC2CapacityLaterAttemptsLaunchOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inst, params := newFleetEC2(), &fakeParameters{}
	e := NewEC2(inst, params, nil)
	inst.refuse["on-demand/*/*"] = "InsufficientInstanceCapacity"
	first := request(ec2Pool(), 42)
	first.JITConfig = "registration-1"
	if _, err := e.Provision(ctx, first); err == nil {
		t.Fatal("attempt 1: got nil error, want no capacity")
	}
	inst.mu.Lock()
	clear(inst.refuse) // capacity is back
	inst.mu.Unlock()

	second := request(ec2Pool(), 42)
	second.JITConfig = "registration-2"
	res, err := e.Provision(ctx, second)
	if err != nil {
		t.Fatalf("attempt 2: %v (a token replaying attempt 1's empty answer?)", err)
	}
	// A repeat of attempt 2 whose tag lookup misses the fresh machine: the
	// token answers with it. Then attempt 3: the tag lookup finds it.
	inst.mu.Lock()
	inst.hidden[res.InstanceID] = 1
	inst.mu.Unlock()
	third := request(ec2Pool(), 42)
	third.JITConfig = "registration-3"
	for i, req := range []Request{second, third} {
		again, err := e.Provision(ctx, req)
		if err != nil {
			t.Fatalf("call %d after the launch: %v", i+1, err)
		}
		if again.InstanceID != res.InstanceID {
			t.Errorf("call %d after the launch: got %s, want %s", i+1, again.InstanceID, res.InstanceID)
		}
	}
	if alive := inst.alive(); len(alive) != 1 {
		t.Errorf("live machines %v, want one", alive)
	}
}
