package ghfake

import "time"

// EphemeralLifetime is how long GitHub keeps an ephemeral runner that is not
// connected: "An ephemeral self-hosted runner is automatically removed from
// GitHub if it has not connected to GitHub Actions for more than 1 day"
// (docs.github.com/actions/concepts/runners/communicating-with-self-hosted-runners).
// Every runner of the fake registers by JIT config, so every one is
// ephemeral. A runner never connected counts from its registration, one
// gone offline from then; the fake's clock decides, and the runner is gone
// from every route and accessor once the lifetime is past. Without it the
// fake kept such runners for ever: the janitor, which leaves an unknown
// offline runner to GitHub's clean-up, could be tested only against a
// GitHub that never cleans up, and a client could rely on an abandoned
// registration still being there (a GET by id or name, a DELETE answered
// 204) where GitHub answers 404.
const EphemeralLifetime = 24 * time.Hour

// expireRunners removes the runners GitHub has removed by now. Callers
// hold s.mu.
func (s *Server) expireRunners() {
	now := s.now()
	for id, rn := range s.runners {
		if rn.Status != "online" && now.Sub(rn.seen) > EphemeralLifetime {
			delete(s.runners, id)
		}
	}
}

// setRunnerStatus changes r's status as its runner process would: online,
// it is connected now; going offline, it was connected until now. Callers
// hold s.mu.
func (s *Server) setRunnerStatus(r *Runner, status string, busy bool) {
	if r.Status == "online" || status == "online" {
		r.seen = s.now()
	}
	r.Status, r.Busy = status, busy
}
