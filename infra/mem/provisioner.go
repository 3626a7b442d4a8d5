package mem

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/pool"
)

// Machine is one machine a Provisioner started.
type Machine struct {
	ID         string
	JobID      int64
	RunnerName string
	Pool       string
	Repo       string
	Scope      string // where its runner was registered (the EC2 adapter's scope tag)
	LaunchedAt time.Time
	// Stopped: the machine is gone (a test ended it).
	Stopped bool
}

// Provisioner is an in-memory provisioner with the semantics the EC2
// adapter promises (shared/provision): Provision validates the request,
// stores the JIT config under the runner's name (the SSM parameter), then
// starts one machine per attempt, or finds the attempt's live machine and
// reuses it (the job and runner-name tag lookup, so a repeated try never
// starts a second, while a new attempt, named anew, never reuses the
// machine of a runner another job took); Running names the attempt's live
// machine ("" for dispatch pools, which cannot tell); Cleanup removes the
// stored config and ends the attempt's machines (only the config with
// KeepMachines), and succeeds when there is nothing left. A failure set with Fail happens at the launch, after the config
// was stored, as RunInstances failing after PutParameter does.
type Provisioner struct {
	mu       sync.Mutex
	seq      int
	requests []pool.Request
	cleanups []pool.Request
	machines []Machine
	params   map[string]string         // runner name → JIT config
	meta     map[string]pool.Parameter // runner name → its parameter's listing
	now      func() time.Time
	fail     error
	failN    int // calls still to fail; < 0: every call
}

// NewProvisioner returns a provisioner with no machines.
func NewProvisioner() *Provisioner {
	return &Provisioner{params: map[string]string{}, meta: map[string]pool.Parameter{}, now: time.Now}
}

// Fail makes the next n Provision calls fail with err at the launch (n ≤ 0:
// every call until Fail(nil, 0)).
func (p *Provisioner) Fail(err error, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail, p.failN = err, n
	if n <= 0 {
		p.failN = -1
	}
}

// Provision stores req's config and starts (or finds) the job's machine.
func (p *Provisioner) Provision(ctx context.Context, req pool.Request) (pool.Result, error) {
	if err := ctx.Err(); err != nil {
		return pool.Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, req)
	if err := req.Validate(); err != nil {
		return pool.Result{}, err
	}
	p.params[req.RunnerName] = req.JITConfig
	if p.fail != nil && p.failN != 0 {
		if p.failN > 0 {
			p.failN--
		}
		return pool.Result{}, fmt.Errorf("provision job %d: %w", req.JobID, p.fail)
	}
	if id := p.live(req); id != "" {
		p.meta[req.RunnerName] = pool.Parameter{Name: configName(req.RunnerName), InstanceID: id, ModifiedAt: p.now()}
		return pool.Result{InstanceID: id, Reused: true}, nil
	}
	p.seq++
	m := Machine{ID: fmt.Sprintf("i-%017d", p.seq), JobID: req.JobID, RunnerName: req.RunnerName,
		Pool: req.Pool.Name, Scope: req.Pool.Scope, Repo: req.Repo, LaunchedAt: p.now()}
	p.machines = append(p.machines, m)
	p.meta[req.RunnerName] = pool.Parameter{Name: configName(req.RunnerName), InstanceID: m.ID, ModifiedAt: p.now()}
	return pool.Result{InstanceID: m.ID}, nil
}

func (p *Provisioner) live(req pool.Request) string {
	for _, m := range p.machines {
		if m.JobID == req.JobID && m.RunnerName == req.RunnerName && !m.Stopped {
			return m.ID
		}
	}
	return ""
}

// Running names the job's live machine, or "" (always "" for a dispatch
// pool, whose adapter cannot tell).
func (p *Provisioner) Running(ctx context.Context, req pool.Request) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := routed(req.Pool); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Pool.Provisioner.Type == pool.ProvisionerDispatch {
		return "", nil
	}
	return p.live(req), nil
}

// routed refuses a pool of no provisioner type, as provision.Registry
// does (ErrNoProvisioner): a request must carry its pool's type.
func routed(p pool.Pool) error {
	switch p.Provisioner.Type {
	case pool.ProvisionerEC2, pool.ProvisionerDispatch:
		return nil
	}
	return fmt.Errorf("no provisioner for pool %q: provisioner type %q", p.Name, p.Provisioner.Type)
}

// Cleanup removes the runner's stored config, if any, then ends the
// attempt's machines unless req.KeepMachines.
func (p *Provisioner) Cleanup(ctx context.Context, req pool.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !pool.ValidRunnerName(req.RunnerName) {
		return fmt.Errorf("%w: runner name %q", pool.ErrInvalidRequest, req.RunnerName)
	}
	if err := routed(req.Pool); err != nil {
		return err
	}
	p.cleanups = append(p.cleanups, req)
	delete(p.params, req.RunnerName)
	delete(p.meta, req.RunnerName)
	if !req.KeepMachines {
		for i, m := range p.machines {
			if m.JobID == req.JobID && m.RunnerName == req.RunnerName {
				p.machines[i].Stopped = true
			}
		}
	}
	return nil
}

// Cleanups returns every Cleanup request so far, in order.
func (p *Provisioner) Cleanups() []pool.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pool.Request(nil), p.cleanups...)
}

// Stop ends the job's machines, as an instance that powered off.
func (p *Provisioner) Stop(jobID int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop(jobID)
}

func (p *Provisioner) stop(jobID int64) {
	for i := range p.machines {
		if p.machines[i].JobID == jobID {
			p.machines[i].Stopped = true
		}
	}
}

// Requests returns every Provision request so far, in order (JIT configs
// included: a test checks that none reached a log line).
func (p *Provisioner) Requests() []pool.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pool.Request(nil), p.requests...)
}

// Machines returns the live machines of job id.
func (p *Provisioner) Machines(jobID int64) []Machine {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Machine
	for _, m := range p.machines {
		if m.JobID == jobID && !m.Stopped {
			out = append(out, m)
		}
	}
	return out
}

// Config returns the stored JIT config of runnerName, if any.
func (p *Provisioner) Config(runnerName string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.params[runnerName]
	return c, ok
}
