package app_test

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/ghclaim/ghclaim/infra/app"
	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// docsPermission is what GitHub says an installation token needs for one
// REST route: the permission and its level; "" for a route that takes no
// installation permission (the App's own routes authenticate by JWT, the
// manifest conversion by nothing, GET /installation/repositories answers
// any installation token).
//
// Source: GitHub's "Permissions required for GitHub Apps", whose data is
// github/docs src/github-apps/data/fpt-2022-11-28/server-to-server-permissions.json
// (sections organization_self_hosted_runners, administration, actions,
// metadata), and the JWT notes of @octokit/openapi 23.0.2's api.github.com document.
// Written down here, not derived from ghclaim's code, so that the test
// compares the manifest with GitHub, not with itself.
type docsPermission struct{ name, access string }

var routePermissions = map[string]docsPermission{
	ghfake.RouteRepoJIT:          {"administration", "write"},
	ghfake.RouteRepoRunners:      {"administration", "read"},
	ghfake.RouteRepoRunner:       {"administration", "read"},
	ghfake.RouteRepoDeleteRunner: {"administration", "write"},
	ghfake.RouteOrgJIT:           {"organization_self_hosted_runners", "write"},
	ghfake.RouteOrgRunners:       {"organization_self_hosted_runners", "read"},
	ghfake.RouteOrgRunner:        {"organization_self_hosted_runners", "read"},
	ghfake.RouteOrgDeleteRunner:  {"organization_self_hosted_runners", "write"},
	ghfake.RouteJob:              {"actions", "read"},
	ghfake.RouteRepo:             {"metadata", "read"}, // section metadata: "Get a repository"
	ghfake.RouteInstallRepos:     {},
	// App JWT or unauthenticated: no installation permission.
	ghfake.RouteAccessToken:        {},
	ghfake.RouteApp:                {},
	ghfake.RouteInstallations:      {},
	ghfake.RouteDeliveries:         {},
	ghfake.RouteDelivery:           {},
	ghfake.RouteRedeliver:          {},
	ghfake.RouteManifestConversion: {},
}

// eventPermissions is what subscribing to an event needs. Source: the
// workflow-job-* summaries of @octokit/openapi-webhooks 12.1.0 ("To
// subscribe to this event, a GitHub App must have at least read-level
// access for the "Actions" repository permission").
var eventPermissions = map[string]docsPermission{
	"workflow_job": {"actions", "read"},
}

var level = map[string]int{"": 0, "read": 1, "write": 2, "admin": 3}

// vendored is the slice of GitHub's REST description the stand-in is
// checked against: the routes ghclaim calls (gen.mjs's OPERATIONS) and
// the app-permissions schema.
type vendored struct {
	Responses map[string]json.RawMessage `json:"x-responses"`
	Defs      struct {
		AppPermissions struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"app-permissions"`
	} `json:"$defs"`
}

func loadVendored(t *testing.T) vendored {
	t.Helper()
	b, err := os.ReadFile("../ghfake/openapi/rest.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vendored
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestManifestCoversEveryCall: the App make app registers can make every
// REST call ghclaim makes and receive every event it subscribes to. A
// permission missing from the manifest fails every job of that kind
// non_retryable (403 "Resource not accessible by integration") in
// production only: the stand-in and the other tests cannot see it.
func TestManifestCoversEveryCall(t *testing.T) {
	t.Parallel()
	m := app.NewManifest("ghclaim-test", hookURL, "http://127.0.0.1:1/callback", "octo-org")
	v := loadVendored(t)

	// Every route ghclaim calls has a row: a new call must say what it needs.
	for route := range v.Responses {
		if _, ok := routePermissions[route]; !ok {
			t.Errorf("route %q (in ghfake/openapi/rest.json, so ghclaim calls it) has no row in routePermissions: look up its permission in GitHub's docs", route)
		}
	}
	for route, need := range routePermissions {
		if _, ok := v.Responses[route]; !ok {
			t.Errorf("routePermissions has %q, which ghclaim does not call", route)
		}
		if got := m.DefaultPermissions[need.name]; level[got] < level[need.access] {
			t.Errorf("%s needs %s:%s, the manifest grants %q", route, need.name, need.access, got)
		}
	}
	for _, ev := range m.DefaultEvents {
		need, ok := eventPermissions[ev]
		if !ok {
			t.Errorf("event %q has no row in eventPermissions", ev)
			continue
		}
		if got := m.DefaultPermissions[need.name]; level[got] < level[need.access] {
			t.Errorf("subscribing to %s needs %s:%s, the manifest grants %q (GitHub refuses the subscription)", ev, need.name, need.access, got)
		}
	}
}

// TestManifestIsLeast: every permission the manifest asks for is needed,
// at no higher level than some call or event needs (metadata read is
// granted to every App whatever it asks).
func TestManifestIsLeast(t *testing.T) {
	t.Parallel()
	m := app.NewManifest("ghclaim-test", hookURL, "http://127.0.0.1:1/callback", "octo-org")
	most := map[string]string{"metadata": "read"}
	for _, rows := range []map[string]docsPermission{routePermissions, eventPermissions} {
		for _, need := range rows {
			if need.name != "" && level[need.access] > level[most[need.name]] {
				most[need.name] = need.access
			}
		}
	}
	for name, got := range m.DefaultPermissions {
		if level[got] > level[most[name]] {
			t.Errorf("manifest asks %s:%s, the calls need at most %q", name, got, most[name])
		}
	}
}

// TestManifestNamesGitHubPermissions: every key of default_permissions is
// one of GitHub's permission names (the app-permissions schema), with a
// level GitHub offers for it; a misspelt key is dropped by GitHub without
// a word and the App lacks the permission.
func TestManifestNamesGitHubPermissions(t *testing.T) {
	t.Parallel()
	m := app.NewManifest("ghclaim-test", hookURL, "http://127.0.0.1:1/callback", "octo-org")
	props := loadVendored(t).Defs.AppPermissions.Properties
	if len(props) == 0 {
		t.Fatal("no app-permissions schema in ghfake/openapi/rest.json")
	}
	for name, got := range m.DefaultPermissions {
		p, ok := props[name]
		if !ok {
			t.Errorf("default_permissions.%s is not a GitHub App permission", name)
			continue
		}
		if !slices.Contains(p.Enum, got) {
			t.Errorf("default_permissions.%s = %q, GitHub offers %v", name, got, p.Enum)
		}
	}
}

// TestUserAppAsksNoOrganisationPermission: an App registered on a user
// account (no -org) is private to it, and a user account has no
// organisation runners: its manifest asks for the repository pools'
// permissions alone, not organization_self_hosted_runners.
func TestUserAppAsksNoOrganisationPermission(t *testing.T) {
	t.Parallel()
	user := app.NewManifest("ghclaim-test", hookURL, "http://127.0.0.1:1/callback", "")
	if _, ok := user.DefaultPermissions["organization_self_hosted_runners"]; ok || user.DefaultPermissions["administration"] != "write" {
		t.Errorf("a user's App asks %v, want administration write and no organisation runners", user.DefaultPermissions)
	}
	org := app.NewManifest("ghclaim-test", hookURL, "http://127.0.0.1:1/callback", "octo-org")
	if org.DefaultPermissions["organization_self_hosted_runners"] != "write" {
		t.Errorf("an organisation's App asks %v, want organisation runners write", org.DefaultPermissions)
	}
}
