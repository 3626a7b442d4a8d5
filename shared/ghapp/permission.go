package ghapp

import (
	"maps"
	"slices"
)

// EventWorkflowJob is the one webhook event ghclaim needs an installation
// to deliver.
const EventWorkflowJob = "workflow_job"

// Needs returns the App permissions an installation must grant for the
// calls made for pools of the given scopes (ScopeRepo, ScopeOrg), by name
// and level. Source: GitHub's "Permissions required for GitHub Apps":
// generate-jitconfig and deleting a runner need write, listing runners
// read, of "administration" (a repository) or
// "organization_self_hosted_runners" (an organisation); a job's status
// (GET /repos/{owner}/{repo}/actions/jobs/{id}, asked for either scope)
// and the workflow_job event need "actions" read. Metadata read (a
// repository's visibility and owner, GET /repos/{owner}/{repo}) is
// granted to every App and not listed. A missing one is GitHub's 403 "Resource
// not accessible by integration" on every job of that kind, classed
// non_retryable: this is what lets doctor say so before the first job.
func Needs(scopes ...string) map[string]string {
	out := map[string]string{"actions": "read"}
	for _, s := range scopes {
		switch s {
		case ScopeRepo:
			out["administration"] = "write"
		case ScopeOrg:
			out["organization_self_hosted_runners"] = "write"
		}
	}
	return out
}

var permissionLevel = map[string]int{"read": 1, "write": 2, "admin": 3}

// Lacks returns, sorted, "name:level" for each permission of need that
// granted does not reach.
func Lacks(granted, need map[string]string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(need)) {
		if permissionLevel[granted[name]] < permissionLevel[need[name]] {
			out = append(out, name+":"+need[name])
		}
	}
	return out
}
