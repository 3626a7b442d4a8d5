package ghfake

import "maps"

// Permissions of an installation token, as GitHub enforces them: each
// installation route needs one App permission at a level (GitHub's
// "Permissions required for GitHub Apps", whose data is github/docs
// src/github-apps/data/fpt-2022-11-28/server-to-server-permissions.json);
// a token without it gets 403 "Resource not accessible by integration"
// and an X-Accepted-GitHub-Permissions header naming what the route
// accepts. The fake enforces this so that an App without a permission a
// call needs fails in the tests, not in production only. GET
// /installation/repositories needs none; the App's own routes (JWT) and
// the manifest conversion take no installation permission.

// needed is one permission at a level.
type needed struct{ name, access string }

var routePermission = map[string]needed{
	RouteRepoJIT:          {"administration", "write"},
	RouteRepoRunners:      {"administration", "read"},
	RouteRepoRunner:       {"administration", "read"},
	RouteRepoDeleteRunner: {"administration", "write"},
	RouteOrgJIT:           {"organization_self_hosted_runners", "write"},
	RouteOrgRunners:       {"organization_self_hosted_runners", "read"},
	RouteOrgRunner:        {"organization_self_hosted_runners", "read"},
	RouteOrgDeleteRunner:  {"organization_self_hosted_runners", "write"},
	RouteJob:              {"actions", "read"},
	RouteRepo:             {"metadata", "read"},
}

var accessLevel = map[string]int{"read": 1, "write": 2, "admin": 3}

const docsPermissions = "https://docs.github.com/rest/authentication/permissions-required-for-github-apps"

// DefaultPermissions returns what an installation holds unless
// AddInstallation says otherwise: the permissions of ghclaim's App (what
// make app's manifest asks for, metadata read included as GitHub grants
// it to every App).
func DefaultPermissions() map[string]string {
	return map[string]string{
		"administration":                   "write",
		"organization_self_hosted_runners": "write",
		"actions":                          "read",
		"metadata":                         "read",
	}
}

// permissionsOf returns a copy of installation inst's permissions; s.mu is held.
func (s *Server) permissionsOf(inst int64) map[string]string {
	if in, ok := s.installs[inst]; ok && in.perms != nil {
		return maps.Clone(in.perms)
	}
	return DefaultPermissions()
}

// lacks returns what route accepts ("name=level", GitHub's
// X-Accepted-GitHub-Permissions) when installation inst lacks it, or when
// the token's installation lacked it at the token's creation (scope; nil:
// an installation the fake was not told about then): a token keeps the
// permissions it was created with. "" when both have it; s.mu is held.
func (s *Server) lacks(route string, inst int64, scope *installationOf) string {
	need, ok := routePermission[route]
	if !ok {
		return ""
	}
	has := accessLevel[s.permissionsOf(inst)[need.name]] >= accessLevel[need.access]
	if scope != nil && scope.perms != nil && accessLevel[scope.perms[need.name]] < accessLevel[need.access] {
		has = false
	}
	if has {
		return ""
	}
	return need.name + "=" + need.access
}
