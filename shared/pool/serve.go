package pool

import (
	"fmt"
	"strings"
)

// Repository is what the serving rule needs to know of a job's
// repository, as GitHub describes it (a webhook payload's repository, or
// GET /repos/{owner}/{repo}).
type Repository struct {
	// FullName is "owner/name"; it only names the repository in reasons.
	FullName string
	// Public is IsPublic of GitHub's private flag and visibility.
	Public bool
	// UserOwned is true when the owner is a user account (owner.type
	// "User"), which has no organisation runners.
	UserOwned bool
}

// Serve picks the pool that serves a job with labels in repo, or says why
// no pool does (why is "" when p serves it). It is the one rule of "a job
// we serve", for the webhook that records the job and for the claimer that
// resolves it again when the recorded pool left RUNNER_POOLS or no longer
// serves the labels:
//   - the first pool whose labels contain every job label (Match);
//   - a pool that registers runners at the organisation cannot serve a
//     user account's repository (a user has no organisation: every claim
//     would end in GitHub's 404), so the first repository-scoped pool that
//     matches serves it instead, if any;
//   - a public repository only in a pool that allows public repositories
//     (a fork's pull request would otherwise run code on our machines).
//
// The owner allow-list (ALLOWED_OWNERS) is not part of it: it is the
// webhook's configuration, checked there before this rule.
func Serve(pools []Pool, labels []string, repo Repository) (p Pool, why string) {
	p, ok := Match(pools, labels)
	if !ok {
		return Pool{}, fmt.Sprintf("no pool matches labels [%s]", strings.Join(labels, ", "))
	}
	if p.Scope == ScopeOrg && repo.UserOwned {
		q, ok := Match(RepoScoped(pools), labels)
		if !ok {
			owner, _, _ := strings.Cut(repo.FullName, "/")
			return Pool{}, fmt.Sprintf("pool %s registers runners at the organisation, and %s is a user account", p.Name, owner)
		}
		p = q
	}
	if repo.Public && !p.AllowPublic {
		return Pool{}, fmt.Sprintf("repository %s is public and pool %s does not allow public repositories", repo.FullName, p.Name)
	}
	return p, ""
}

// IsPublic follows GitHub: visibility ("public", "private", "internal")
// when present, else the private flag; with neither the repository counts
// as public, so the public-repo policy errs on the side of refusing. An
// internal repository (visible to an enterprise's members only) is not
// public.
func IsPublic(private *bool, visibility *string) bool {
	if visibility != nil && *visibility != "" {
		return strings.EqualFold(*visibility, "public")
	}
	if private != nil {
		return !*private
	}
	return true
}
