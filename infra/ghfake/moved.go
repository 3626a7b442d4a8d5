package ghfake

import (
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
)

// Renamed and transferred repositories. GitHub knows a repository by its
// numeric id; its owner/name is only its current address. A REST request
// that names a repository by an old owner/name (the repository renamed,
// its owner renamed, or the repository transferred) is answered with a
// redirect to the repository's id-based URL, /repositories/{id}/…, which
// GitHub serves as the repository at its current name: 301 Moved
// Permanently for GET and HEAD, 307 Temporary Redirect for every other
// method (so that a client re-sends the same method with its body), with
// a Location of the same path and query under /repositories/{id} and
// GitHub's JSON body naming it. A client that does not follow it fails.
//
// Design decisions:
//   - A repository's id is fixed by the name it was first known by (a hash
//     of it, as GET /repos/{owner}/{repo} has always reported it) and kept
//     across renames; every id the fake reported resolves under
//     /repositories/{id}.
//   - A rename moves the repository's state to its new name: the runners
//     registered at its scope, its jobs, its description (SetRepo) and its
//     place in the repository selection of its owner's installations (and
//     of tokens created before it, which GitHub keeps by id). So
//     /repos/{new owner}/{new name}/… and /repositories/{id}/… reach the
//     same runners, and the old name reaches them only through the
//     redirect.
//   - The redirect is an answer of the route the old URL names: it is
//     counted in Stats.Calls (and JITCalls) like any request, and also in
//     Stats.Redirects; it takes a programmed fault, is authenticated, is
//     charged to the rate budget (GitHub charges every request it
//     answers, a redirect among them) and is refused as the repository's
//     current name would be (a token that does not reach the repository at
//     its current name, or lacks the route's permission, gets GitHub's 404
//     or 403, never the repository's new address). The request to
//     /repositories/{id}/… that follows counts under the same route again.
//   - An unknown id is GitHub's 404 Not Found.

// docsRedirects is the documentation_url of GitHub's redirect answers.
const docsRedirects = "https://docs.github.com/rest/guides/best-practices-for-using-the-rest-api#follow-redirects"

// repoName is a repository's current owner/name, as first spelled.
type repoName struct{ owner, name string }

// RenameRepo renames or transfers the repository oldOwner/oldName to
// newOwner/newName, as a rename of the repository, a rename of its owner
// (call it for each of the owner's repositories the test uses) or a
// transfer does: it keeps its id, its runners and jobs move with it, and
// from then on every API request naming oldOwner/oldName is answered with
// GitHub's redirect to /repositories/{id}/…. newOwner/newName must not name
// another repository the test uses (GitHub refuses such a rename).
// SetJob and SetRepo given an old name set the renamed repository's, as
// the old name reaches it on GitHub.
func (s *Server) RenameRepo(oldOwner, oldName, newOwner, newName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldKey, newKey := repoKey(oldOwner, oldName), repoKey(newOwner, newName)
	if oldKey == newKey {
		// A change of case only: GitHub's names compare
		// case-insensitively, the old spelling still reaches it.
		s.byID[s.repoID(oldOwner, oldName)] = repoName{newOwner, newName}
		return
	}
	id := s.repoID(oldOwner, oldName)
	delete(s.repoIDs, oldKey)
	s.repoIDs[newKey] = id
	s.byID[id] = repoName{newOwner, newName}
	s.moved[oldKey] = id
	delete(s.moved, newKey) // a name moved away and back is current again
	if r, ok := s.repos[oldKey]; ok {
		delete(s.repos, oldKey)
		s.repos[newKey] = r
	}
	for _, rn := range s.runners {
		if sameScope(rn, ScopeRepo, oldOwner, oldName) {
			rn.Owner, rn.Repo = newOwner, newName
		}
	}
	for k, j := range s.jobs {
		if strings.HasPrefix(k, oldKey+"#") {
			delete(s.jobs, k)
			s.jobs[jobKey(newOwner, newName, j.ID)] = j
		}
	}
	if strings.EqualFold(oldOwner, newOwner) {
		// Renamed in its account: still selected where it was. (A
		// transfer leaves its old account and its installations.)
		for id, in := range s.installs {
			in.rename(oldName, newName)
			s.installs[id] = in
		}
		for _, t := range s.tokens {
			if t.scope != nil {
				t.scope.rename(oldName, newName)
			}
		}
	}
}

