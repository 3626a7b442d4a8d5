package ghfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

type ctxKey struct{}

// prefixKey holds the server's path prefix in a route's request, whose
// path has it cut off, for the links the route writes.
type prefixKey struct{}

// maxBody caps a request body; ghclaim's requests are tiny. A larger one
// is refused, not cut.
const maxBody = 1 << 20

// ServeHTTP answers one request: control endpoints under /_fake/, the API
// elsewhere. For the API, in order: count the call, take a programmed fault,
// authenticate, admit it among the actor's concurrent requests, charge
// the secondary limit's points and the rate budget, run the route (or, for a renamed
// repository's old name, answer GitHub's redirect; for a path no route
// serves, GitHub's 404, as much the caller's request as any other), then
// apply an after-effect fault or send the route's answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		s.control.ServeHTTP(w, r)
		return
	}
	if _, pattern := s.web.Handler(r); pattern != "" {
		s.web.ServeHTTP(w, r) // github.com's pages, at the root even under a prefix
		return
	}
	if s.prefix != "" {
		rest, ok := strings.CutPrefix(r.URL.Path, s.prefix)
		if !ok || !strings.HasPrefix(rest, "/") {
			s.mu.Lock()
			s.stats.Calls[""]++
			s.mu.Unlock()
			writeError(w, http.StatusNotFound, "Not Found", docsREST)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = rest, ""
		r = r2
	}
	version, ok := apiVersion(r)
	if !ok {
		writeError(w, http.StatusBadRequest, unsupportedVersion(r.Header.Get(headerAPIVersion)), docsREST)
		return
	}
	// Read the body now: until it is read, net/http cannot notice that the
	// client went away, and a slow fault would outlive its client.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return
	}
	if len(body) > maxBody {
		// Refused whole, never parsed cut short: a cut body can still
		// parse (a long label list cut at a comma) and be acted on as a
		// request the client never sent. GitHub's own limit and answer
		// for an oversized REST body are not documented, nor found in
		// reports; 413 is HTTP's status for it (RFC 9110, 15.5.14).
		writeError(w, http.StatusRequestEntityTooLarge, http.StatusText(http.StatusRequestEntityTooLarge), docsREST)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	// A repository named by id is served at its current name; one named
	// by an old name is answered with GitHub's redirect (moved.go).
	s.mu.Lock()
	mv := s.resolve(r)
	s.mu.Unlock()
	if mv.location == "" {
		r = mv.canonical
	}
	_, route := s.api.Handler(r)
	// A path no route serves is still a request of whoever made it: GitHub
	// resolves the credential first, then answers 404 with the caller's
	// budget charged. A valid App JWT makes it the App's.
	appJWT := route == "" && s.checkJWT(bearer(r)) == ""

	s.mu.Lock()
	s.stats.Calls[route]++
	if route == RouteAccessToken {
		// Counted whatever the answer (the exchange's own checks follow).
		// (The mux fills PathValue only when it serves the request.)
		id, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/app/installations/"), "/access_tokens"), 10, 64)
		s.stats.TokenRequests[id]++
	}
	s.requestSeq++
	reqID := fmt.Sprintf("F00D:%04X:%06X", s.requestSeq>>16, s.requestSeq)
	if route == RouteRepoJIT || route == RouteOrgJIT {
		s.stats.JITCalls++
	}
	// Authenticate by installation token (every route but the App's own,
	// which take the App JWT, and the manifest conversion, which GitHub
	// serves unauthenticated).
	inst, authed := int64(0), false
	app := appRoute(route) || appJWT
	public := app || route == RouteManifestConversion
	if !public {
		inst, authed = s.installationOfToken(bearer(r))
		if authed {
			s.stats.InstallationCalls[inst]++
		}
	}
	h := http.Header{}
	h.Set("X-GitHub-Request-Id", reqID)
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-GitHub-Api-Version-Selected", version)
	// The actor's requests in flight: this one counts from here to its
	// answer, a slow one (a fault's wait) included.
	if authed || app {
		if !s.enter(inst) {
			if authed {
				setRate(h, s.bucketFor(inst))
			} else {
				setRate(h, s.appBucket())
			}
			s.mu.Unlock()
			writeConcurrent(w, h)
			return
		}
		defer s.leave(inst)
	}
	fault := s.takeFault(route)
	s.mu.Unlock()

	if fault != nil && fault.Kind == KindSlow && !fault.After {
		if !s.wait(r.Context(), *fault) {
			return
		}
		fault = nil
	}
	if fault != nil && !fault.After {
		s.mu.Lock()
		switch {
		case authed:
			setRate(h, s.bucketFor(inst))
		case app:
			// GitHub sends the rate headers on every REST answer: on
			// the App's routes (the token exchange among them) the
			// App budget's, uncharged.
			setRate(h, s.appBucket())
		}
		s.mu.Unlock()
		writeFault(w, *fault, h)
		return
	}

	if route == "" && !app && bearer(r) == "" {
		s.writeAnonymous(w, h, http.StatusNotFound, "Not Found") // GitHub's 404 to nobody in particular
		return
	}
	if app {
		// The token exchange too: it is billed to the App's own budget,
		// and refused like the App's other routes once that is spent.
		if msg := s.checkJWT(bearer(r)); msg != "" {
			s.writeUnauthorized(w, h, msg) // nobody's budget: unauthenticated.go
			return
		}
		s.mu.Lock()
		b := s.appBucket()
		if wait := s.secondaryRefusal(0, route, r.Method); wait > 0 {
			setRate(h, b)
			s.mu.Unlock()
			writeSecondary(w, h, wait)
			return
		}
		if b.remaining <= 0 {
			setRate(h, b)
			s.mu.Unlock()
			copyHeader(w, h)
			writeError(w, s.primaryStatus, fmt.Sprintf("API rate limit exceeded for app ID %d.", s.appID), docsRateLimit)
			return
		}
		b.remaining--
		setRate(h, b)
		s.mu.Unlock()
	}
	if !public {
		if !authed {
			if r.Header.Get("Authorization") == "" {
				// No credential at all is not a bad one: GitHub answers
				// "Requires authentication" with the operation's
				// documentation (as logged for GET /user and POST /gists;
				// "Bad credentials" is its answer to a token it cannot
				// resolve, https://github.com/maxlath/backup-github-repo/issues/10).
				s.writeAnonymousDoc(w, h, http.StatusUnauthorized, "Requires authentication", routeDocs[route])
				return
			}
			s.writeUnauthorized(w, h, "Bad credentials")
			return
		}
		s.mu.Lock()
		b := s.bucketFor(inst)
		if wait := s.secondaryRefusal(inst, route, r.Method); wait > 0 {
			setRate(h, b)
			s.mu.Unlock()
			writeSecondary(w, h, wait)
			return
		}
		if b.remaining <= 0 {
			setRate(h, b)
			s.mu.Unlock()
			copyHeader(w, h)
			writeError(w, s.primaryStatus,
				fmt.Sprintf("API rate limit exceeded for installation ID %d.", inst), docsRateLimit)
			return
		}
		b.remaining--
		setRate(h, b)
		scope := s.tokens[bearer(r)].scope
		covered := s.covers(inst, scope, mv.canonical.URL.Path)
		if !covered {
			s.mu.Unlock()
			// GitHub answers a token used outside its installation's
			// account or repository selection as if nothing were there.
			copyHeader(w, h)
			writeError(w, http.StatusNotFound, "Not Found", docsREST)
			return
		}
		accepted := s.lacks(route, inst, scope)
		s.mu.Unlock()
		if accepted != "" {
			copyHeader(w, h)
			w.Header().Set("X-Accepted-GitHub-Permissions", accepted)
			writeError(w, http.StatusForbidden, "Resource not accessible by integration", docsPermissions)
			return
		}
	}

	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	switch {
	case route == "":
		writeError(rec, http.StatusNotFound, "Not Found", docsREST)
	case mv.location != "":
		writeMoved(rec, r.Method, mv.location)
	default:
		ctx := context.WithValue(context.WithValue(r.Context(), ctxKey{}, inst), prefixKey{}, s.prefix)
		s.api.ServeHTTP(rec, r.WithContext(ctx))
	}

	if fault != nil { // after effect
		if fault.Kind == KindSlow {
			if !s.wait(r.Context(), *fault) {
				return
			}
		} else {
			writeFault(w, *fault, h)
			return
		}
	}
	if mv.location != "" {
		s.mu.Lock()
		s.stats.Redirects[route]++
		s.mu.Unlock()
	}
	copyHeader(w, h)
	copyHeader(w, rec.header)
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}

