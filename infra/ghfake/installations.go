package ghfake

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Routes of the App's installations: the list (App JWT) and an
// installation's repositories (installation token).
const (
	RouteInstallations = "GET /app/installations"
	RouteInstallRepos  = "GET /installation/repositories"
	docsInstallations  = "https://docs.github.com/rest/apps/apps#list-installations-for-the-authenticated-app"
)

// installationOf is one installation as SetInstallation made it.
type installationOf struct {
	id    int64
	owner string
	org   bool
	repos []string
	perms map[string]string // nil: DefaultPermissions
}

// SetInstallation creates or replaces an installation of the App on owner
// (an organisation when org) with access to repos (names without owner).
// Only installations set here are listed; tokens are still minted for any id.
func (s *Server) SetInstallation(id int64, owner string, org bool, repos ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.installs == nil {
		s.installs = map[int64]installationOf{}
	}
	s.installs[id] = installationOf{id: id, owner: owner, org: org, repos: slices.Clone(repos)}
}

// selection is the installation's repository_selection, the same in the
// installation list and in its tokens: "selected" when it was given
// repositories, "all" otherwise (an installation SetInstallation made
// without repositories, or one the fake was never told about, reaches
// every repository of its account: see reaches). The two answers
// disagreed ("selected" in the list, "all" in every token).
func (in installationOf) selection() string {
	if len(in.repos) > 0 {
		return "selected"
	}
	return "all"
}

// covers reports whether a token of installation inst may reach path: an
// /orgs/{org}/… route only on the installation's own organisation, a
// /repos/{owner}/{repo}/… route only in its account and, when it was given
// a repository selection, only there, and only where the selection held
// when the token was created reached too (scope): a repository added to
// the installation since is out of the token's reach. An installation the
// fake was never told about (a test that only issues tokens) covers
// everything. s.mu is held.
func (s *Server) covers(inst int64, scope *installationOf, path string) bool {
	in, ok := s.installs[inst]
	if !ok {
		return true
	}
	if scope != nil && !scope.reaches(path) {
		return false
	}
	return in.reaches(path)
}

// reaches is covers for the installation as in holds it.
func (in installationOf) reaches(path string) bool {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "orgs":
		return in.org && strings.EqualFold(parts[1], in.owner)
	case len(parts) >= 3 && parts[0] == "repos":
		if !strings.EqualFold(parts[1], in.owner) {
			return false
		}
		if len(in.repos) == 0 {
			return true
		}
		return slices.ContainsFunc(in.repos, func(r string) bool { return strings.EqualFold(r, parts[2]) })
	}
	return true
}

// page cuts all to the request's per_page/page and sets GitHub's Link
// header when the list spans more than one page: rel="prev" and "first"
// on every page after the first, "next" and "last" on every page before
// the last, in GitHub's order (prev, next, last, first: "Using pagination
// in the REST API", https://docs.github.com/rest/using-the-rest-api/using-pagination-in-the-rest-api),
// each the request's own URL (under the server's path prefix) with page
// and per_page set.
func page[T any](w http.ResponseWriter, r *http.Request, all []T) []T {
	q := r.URL.Query()
	perPage, n := min(max(atoiDefault(q.Get("per_page"), 30), 1), 100), max(atoiDefault(q.Get("page"), 1), 1)
	start := min((n-1)*perPage, len(all))
	end := min(start+perPage, len(all))
	last := max((len(all)+perPage-1)/perPage, 1)
	prefix, _ := r.Context().Value(prefixKey{}).(string)
	link := func(p int, rel string) string {
		u := *r.URL
		v := u.Query()
		v.Set("page", fmt.Sprint(p))
		v.Set("per_page", fmt.Sprint(perPage))
		u.RawQuery = v.Encode()
		return fmt.Sprintf(`<http://%s%s%s>; rel=%q`, r.Host, prefix, u.RequestURI(), rel)
	}
	var links []string
	if n > 1 {
		links = append(links, link(n-1, "prev"))
	}
	if n < last {
		links = append(links, link(n+1, "next"), link(last, "last"))
	}
	if n > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	return append([]T{}, all[start:end]...)
}