// current returns where owner/name is now: the new name of a renamed
// repository named by an old one, else owner/name itself; s.mu is held.
func (s *Server) current(owner, name string) (string, string) {
	if id, ok := s.moved[repoKey(owner, name)]; ok {
		cur := s.byID[id]
		return cur.owner, cur.name
	}
	return owner, name
}

// rename renames a repository of its selection.
func (in *installationOf) rename(oldName, newName string) {
	for i, r := range in.repos {
		if strings.EqualFold(r, oldName) {
			in.repos[i] = newName
		}
	}
}

// repoID returns owner/name's id, fixing it on first use; s.mu is held.
func (s *Server) repoID(owner, name string) int64 {
	k := repoKey(owner, name)
	if id, ok := s.repoIDs[k]; ok {
		return id
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(k))
	id := int64(h.Sum32()) + 1
	s.repoIDs[k] = id
	if _, taken := s.byID[id]; !taken {
		s.byID[id] = repoName{owner, name}
	}
	return id
}

// moved is where a request names a repository: canonical is the request
// with its path at the repository's current name (the request itself when
// it names none, or its current name); location, when the path names a
// renamed repository by an old name, is the URL GitHub redirects it to.
type moved struct {
	canonical *http.Request
	location  string
}

// resolve reads where r names a repository. A /repositories/{id}/… path is
// rewritten to the repository's current /repos/{owner}/{repo}/… (an
// unknown id is left as it is: no route, 404); a /repos/{owner}/{repo}/…
// path of an old name gets the redirect's location, and its canonical
// request the current name, for the installation's reach. s.mu is held.
func (s *Server) resolve(r *http.Request) moved {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 4)
	switch {
	case len(parts) >= 2 && parts[0] == "repositories":
		id, err := strconv.ParseInt(parts[1], 10, 64)
		cur, ok := s.byID[id]
		if err != nil || !ok {
			return moved{canonical: r}
		}
		return moved{canonical: s.rewrite(r, cur, parts[2:])}
	case len(parts) >= 3 && parts[0] == "repos":
		id, ok := s.moved[repoKey(parts[1], parts[2])]
		if !ok {
			return moved{canonical: r}
		}
		rest := ""
		if len(parts) == 4 {
			rest = "/" + parts[3]
		}
		loc := s.apiBase(r) + "/repositories/" + strconv.FormatInt(id, 10) + rest
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		return moved{canonical: s.rewrite(r, s.byID[id], parts[3:]), location: loc}
	}
	return moved{canonical: r}
}

// rewrite returns a copy of r whose path is cur's /repos/{owner}/{repo}
// followed by rest (what followed the repository in r's path).
func (s *Server) rewrite(r *http.Request, cur repoName, rest []string) *http.Request {
	p := "/repos/" + cur.owner + "/" + cur.name
	if len(rest) > 0 {
		p += "/" + strings.Join(rest, "/")
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = p, ""
	return r2
}

// apiBase is the API root the request reached: scheme, host and prefix.
func (s *Server) apiBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + s.prefix
}

// writeMoved answers GitHub's redirect to loc: 301 for GET and HEAD, 307
// (the client keeps its method and body) for the others.
func writeMoved(w http.ResponseWriter, method, loc string) {
	status, msg := http.StatusTemporaryRedirect, "Temporary Redirect"
	if method == http.MethodGet || method == http.MethodHead {
		status, msg = http.StatusMovedPermanently, "Moved Permanently"
	}
	w.Header().Set("Location", loc)
	writeJSON(w, status, map[string]string{"message": msg, "url": loc, "documentation_url": docsRedirects})
}
