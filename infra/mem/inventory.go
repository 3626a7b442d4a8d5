package mem

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/shared/pool"
)

// The janitor's listing of what provisioning left (shared/provision's
// Leftovers over EC2 and SSM): live machines, stored configs named
// /ghclaim/runners/<runner name> with the machine allowed to read them.

const configPrefix = "/ghclaim/runners/"

func configName(runnerName string) string { return configPrefix + runnerName }

// SetClock dates machines and stored configs (time.Now by default).
func (p *Provisioner) SetClock(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// PutConfig stores a config for runnerName readable by instanceID ("":
// untagged) last written at, as a leftover a test plants.
func (p *Provisioner) PutConfig(runnerName, instanceID string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.params[runnerName] = "planted"
	p.meta[runnerName] = pool.Parameter{Name: configName(runnerName), InstanceID: instanceID, ModifiedAt: at}
}

// LiveMachines returns every machine not stopped.
func (p *Provisioner) LiveMachines(ctx context.Context) ([]pool.Machine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pool.Machine
	for _, m := range p.machines {
		if !m.Stopped {
			out = append(out, pool.Machine{ID: m.ID, JobID: m.JobID, Pool: m.Pool, Repo: m.Repo,
				RunnerName: m.RunnerName, Scope: m.Scope, LaunchedAt: m.LaunchedAt})
		}
	}
	return out, nil
}

// Configs returns every stored config last modified before before (one
// with no time recorded counts as old), without values.
func (p *Provisioner) Configs(ctx context.Context, before time.Time) (pool.ConfigList, error) {
	if err := ctx.Err(); err != nil {
		return pool.ConfigList{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pool.Parameter
	for name := range p.params {
		m, ok := p.meta[name]
		if !ok {
			m = pool.Parameter{Name: configName(name)}
		}
		if !m.ModifiedAt.Before(before) && !m.ModifiedAt.IsZero() {
			continue
		}
		out = append(out, m)
	}
	return pool.ConfigList{Parameters: out}, nil
}

// DeleteConfig deletes a stored config by its parameter name; one already
// gone is success.
func (p *Provisioner) DeleteConfig(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	runner, ok := strings.CutPrefix(name, configPrefix)
	if !ok || !pool.ValidRunnerName(runner) {
		return fmt.Errorf("%w: parameter %q is not a runner config", pool.ErrInvalidRequest, name)
	}
	delete(p.params, runner)
	delete(p.meta, runner)
	return nil
}
