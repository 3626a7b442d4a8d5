// Package pool owns runner pools: what RUNNER_POOLS says, how it is
// validated, and which pool a job's labels select.
//
// A job matches a pool when every one of the job's labels is among the
// pool's labels, compared case-insensitively (GitHub treats runner labels
// case-insensitively); the first matching pool in configuration order wins.
// A job with no labels matches nothing: GitHub never routes such a job to a
// self-hosted runner, and claiming it would start a machine nobody uses.
//
// A pool at scope "repo" registers its runners in the repository's Default
// runner group (id 1) and may name no other: runner groups are an
// organisation's or an enterprise's, and a repository has none
// (https://docs.github.com/en/actions/concepts/runners/runner-groups).
// Parse refuses another runner_group_id on such a pool at start-up, naming
// the field, rather than let GitHub refuse, or quietly ignore, the group on
// every claim of the pool (a refusal fails each of its jobs for good).
//
// This package is pure: it parses and matches values and never does I/O.
package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/shared/names"
)

// Scopes at which a JIT runner is registered.
const (
	ScopeRepo = "repo"
	ScopeOrg  = "org"
)

// Provisioner types.
const (
	ProvisionerEC2      = "ec2"
	ProvisionerDispatch = "dispatch"
)

// Purchase options of an ec2 pool (Provisioner.Capacity).
const (
	CapacityOnDemand         = "on-demand"
	CapacitySpot             = "spot"
	CapacitySpotThenOnDemand = "spot-then-on-demand"
)

// Provisioner says how a pool's machines are started.
type Provisioner struct {
	// Type is "ec2" or "dispatch".
	Type string `json:"type"`
	// LaunchTemplate is the EC2 launch template id (lt-…) or name (ec2).
	LaunchTemplate string `json:"launch_template,omitempty"`
	// LaunchTemplateVersion defaults to "$Default" (ec2).
	LaunchTemplateVersion string `json:"launch_template_version,omitempty"`
	// Subnets optionally overrides the launch template's subnet: every
	// subnet is an option of the launch, the job's own first (job id mod
	// len, so consecutive jobs spread over the zones) (ec2).
	Subnets []string `json:"subnets,omitempty"`
	// InstanceTypes optionally overrides the launch template's instance
	// type: every type is an option of the launch, preferred first (ec2).
	InstanceTypes []string `json:"instance_types,omitempty"`
	// Capacity is the purchase option: CapacityOnDemand (the default),
	// CapacitySpot, or CapacitySpotThenOnDemand (spot, and on-demand when no
	// spot option has capacity) (ec2).
	Capacity string `json:"capacity,omitempty"`
	// QueueURL is the SQS queue that pull-based hosts read (dispatch).
	QueueURL string `json:"queue_url,omitempty"`
}

// Where is the scope at which to look for a runner of p: recorded (where
// the claim registered it, kept on the job record and on its machine) when
// known, else p's scope now (records and machines from before it was
// kept). A pool whose scope an operator changed under the same name keeps
// finding the runners registered before the change where they are: looked
// for in the new scope they would be "not found", and a runner taken for
// gone has its machine ended, mid-job if it was busy.
func (p Pool) Where(recorded string) string {
	if recorded == ScopeRepo || recorded == ScopeOrg {
		return recorded
	}
	return p.Scope
}

// Pool is one entry of RUNNER_POOLS.
type Pool struct {
	Name          string   `json:"name"`
	Labels        []string `json:"labels"`
	Scope         string   `json:"scope"`
	RunnerGroupID int64    `json:"runner_group_id"`
	// AllowPublic lets jobs from public repositories use the pool. Off by
	// default: a fork's pull request would otherwise run code on our machines.
	AllowPublic bool `json:"allow_public"`
	// CheckQueued asks GitHub whether the job is still queued before
	// claiming it (one more API call per claim).
	CheckQueued bool        `json:"check_queued"`
	Provisioner Provisioner `json:"provisioner"`
	// RunnerStartGrace (a Go duration, "10m" by default) is how long a
	// claimed job may wait for its runner to take it before the reclaimer
	// checks on it: longer than the machine's boot, shorter than users wait.
	RunnerStartGrace string `json:"runner_start_grace,omitempty"`
}

// DefaultRunnerGroupID is GitHub's "Default" runner group: a pool's group
// when it names none, and the only group of a repository's runners.
const DefaultRunnerGroupID = 1

