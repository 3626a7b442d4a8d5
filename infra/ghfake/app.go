package ghfake

import (
	"maps"
	"net/http"
	"strconv"
	"time"
)

// RouteApp is the App itself, authenticated by the App JWT and charged to
// the App's own budget (appRoute).
const RouteApp = "GET /app"

// fakeEpoch dates the App and its installations.
var fakeEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(time.RFC3339)

// Installation is an installation of the App, as GET /app/installations
// lists it. Account is the organisation's or user's login.
type Installation struct {
	ID      int64
	Account string
	// Org is true for an organisation, false for a user.
	Org bool
	// Permissions are what the owner granted (nil: DefaultPermissions):
	// its tokens carry them and the routes enforce them (permission.go).
	Permissions map[string]string
}

// AddInstallation lists in as one of the App's installations (GitHub's
// answer to GET /app/installations; the token endpoint accepts any id
// regardless): SetInstallation with no repositories.
func (s *Server) AddInstallation(in Installation) {
	s.SetInstallation(in.ID, in.Account, in.Org)
	if in.Permissions != nil {
		s.mu.Lock()
		i := s.installs[in.ID]
		i.perms = maps.Clone(in.Permissions)
		s.installs[in.ID] = i
		s.mu.Unlock()
	}
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
		"permissions": DefaultPermissions(),
		"events":      []string{"workflow_job"}, "installations_count": s.installationCount(),
	})
}

func (s *Server) installationCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.installs)
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
