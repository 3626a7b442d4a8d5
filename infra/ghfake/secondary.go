package ghfake

import (
	"net/http"
	"strconv"
	"time"
)

// GitHub's secondary rate limit on REST points ("Rate limits for the REST
// API", About secondary rate limits / Calculating points for the secondary
// rate limit): "too many requests to a single endpoint per minute. No more
// than 900 points per minute are allowed for REST API endpoints", a GET,
// HEAD or OPTIONS request costing 1 point and any other 5, so 180 runner
// registrations (POST generate-jitconfig) a minute for one installation,
// however much of its hourly budget is left. Past it GitHub answers 403
// "You have exceeded a secondary rate limit" with Retry-After. The points
// are counted per actor (an installation's token, or the App's JWT) and
// endpoint (the route's pattern, as GitHub's documentation names them).
const (
	// DefaultSecondaryPoints is the points a minute one actor may spend.
	DefaultSecondaryPoints = 900
	secondaryWindow        = time.Minute
	pointsRead             = 1
	pointsWrite            = 5
	// DefaultConcurrentRequests is how many requests one actor may have
	// in flight at once: "No more than 100 concurrent requests are
	// allowed" (shared with GraphQL, which ghclaim does not use).
	DefaultConcurrentRequests = 100
)

// WithConcurrentLimit sets how many requests each installation (and the
// App, on its own routes) may have in flight before GitHub's secondary
// rate limit refuses the next (default DefaultConcurrentRequests); 0 lifts
// the limit.
func WithConcurrentLimit(n int) Option { return func(s *Server) { s.concurrent = n } }

// WithSecondaryLimit sets the points a minute each installation (and the
// App, on its own routes) may spend on one endpoint before GitHub's
// secondary rate limit refuses it (default DefaultSecondaryPoints); 0
// lifts the limit, for a benchmark measuring our side alone.
func WithSecondaryLimit(points int) Option { return func(s *Server) { s.secondaryPoints = points } }

// spender is who spends points on what: an installation id (0: the App)
// and a route pattern.
type spender struct {
	actor int64
	route string
}

// spent is one request's points at a time.
type spent struct {
	at     time.Time
	points int
}

// points is what method costs against the secondary limit.
func points(method string) int {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return pointsRead
	}
	return pointsWrite
}

// secondaryRefusal charges a request of method on route to actor's last
// minute of points on that route (actor: an installation id, or 0 for the
// App) and returns 0; or, when the request would take the minute past the
// limit, charges nothing and returns how long until the points it needs
// are free again, GitHub's Retry-After (a minute for a request dearer than
// the whole limit). Callers hold s.mu.
func (s *Server) secondaryRefusal(actor int64, route, method string) time.Duration {
	if s.secondaryPoints <= 0 {
		return 0
	}
	now, cost := s.now(), points(method)
	if cost > s.secondaryPoints {
		s.stats.SecondaryLimited++
		return secondaryWindow
	}
	key := spender{actor, route}
	log := s.secondary[key]
	i := 0
	for i < len(log) && !log[i].at.After(now.Add(-secondaryWindow)) {
		i++
	}
	log = log[i:]
	used := 0
	for _, e := range log {
		used += e.points
	}
	if used+cost > s.secondaryPoints {
		// The oldest requests leave the window first: wait until enough
		// of them have.
		free := used + cost - s.secondaryPoints
		for _, e := range log {
			free -= e.points
			if free <= 0 {
				s.secondary[key] = log
				s.stats.SecondaryLimited++
				return max(time.Second, e.at.Add(secondaryWindow).Sub(now))
			}
		}
	}
	s.secondary[key] = append(log, spent{at: now, points: cost})
	return 0
}

// enter admits one more request of actor (an installation id, or 0 for
// the App) and reports true; the caller then calls leave once its answer
// is written. With the actor's limit already in flight it reports false
// and counts the refusal. Callers hold s.mu.
func (s *Server) enter(actor int64) bool {
	if s.concurrent <= 0 {
		return true
	}
	if s.inflight[actor] >= s.concurrent {
		s.stats.SecondaryLimited++
		return false
	}
	s.inflight[actor]++
	return true
}

// leave ends a request enter admitted.
func (s *Server) leave(actor int64) {
	if s.concurrent <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight[actor]--
}

// writeConcurrent answers a request over the concurrent limit as GitHub
// answers a secondary limit it names no wait for: 403 and its message,
// with no Retry-After, the primary budget's headers h (remaining above 0),
// uncharged. GitHub then asks a client to wait at least a minute.
func writeConcurrent(w http.ResponseWriter, h http.Header) {
	copyHeader(w, h)
	writeError(w, http.StatusForbidden,
		"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		docsSecondaryRateLimit)
}

// writeSecondary answers as GitHub does past the secondary limit: 403,
// its message, Retry-After in whole seconds (rounded up), the primary
// budget's headers h, uncharged.
func writeSecondary(w http.ResponseWriter, h http.Header, wait time.Duration) {
	copyHeader(w, h)
	w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	writeError(w, http.StatusForbidden,
		"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		docsSecondaryRateLimit)
}
