package ghfake

import (
	"net/http"
	"time"
)

// DefaultUnauthenticatedLimit is the hourly budget GitHub gives requests it
// cannot tie to an account, per client address: 60 ("Rate limits for the
// REST API", Primary rate limit for unauthenticated users,
// https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api).
//
// A request whose credential GitHub cannot resolve (an installation token
// it never issued or that expired, a JWT it cannot decode or verify) is
// answered 401 and is nobody's: neither the installation's nor the App's
// budget. GitHub has been seen to send that answer with the
// unauthenticated budget's rate headers, counting the 401 against it:
// x-ratelimit-limit 60, remaining 24 on a "Bad credentials"
// (https://github.com/renovatebot/renovate/issues/2286), remaining 57, 56,
// 55 on three in a row (https://github.com/maxlath/backup-github-repo/issues/10);
// measured in 2026 it sent none (https://github.com/brekkylab/backlot/issues/273).
// The stand-in sends the unauthenticated budget's, the harder case for a
// client: a reading of a budget that is not the one it tracks, which may
// stand at 0 (many clients share an address) while its own is full.
// Every client of the stand-in counts as one address.
const DefaultUnauthenticatedLimit = 60

// WithUnauthenticatedLimit sets the unauthenticated budget whose headers a
// 401 carries (default DefaultUnauthenticatedLimit); 0 sends a 401 with no
// rate headers, as GitHub was measured to in 2026.
func WithUnauthenticatedLimit(n int) Option { return func(s *Server) { s.anonLimit = n } }

// SetUnauthenticatedRate sets the unauthenticated budget (a shared address
// another client spent, say); the window then runs until reset.
func (s *Server) SetUnauthenticatedRate(limit, remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.anonRate = &bucket{limit: limit, remaining: remaining, reset: reset}
}

// writeUnauthorized answers a credential GitHub cannot resolve: 401 with
// msg, h's headers without any budget of the App's or an installation's,
// and the unauthenticated budget's, charged one request (see
// DefaultUnauthenticatedLimit). Callers do not hold s.mu.
func (s *Server) writeUnauthorized(w http.ResponseWriter, h http.Header, msg string) {
	s.writeAnonymous(w, h, http.StatusUnauthorized, msg)
}

// writeAnonymous answers a request that is nobody's (a credential GitHub
// cannot resolve, or none) with status and msg, charged to the
// unauthenticated budget and carrying its headers, none of another's.
// Callers do not hold s.mu.
func (s *Server) writeAnonymous(w http.ResponseWriter, h http.Header, status int, msg string) {
	s.writeAnonymousDoc(w, h, status, msg, docsREST)
}

// writeAnonymousDoc is writeAnonymous with documentation_url doc (docsREST
// when empty).
func (s *Server) writeAnonymousDoc(w http.ResponseWriter, h http.Header, status int, msg, doc string) {
	if doc == "" {
		doc = docsREST
	}
	h = h.Clone()
	for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "X-RateLimit-Resource"} {
		h.Del(k)
	}
	s.mu.Lock()
	if s.anonLimit > 0 || s.anonRate != nil {
		if s.anonRate == nil {
			s.anonRate = &bucket{limit: s.anonLimit, remaining: s.anonLimit, reset: s.now().Add(rateWindow)}
		}
		s.refill(s.anonRate)
		if s.anonRate.remaining > 0 {
			s.anonRate.remaining--
		}
		setRate(h, s.anonRate)
	}
	s.mu.Unlock()
	copyHeader(w, h)
	writeError(w, status, msg, doc)
}

// routeDocs is the documentation of each route taking an installation
// token, as GitHub links it from the operation's errors.
var routeDocs = map[string]string{
	RouteRepoJIT:          docsJITRepo,
	RouteOrgJIT:           docsJITOrg,
	RouteRepoRunners:      "https://docs.github.com/rest/actions/self-hosted-runners#list-self-hosted-runners-for-a-repository",
	RouteOrgRunners:       "https://docs.github.com/rest/actions/self-hosted-runners#list-self-hosted-runners-for-an-organization",
	RouteRepoRunner:       "https://docs.github.com/rest/actions/self-hosted-runners#get-a-self-hosted-runner-for-a-repository",
	RouteOrgRunner:        "https://docs.github.com/rest/actions/self-hosted-runners#get-a-self-hosted-runner-for-an-organization",
	RouteRepoDeleteRunner: docsRunnerRepo,
	RouteOrgDeleteRunner:  docsRunnerOrg,
	RouteJob:              docsJob,
	RouteInstallRepos:     "https://docs.github.com/rest/apps/installations#list-repositories-accessible-to-the-app-installation",
	RouteRepo:             "https://docs.github.com/rest/repos/repos#get-a-repository",
}