// Bounds of a pool's runner_start_grace.
const (
	MinRunnerStartGrace = time.Minute
	MaxRunnerStartGrace = 6 * time.Hour
)

// StartGrace is the pool's runner-start grace; zero when not set (the
// store then applies job.DefaultRunnerStartGrace). Validate has checked it.
func (p Pool) StartGrace() time.Duration {
	d, _ := time.ParseDuration(p.RunnerStartGrace)
	return d
}

// Parse reads RUNNER_POOLS (a JSON list), fills defaults (scope "repo",
// runner group 1, DefaultRunnerGroupID) and validates every pool. Errors name the pool and field.
func Parse(text string) ([]Pool, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("no pools: want a JSON list with at least one pool")
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var pools []Pool
	if err := dec.Decode(&pools); err != nil {
		return nil, fmt.Errorf("not a JSON list of pools: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		// A list closed too early ("[{a}], {b}]") would keep a and drop b.
		return nil, fmt.Errorf("not a JSON list of pools: text after the list's closing bracket at offset %d", dec.InputOffset())
	}
	if len(pools) == 0 {
		return nil, errors.New("no pools: want a JSON list with at least one pool")
	}
	seen := map[string]int{} // lower-cased name → index of its first pool
	for i := range pools {
		p := &pools[i]
		if p.Scope == "" {
			p.Scope = ScopeRepo
		}
		if p.RunnerGroupID == 0 {
			p.RunnerGroupID = DefaultRunnerGroupID
		}
		if p.Provisioner.Type == ProvisionerEC2 && p.Provisioner.LaunchTemplateVersion == "" {
			p.Provisioner.LaunchTemplateVersion = "$Default"
		}
		if p.Provisioner.Type == ProvisionerEC2 && p.Provisioner.Capacity == "" {
			p.Provisioner.Capacity = CapacityOnDemand
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("pool %d (%q): %w", i, p.Name, err)
		}
		// Names are compared without case: the janitor reads a runner's
		// pool back from its name as GitHub does (without case), so
		// "Linux" and "linux" would be one pool to it and two to the
		// claimer.
		if first, ok := seen[strings.ToLower(p.Name)]; ok {
			if pools[first].Name == p.Name {
				return nil, fmt.Errorf("pool %d (%q): name used twice", i, p.Name)
			}
			return nil, fmt.Errorf("pool %d (%q): name used twice, by pool %d as %q (pool names are compared without case)", i, p.Name, first, pools[first].Name)
		}
		seen[strings.ToLower(p.Name)] = i
	}
	return pools, nil
}