// REST API versions (https://docs.github.com/rest/about-the-rest-api/api-versions):
// a request without X-GitHub-Api-Version gets defaultAPIVersion; one naming
// a version GitHub does not support is refused 400. 2026-03-10 was released
// on 2026-03-12 (https://github.blog/changelog/2026-03-12-rest-api-version-2026-03-10-is-now-available/),
// 2022-11-28 stays supported for at least 24 months after it. The fake
// serves both alike: ghclaim's calls are not among the breaking changes
// it tracks.
const (
	headerAPIVersion  = "X-GitHub-Api-Version"
	defaultAPIVersion = "2022-11-28"
)

// supportedAPIVersions, most recent first.
var supportedAPIVersions = []string{"2026-03-10", defaultAPIVersion}

// apiVersion returns the version a request selects, and false for one
// GitHub does not support.
func apiVersion(r *http.Request) (string, bool) {
	v := r.Header.Get(headerAPIVersion)
	if v == "" {
		return defaultAPIVersion, true
	}
	return v, slices.Contains(supportedAPIVersions, v)
}

// unsupportedVersion is GitHub's message for an unsupported version, as it
// was logged while 2022-11-28 was the only one (with documentation_url
// https://docs.github.com/rest,
// https://github.com/expipiplus1/update-nix-fetchgit/issues/79):
//
//	The version you specified in the "X-GitHub-API-Version" request header, "v3", is not a supported version. The following versions are currently supported: "2022-11-28" (most recent).
//
// How it lists two versions is extrapolated: most recent first, marked.
func unsupportedVersion(v string) string {
	list := make([]string, len(supportedAPIVersions))
	for i, s := range supportedAPIVersions {
		list[i] = strconv.Quote(s)
	}
	list[0] += " (most recent)"
	return fmt.Sprintf(`The version you specified in the "X-GitHub-API-Version" request header, %q, is not a supported version. The following versions are currently supported: %s.`,
		v, strings.Join(list, ", "))
}

