package ghapp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// The janitor's reads: which installations the App has, which repositories
// an installation covers, and every runner of a scope. Each page is one
// GitHub call; none retries.

// Installation is one installation of the App: its id and the account
// (organisation or user) it is installed on.
type Installation struct {
	ID    int64
	Owner string
	// Org is true for an organisation account: only there can org-scope
	// runners exist.
	Org bool
	// Permissions are what the account's owner granted, by name and level
	// ("administration": "write"), and Events the webhook events the
	// installation delivers: an App changed after it was installed keeps
	// the old ones until the owner accepts the new.
	Permissions map[string]string
	Events      []string
	// SuspendedAt is when the account's owner suspended the installation
	// (zero when it is not), and SuspendedBy who did: GitHub refuses a
	// suspended installation's token exchange (403), so none of its jobs
	// can be claimed until it is unsuspended.
	SuspendedAt time.Time
	SuspendedBy string
}

// Installations lists the App's installations (GET /app/installations,
// paged by 100), authenticated by an App JWT: it spends the App's own
// budget, not an installation's.
func (c *Client) Installations(ctx context.Context) ([]Installation, error) {
	gh := c.app()
	var out []Installation
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := gh.Apps.ListInstallations(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list installations: %w", err)
		}
		for _, in := range page {
			out = append(out, Installation{
				ID:          in.GetID(),
				Owner:       in.GetAccount().GetLogin(),
				Org:         strings.EqualFold(in.GetTargetType(), "Organization"),
				Permissions: permissionMap(in.GetPermissions()),
				Events:      in.Events,
				SuspendedAt: in.GetSuspendedAt().Time,
				SuspendedBy: in.GetSuspendedBy().GetLogin(),
			})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// Repositories lists the names (without owner) of the repositories an
// installation can reach (GET /installation/repositories, paged by 100).
func (c *Client) Repositories(ctx context.Context, installationID int64) ([]string, error) {
	gh, err := c.client(installationID)
	if err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	var out []string
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := gh.Apps.ListRepos(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list repositories of installation %d: %w", installationID, err)
		}
		for _, r := range page.Repositories {
			out = append(out, r.GetName())
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// ListRunners returns every runner registered in the scope
// (GET …/actions/runners, paged by 100).
func (c *Client) ListRunners(ctx context.Context, installationID int64, scope, owner, repo string) ([]Runner, error) {
	if err := checkScope(scope, owner, repo); err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	gh, err := c.client(installationID)
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	var out []Runner
	opts := &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		var rs *github.Runners
		var resp *github.Response
		if scope == ScopeOrg {
			rs, resp, err = gh.Actions.ListOrganizationRunners(ctx, owner, opts)
		} else {
			rs, resp, err = gh.Actions.ListRunners(ctx, owner, repo, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("list runners in %s: %w", where(scope, owner, repo), err)
		}
		for _, r := range rs.Runners {
			out = append(out, Runner{ID: r.GetID(), Name: r.GetName(), Status: r.GetStatus(), Busy: r.GetBusy()})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// permissionMap turns go-github's struct of permissions into GitHub's own
// names and levels (its JSON), so a permission go-github adds later needs
// no change here.
func permissionMap(p *github.InstallationPermissions) map[string]string {
	out := map[string]string{}
	if p == nil {
		return out
	}
	b, err := json.Marshal(p)
	if err != nil {
		return out
	}
	_ = json.Unmarshal(b, &out)
	return out
}
