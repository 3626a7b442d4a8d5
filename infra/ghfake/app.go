package ghfake

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// The routes authenticated by the App JWT rather than an installation
// token, charged to the App's own budget.
const (
	RouteApp           = "GET /app"
	RouteInstallations = "GET /app/installations"
)

// appRoute reports whether route is authenticated by the App JWT.
func appRoute(route string) bool {
	return route == RouteAccessToken || route == RouteApp || route == RouteInstallations
}

// fakeEpoch dates the App and its installations.
var fakeEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(time.RFC3339)

// Installation is an installation of the App, as GET /app/installations
// lists it. Account is the organisation's or user's login.
type Installation struct {
	ID      int64
	Account string
	// Org is true for an organisation, false for a user.
	Org bool
}

// AddInstallation lists in as one of the App's installations (GitHub's
// answer to GET /app/installations; the token endpoint accepts any id
// regardless).
func (s *Server) AddInstallation(in Installation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installs[in.ID] = in
}

// getApp answers GET /app for a valid App JWT.
func (s *Server) getApp(w http.ResponseWriter, r *http.Request) {
	if msg := s.checkJWT(bearer(r)); msg != "" {
		writeError(w, http.StatusUnauthorized, msg, docsREST)
		return
	}
	id := s.appID
	if id == 0 {
		id = 1
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "slug": "ghclaim-fake", "node_id": "A_fake" + strconv.FormatInt(id, 10),
		"owner": account(1, "octo", true, false), "name": "ghclaim (fake)", "description": "GitHub stand-in",
		"external_url": "https://example.invalid", "html_url": "https://github.com/apps/ghclaim-fake",
		"created_at": fakeEpoch, "updated_at": fakeEpoch,
		"permissions": map[string]string{"administration": "write", "actions": "read", "metadata": "read"},
		"events":      []string{"workflow_job"}, "installations_count": len(s.installations()),
	})
}

// listInstallations answers GET /app/installations for a valid App JWT:
// every installation, one page.
func (s *Server) listInstallations(w http.ResponseWriter, r *http.Request) {
	if msg := s.checkJWT(bearer(r)); msg != "" {
		writeError(w, http.StatusUnauthorized, msg, docsREST)
		return
	}
	out := []map[string]any{}
	for _, in := range s.installations() {
		target := "User"
		if in.Org {
			target = "Organization"
		}
		out = append(out, map[string]any{
			"id": in.ID, "app_id": s.appID, "app_slug": "ghclaim-fake", "target_id": in.ID + 1000, "target_type": target,
			"single_file_name": nil, "repository_selection": "all",
			"access_tokens_url": fmt.Sprintf("https://api.github.com/app/installations/%d/access_tokens", in.ID),
			"html_url":          fmt.Sprintf("https://github.com/settings/installations/%d", in.ID),
			"repositories_url":  "https://api.github.com/installation/repositories",
			"events":            []string{"workflow_job"}, "account": account(in.ID+1000, in.Account, in.Org, true),
			"permissions": map[string]string{"administration": "write", "actions": "read", "metadata": "read"},
			"created_at":  fakeEpoch, "updated_at": fakeEpoch, "suspended_by": nil, "suspended_at": nil,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) installations() []Installation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Installation, 0, len(s.installs))
	for _, in := range s.installs {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// account is a user or organisation as GitHub embeds it. An installation's
// account is described as both a simple user and an enterprise (allOf),
// so it carries the enterprise's fields too.
func account(id int64, login string, org, enterpriseFields bool) map[string]any {
	typ := "User"
	if org {
		typ = "Organization"
	}
	u := "https://api.github.com/users/" + login
	a := map[string]any{
		"login": login, "id": id, "node_id": "U_fake" + strconv.FormatInt(id, 10), "type": typ, "site_admin": false,
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(id, 10), "gravatar_id": "",
		"url": u, "html_url": "https://github.com/" + login, "followers_url": u + "/followers",
		"following_url": u + "/following{/other_user}", "gists_url": u + "/gists{/gist_id}",
		"starred_url": u + "/starred{/owner}{/repo}", "subscriptions_url": u + "/subscriptions",
		"organizations_url": u + "/orgs", "repos_url": u + "/repos", "events_url": u + "/events{/privacy}",
		"received_events_url": u + "/received_events",
	}
	if enterpriseFields {
		a["name"], a["slug"], a["created_at"], a["updated_at"] = login, login, fakeEpoch, fakeEpoch
	}
	return a
}
