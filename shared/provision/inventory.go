package provision

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// The janitor's view of what the EC2 adapter leaves behind: every live
// machine it launched (by the TagJobID tag) and every JIT config parameter
// under ParameterPrefix. Parameters are listed with DescribeParameters,
// never GetParametersByPath, which would read the JIT configs themselves;
// the instance each may be read by comes from its TagInstanceARN tag
// (ListTagsForResource, one call per parameter; they live minutes, so few
// exist at once).

// Inventory is the part of the EC2 and SSM APIs the janitor's listing uses.
type Inventory interface {
	DescribeInstances(ctx context.Context, in *ec2api.DescribeInstancesInput) (*ec2api.DescribeInstancesOutput, error)
}

// Catalog is the part of the SSM API the janitor's listing uses.
type Catalog interface {
	DescribeParameters(ctx context.Context, params *ssmapi.DescribeParametersInput) (*ssmapi.DescribeParametersOutput, error)
	ListTagsForResource(ctx context.Context, params *ssmapi.ListTagsForResourceInput) (*ssmapi.ListTagsForResourceOutput, error)
	DeleteParameter(ctx context.Context, params *ssmapi.DeleteParameterInput) (*ssmapi.DeleteParameterOutput, error)
}

var (
	_ Inventory = (*ec2api.Client)(nil)
	_ Catalog   = (*ssmapi.Client)(nil)
)

// Leftovers lists the EC2 adapter's machines and parameters for the janitor.
// Stack (GHCLAIM_STACK) scopes both lists to one deployment: what another
// stack tagged is left out (OfStack), so its janitor never counts another
// stack's machine as an unknown job's, nor a parameter whose machine it
// cannot see as orphaned. Machines and parameters must be scoped alike:
// a parameter is kept only while its machine is listed.
type Leftovers struct {
	Instances  Inventory
	Parameters Catalog
	Stack      string
}

// LiveMachines returns every pending or running instance tagged TagJobID
// of l's stack.
func (l Leftovers) LiveMachines(ctx context.Context) ([]pool.Machine, error) {
	in := &ec2api.DescribeInstancesInput{Filters: []ec2api.Filter{
		{Name: "tag-key", Values: []string{TagJobID}},
		{Name: "instance-state-name", Values: []string{ec2api.StatePending, ec2api.StateRunning}},
	}}
	var out []pool.Machine
	for {
		page, err := l.Instances.DescribeInstances(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list machines: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if !OfStack(tagValue(i.Tags, TagStack), l.Stack) {
					continue
				}
				m := pool.Machine{ID: i.InstanceID, LaunchedAt: i.LaunchTime}
				for _, t := range i.Tags {
					switch v := t.Value; t.Key {
					case TagJobID:
						m.JobID, _ = strconv.ParseInt(v, 10, 64)
					case TagPool:
						m.Pool = v
					case TagRepo:
						m.Repo = v
					case TagRunnerName:
						m.RunnerName = v
					case TagScope:
						m.Scope = v
					}
				}
				if m.ID != "" && m.JobID > 0 {
					out = append(out, m)
				}
			}
		}
		if page.NextToken == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// Configs returns every parameter under ParameterPrefix of l's stack last
// modified before before, without values. A younger one is left out
// unread: its owner (a machine booting, a claim) may still need it, and
// its tags cost a call each (a burst keeps hundreds in flight). One whose
// tags cannot be read for the account's request rate (Parameter Store's,
// shared with booting machines) is left out too, for the next listing,
// and named in Unread so that the pass says it did not finish: a
// throttle once failed the whole listing, and no leftover was deleted.
func (l Leftovers) Configs(ctx context.Context, before time.Time) (pool.ConfigList, error) {
	in := &ssmapi.DescribeParametersInput{ParameterFilters: []ssmapi.ParameterStringFilter{
		{Key: "Path", Option: "OneLevel", Values: []string{strings.TrimSuffix(ParameterPrefix, "/")}},
	}, MaxResults: configsPage}
	var out pool.ConfigList
	for {
		page, err := l.Parameters.DescribeParameters(ctx, in)
		if err != nil {
			return pool.ConfigList{}, fmt.Errorf("list parameters: %w", err)
		}
		for _, p := range page.Parameters {
			name := p.Name
			if !strings.HasPrefix(name, ParameterPrefix) || !p.LastModifiedDate.Before(before) {
				continue
			}
			tags, err := l.Parameters.ListTagsForResource(ctx, &ssmapi.ListTagsForResourceInput{
				ResourceType: ssmapi.ResourceTypeParameter, ResourceID: name})
			switch {
			case ssmapi.IsCode(err, ssmapi.CodeInvalidResourceID):
				continue // deleted meanwhile (read by its machine)
			case throttled(err):
				out.Unread = append(out.Unread, name)
				continue
			case err != nil:
				return pool.ConfigList{}, fmt.Errorf("list parameters: tags of %s: %w", name, err)
			}
			par := pool.Parameter{Name: name, ModifiedAt: p.LastModifiedDate.Time}
			stack := ""
			for _, t := range tags.TagList {
				switch v := t.Value; t.Key {
				case TagInstanceARN:
					par.InstanceID = v[strings.LastIndex(v, "/")+1:]
				case TagStack:
					stack = v
				}
			}
			if OfStack(stack, l.Stack) {
				out.Parameters = append(out.Parameters, par)
			}
		}
		if page.NextToken == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// configsPage is the largest page DescribeParameters gives (MaxResults
// 1-50; unset, a page holds 10): each call spends Parameter Store's
// account-wide rate. A page may still hold fewer, even none, with a
// NextToken: the listing follows the token, not the count.
const configsPage = 50

// DeleteConfig deletes a parameter under ParameterPrefix; one already gone
// is success.
func (l Leftovers) DeleteConfig(ctx context.Context, name string) error {
	if !strings.HasPrefix(name, ParameterPrefix) || !pool.ValidRunnerName(strings.TrimPrefix(name, ParameterPrefix)) {
		return fmt.Errorf("%w: parameter %q is not a runner config", ErrInvalidRequest, name)
	}
	_, err := l.Parameters.DeleteParameter(ctx, &ssmapi.DeleteParameterInput{Name: name})
	if err != nil && !ssmapi.IsCode(err, ssmapi.CodeParameterNotFound) {
		return fmt.Errorf("delete parameter %s: %w", name, err)
	}
	return nil
}