// appRoute reports whether route is authenticated as the App (JWT) and
// charged to the App's budget.
func appRoute(route string) bool {
	switch route {
	case RouteAccessToken, RouteApp, RouteInstallations, RouteDeliveries, RouteDelivery, RouteRedeliver:
		return true
	}
	return false
}

// wait sleeps a slow fault's delay, bounded; false when the client left.
func (s *Server) wait(ctx context.Context, f Fault) bool {
	d := time.Duration(f.DelayMS) * time.Millisecond
	if d > s.maxDelay {
		d = s.maxDelay
	}
	return s.sleep(ctx, d) == nil
}

func setRate(h http.Header, b *bucket) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(b.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(b.remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(b.limit-b.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(b.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

func copyHeader(w http.ResponseWriter, h http.Header) {
	for k, v := range h {
		w.Header()[k] = v
	}
}

// bearer returns the credential of "Authorization: token X" or "Bearer X".
func bearer(r *http.Request) string {
	a := r.Header.Get("Authorization")
	for _, p := range []string{"token ", "Bearer ", "bearer "} {
		if v, ok := strings.CutPrefix(a, p); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// decodeJSONBody parses a request body that must be exactly one JSON
// value, as GitHub's parser takes it: a JSON text is one value with only
// whitespace around it (RFC 8259, section 2), so `{...}garbage` or two
// objects in a row are not JSON and GitHub answers them 400 "Problems
// parsing JSON" like any other body it cannot parse. json.Decoder alone
// stops after the first value and would accept the rest silently.
func decodeJSONBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("ghfake: data after the JSON value")
	}
	return nil
}

// errorBody is GitHub's JSON error shape.
type errorBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status"`
}

func writeError(w http.ResponseWriter, status int, msg, doc string) {
	writeJSON(w, status, errorBody{Message: msg, DocumentationURL: doc, Status: strconv.Itoa(status)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// recorder buffers a route's answer so that an after-effect fault can
// replace it once the route's state change is done.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.body.Write(p)
}

// appRoute reports whether route is authenticated by the App JWT (and
// charged to the App's budget) rather than an installation token.