// Validate checks one pool after defaults are filled.
func (p Pool) Validate() error {
	if p.RunnerStartGrace != "" {
		d, err := time.ParseDuration(p.RunnerStartGrace)
		if err != nil || d < MinRunnerStartGrace || d > MaxRunnerStartGrace {
			return fmt.Errorf("runner_start_grace %q: want a duration from %s to %s", p.RunnerStartGrace, MinRunnerStartGrace, MaxRunnerStartGrace)
		}
	}
	if !names.Safe(p.Name, 40, true) {
		return fmt.Errorf("name %q: want 1-40 letters, digits, '-', '_' or '.'", p.Name)
	}
	if len(p.Labels) == 0 {
		return errors.New("labels: want at least one label")
	}
	if len(p.Labels) > MaxLabels {
		return fmt.Errorf("labels: %d labels, GitHub registers a runner with at most %d", len(p.Labels), MaxLabels)
	}
	seen := make(map[string]string, len(p.Labels))
	for _, l := range p.Labels {
		if strings.TrimSpace(l) == "" {
			return errors.New("labels: empty label")
		}
		if strings.TrimSpace(l) != l {
			// GitHub's runs-on labels are never padded: "linux " would
			// match no job, and the pool's jobs would be ignored silently.
			return fmt.Errorf("labels: %q has spaces around it", l)
		}
		// GitHub compares labels without case, so "Linux" and "linux"
		// are one label given twice to generate-jitconfig, whose answer
		// to that no document gives: refused here, not on every claim.
		if first, ok := seen[strings.ToLower(l)]; ok {
			return fmt.Errorf("labels: %q and %q are one label (GitHub compares labels without case)", first, l)
		}
		seen[strings.ToLower(l)] = l
	}
	if p.Scope != ScopeRepo && p.Scope != ScopeOrg {
		return fmt.Errorf("scope %q: want %q or %q", p.Scope, ScopeRepo, ScopeOrg)
	}
	if p.RunnerGroupID < 0 {
		return fmt.Errorf("runner_group_id %d: want a positive id", p.RunnerGroupID)
	}
	if p.Scope == ScopeRepo && p.RunnerGroupID != DefaultRunnerGroupID {
		return fmt.Errorf("runner_group_id %d: a repo-scoped pool's runners are in the Default group (%d); runner groups are an organisation's: use scope %q, or drop runner_group_id",
			p.RunnerGroupID, DefaultRunnerGroupID, ScopeOrg)
	}
	switch p.Provisioner.Type {
	case ProvisionerEC2:
		if p.Provisioner.LaunchTemplate == "" {
			return errors.New("provisioner.launch_template: required for type ec2")
		}
		if !validTemplateVersion(p.Provisioner.LaunchTemplateVersion) {
			// EC2 refuses any other (InvalidLaunchTemplateVersion…) on
			// every launch of the pool, each claim failing its job.
			return fmt.Errorf("provisioner.launch_template_version %q: want a version number, $Latest or $Default", p.Provisioner.LaunchTemplateVersion)
		}
		switch p.Provisioner.Capacity {
		case "", CapacityOnDemand, CapacitySpot, CapacitySpotThenOnDemand:
		default:
			return fmt.Errorf("provisioner.capacity %q: want %q, %q or %q",
				p.Provisioner.Capacity, CapacityOnDemand, CapacitySpot, CapacitySpotThenOnDemand)
		}
		// Every subnet × type is one option of the launch's fleet, and EC2
		// refuses a fleet with two alike (InvalidFleetConfig: duplicate
		// instance pools) on every launch of the pool.
		if err := distinct("provisioner.subnets", p.Provisioner.Subnets); err != nil {
			return err
		}
		if err := distinct("provisioner.instance_types", p.Provisioner.InstanceTypes); err != nil {
			return err
		}
	case ProvisionerDispatch:
		if p.Provisioner.QueueURL == "" {
			return errors.New("provisioner.queue_url: required for type dispatch")
		}
	default:
		return fmt.Errorf("provisioner.type %q: want %q or %q", p.Provisioner.Type, ProvisionerEC2, ProvisionerDispatch)
	}
	return nil
}

// MaxLabels is the most labels GitHub's generate-jitconfig takes (its
// OpenAPI description: labels maxItems 100); more is a 422 on every claim.
const MaxLabels = 100

// validTemplateVersion reports whether v is what EC2 takes as a launch
// template version: $Latest, $Default or a version number (1 to 18 digits,
// no leading zero).
func validTemplateVersion(v string) bool {
	if v == "$Latest" || v == "$Default" {
		return true
	}
	if len(v) == 0 || len(v) > 18 || v[0] == '0' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// distinct refuses a blank, padded or repeated entry of list, naming
// field: EC2 knows no subnet or instance type with spaces around it.
func distinct(field string, list []string) error {
	seen := make(map[string]bool, len(list))
	for _, v := range list {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s: empty entry", field)
		}
		if strings.TrimSpace(v) != v {
			return fmt.Errorf("%s: %q has spaces around it", field, v)
		}
		if seen[v] {
			return fmt.Errorf("%s: %q listed twice (EC2 refuses a fleet with two alike options)", field, v)
		}
		seen[v] = true
	}
	return nil
}

// Match returns the first pool whose labels contain every one of the job's
// labels (case-insensitively).
func Match(pools []Pool, jobLabels []string) (Pool, bool) {
	if len(jobLabels) == 0 {
		return Pool{}, false
	}
	for _, p := range pools {
		if covers(p.Labels, jobLabels) {
			return p, true
		}
	}
	return Pool{}, false
}

// RepoScoped returns the pools that register runners at the repository
// (scope repo), in order: the ones that can serve a user account's
// repositories.
func RepoScoped(pools []Pool) []Pool {
	var out []Pool
	for _, p := range pools {
		if p.Scope == ScopeRepo {
			out = append(out, p)
		}
	}
	return out
}

// Find returns the pool named name.
func Find(pools []Pool, name string) (Pool, bool) {
	for _, p := range pools {
		if p.Name == name {
			return p, true
		}
	}
	return Pool{}, false
}

func covers(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if strings.EqualFold(h, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
