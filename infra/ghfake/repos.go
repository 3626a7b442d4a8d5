package ghfake

import (
	"net/http"
	"strings"
)

// RouteRepo reads a repository (installation token; "metadata" read, which
// GitHub grants every App). The claimer asks it for a job's repository's
// visibility and owner type when it resolves a renamed pool again.
const RouteRepo = "GET /repos/{owner}/{repo}"

// Repo is how GET /repos/{owner}/{repo} describes a repository.
type Repo struct {
	// Visibility is "public", "private" or "internal"; "" is private.
	Visibility string
	// User is true when the owner is a user account (owner.type "User"),
	// false for an organisation.
	User bool
}

// SetRepo sets how owner/name is described. A repository never set is
// private and owned by an organisation, or by a user when SetInstallation
// named its owner a user: as the fake mints tokens for any installation,
// any repository in a token's reach exists (outside it, 404 as GitHub).
func (s *Server) SetRepo(owner, name string, r Repo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repoKey(s.current(owner, name))] = r
}

func repoKey(owner, name string) string { return strings.ToLower(owner) + "/" + strings.ToLower(name) }

// repoOf returns how owner/name is described; s.mu is held.
func (s *Server) repoOf(owner, name string) Repo {
	if r, ok := s.repos[repoKey(owner, name)]; ok {
		return r
	}
	r := Repo{Visibility: "private"}
	for _, in := range s.installs {
		if strings.EqualFold(in.owner, owner) {
			r.User = !in.org
			break
		}
	}
	return r
}

// getRepo answers GitHub's "full-repository" shape (checked against its
// description in description_test.go).
func (s *Server) getRepo(w http.ResponseWriter, r *http.Request) {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	s.mu.Lock()
	rp := s.repoOf(owner, name)
	id := s.repoID(owner, name)
	s.mu.Unlock()
	vis := strings.ToLower(rp.Visibility)
	if vis == "" {
		vis = "private"
	}
	body := restRepository(id, owner, name, !rp.User)
	body["private"], body["visibility"] = vis != "public", vis
	body["has_discussions"], body["network_count"], body["subscribers_count"] = false, 0, 0
	writeJSON(w, http.StatusOK, body)
}