func (s *Server) listInstallations(w http.ResponseWriter, r *http.Request) {
	if msg := s.checkJWT(bearer(r)); msg != "" {
		writeError(w, http.StatusUnauthorized, msg, docsREST)
		return
	}
	s.mu.Lock()
	var all []map[string]any
	for _, in := range s.sortedInstalls() {
		typ := "User"
		if in.org {
			typ = "Organization"
		}
		// GitHub's full shape (checked against its description): the
		// account is described as both a user and an enterprise. A
		// suspended installation names when and by whom (a user of the
		// account, here <owner>-admin); others carry null for both.
		var suspendedAt, suspendedBy any
		if at, ok := s.suspended[in.id]; ok {
			suspendedAt, suspendedBy = at.Format(time.RFC3339), account(in.id+3000, in.owner+"-admin", false, false)
		}
		all = append(all, map[string]any{
			"id": in.id, "app_id": s.appID, "app_slug": "ghclaim-fake", "target_id": in.id + 1000, "target_type": typ,
			"single_file_name": nil, "repository_selection": in.selection(),
			"access_tokens_url": fmt.Sprintf("https://api.github.com/app/installations/%d/access_tokens", in.id),
			"html_url":          fmt.Sprintf("https://github.com/settings/installations/%d", in.id),
			"repositories_url":  "https://api.github.com/installation/repositories",
			"events":            []string{"workflow_job"}, "account": account(in.id+1000, in.owner, in.org, true),
			"permissions": s.permissionsOf(in.id),
			"created_at":  fakeEpoch, "updated_at": fakeEpoch, "suspended_by": suspendedBy, "suspended_at": suspendedAt,
		})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, page(w, r, all))
}

func (s *Server) listInstallRepos(w http.ResponseWriter, r *http.Request) {
	inst, _ := r.Context().Value(ctxKey{}).(int64)
	s.mu.Lock()
	in := s.installs[inst]
	var all []map[string]any
	for _, name := range in.repos {
		all = append(all, restRepository(s.repoID(in.owner, name), in.owner, name, in.org))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(all), "repositories": page(w, r, all)})
}

// sortedInstalls returns the installations by id. Callers hold s.mu.
func (s *Server) sortedInstalls() []installationOf {
	out := make([]installationOf, 0, len(s.installs))
	for _, in := range s.installs {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b installationOf) int { return cmp.Compare(a.id, b.id) })
	return out
}

// restRepository is a repository as GitHub's REST answers describe it (the
// "repository" schema: every required field, checked against GitHub's
// description in description_test.go).
func restRepository(id int64, owner, name string, org bool) map[string]any {
	full := owner + "/" + name
	api := "https://api.github.com/repos/" + full
	r := map[string]any{
		"id": id, "node_id": fmt.Sprintf("R_fake%d", id), "name": name, "full_name": full,
		"owner": account(id+2000, owner, org, false), "private": true, "fork": false, "archived": false, "disabled": false,
		"description": nil, "homepage": nil, "language": nil, "mirror_url": nil, "license": nil,
		"html_url": "https://github.com/" + full, "url": api, "clone_url": "https://github.com/" + full + ".git",
		"git_url": "git://github.com/" + full + ".git", "ssh_url": "git@github.com:" + full + ".git", "svn_url": "https://github.com/" + full,
		"default_branch": "main", "forks": 0, "forks_count": 0, "open_issues": 0, "open_issues_count": 0, "size": 0,
		"stargazers_count": 0, "watchers": 0, "watchers_count": 0,
		"has_downloads": true, "has_issues": true, "has_projects": true, "has_wiki": true, "has_pages": false,
		"pushed_at": fakeEpoch, "created_at": fakeEpoch, "updated_at": fakeEpoch,
	}
	for _, k := range []string{"contributors", "deployments", "downloads", "events", "forks", "hooks", "languages", "merges",
		"stargazers", "subscribers", "subscription", "tags", "teams"} {
		r[k+"_url"] = api + "/" + k
	}
	for k, tmpl := range map[string]string{
		"archive": "/{archive_format}{/ref}", "assignees": "/assignees{/user}", "blobs": "/git/blobs{/sha}",
		"branches": "/branches{/branch}", "collaborators": "/collaborators{/collaborator}", "comments": "/comments{/number}",
		"commits": "/commits{/sha}", "compare": "/compare/{base}...{head}", "contents": "/contents/{+path}",
		"git_commits": "/git/commits{/sha}", "git_refs": "/git/refs{/sha}", "git_tags": "/git/tags{/sha}",
		"issue_comment": "/issues/comments{/number}", "issue_events": "/issues/events{/number}", "issues": "/issues{/number}",
		"keys": "/keys{/key_id}", "labels": "/labels{/name}", "milestones": "/milestones{/number}",
		"notifications": "/notifications{?since,all,participating}", "pulls": "/pulls{/number}", "releases": "/releases{/id}",
		"statuses": "/statuses/{sha}", "trees": "/git/trees{/sha}",
	} {
		r[k+"_url"] = api + tmpl
	}
	return r
}
