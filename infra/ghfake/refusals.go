package ghfake

import (
	"crypto/rsa"
	"time"
)

// The ways GitHub refuses the installation token exchange itself
// (POST /app/installations/{id}/access_tokens) although the request is
// well formed: faults of the App's credentials or of its installation,
// which an operator fixes, never of a job. GitHub answers, in this order:
//   - 401 "A JSON web token could not be decoded": the JWT is not signed
//     with a key the App has (the key was rotated on GitHub, and the
//     secret still holds the old one);
//   - 404 "Not Found": the App has no such installation (uninstalled, or
//     an id of another App's);
//   - 403 "This installation has been suspended": the account's owner
//     suspended the App's installation.
//
// Each also ends the installation's tokens, where that applies, as
// RevokeTokens does: a call with one is then a 401.

// SetPublicKey replaces the App's public key, as rotating the App's
// private key in its settings on GitHub does: a JWT signed with any other
// key is refused (401) from then on. nil stops checking signatures.
func (s *Server) SetPublicKey(k *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pub = k
}

// Suspend suspends installation id: its tokens stop working, the token
// exchange answers 403 and its listing carries suspended_at (the fake's
// clock at the first Suspend) and suspended_by, until Unsuspend.
func (s *Server) Suspend(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.suspended[id]; !ok {
		s.suspended[id] = s.now().UTC().Truncate(time.Second)
	}
	s.revoke(id)
}

// Unsuspend lifts Suspend: the token exchange mints tokens again.
func (s *Server) Unsuspend(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.suspended, id)
}

// Uninstall removes installation id, as uninstalling the App from an
// account does: it is no longer listed, its tokens stop working and the
// token exchange answers 404.
func (s *Server) Uninstall(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uninstalled[id] = true
	delete(s.installs, id)
	s.revoke(id)
}

// exchangeRefusal is GitHub's answer to a token exchange for installation
// id with a valid JWT, when it refuses it: status and message, or 0.
func (s *Server) exchangeRefusal(id int64) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, suspended := s.suspended[id]
	switch {
	case s.uninstalled[id]:
		return 404, "Not Found"
	case suspended:
		return 403, "This installation has been suspended"
	}
	return 0, ""
}
