package ghfake

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The GitHub App manifest flow (docs.github.com, "Registering a GitHub App
// from a manifest"): a page posts a form with a `manifest` field to
// github.com/settings/apps/new (a user's App) or
// github.com/organizations/ORG/settings/apps/new (an organisation's), with
// an optional ?state=; GitHub creates the App and redirects to the
// manifest's redirect_url with ?code=…&state=…; the code is exchanged once,
// within an hour, by POST /app-manifests/{code}/conversions, which needs no
// authentication and answers 201 with the App, its private key (pem), its
// webhook secret and its client secret.
//
// The web routes are served at the root even under WithPathPrefix, as on
// GitHub Enterprise Server (web at https://HOST/, API at /api/v3). Where
// GitHub shows a confirmation page (the user may rename the App, then
// clicks "Create"), the fake creates the App at once and redirects.
const (
	RouteManifestConversion = "POST /app-manifests/{code}/conversions"
	WebNewApp               = "POST /settings/apps/new"
	WebNewOrgApp            = "POST /organizations/{org}/settings/apps/new"

	// ManifestUser is the signed-in user who owns an App made through
	// WebNewApp.
	ManifestUser = "octocat"

	manifestCodeTTL   = time.Hour
	maxAppName        = 34
	docsManifest      = "https://docs.github.com/rest/apps/apps#create-a-github-app-from-a-manifest"
	manifestFirstID   = 100000
	manifestKeyLength = 2048
)

// App is a GitHub App the manifest flow made, with its credentials, so a
// test can compare them with what was stored.
type App struct {
	ID            int64           `json:"id"`
	Slug          string          `json:"slug"`
	Name          string          `json:"name"`
	Owner         string          `json:"owner"`
	OwnerType     string          `json:"owner_type"` // "User" or "Organization"
	ClientID      string          `json:"client_id"`
	ClientSecret  string          `json:"client_secret"`
	WebhookSecret string          `json:"webhook_secret"`
	PEM           string          `json:"pem"`
	Manifest      json.RawMessage `json:"manifest"`
	// Converted reports whether the code was exchanged (codes are single-use).
	Converted bool `json:"converted"`

	code    string
	created time.Time
	key     *rsa.PrivateKey
}

// PublicKey returns the public half of the App's private key, for
// WithPublicKey-style JWT checks.
func (a App) PublicKey() *rsa.PublicKey {
	if a.key == nil {
		return nil
	}
	return &a.key.PublicKey
}

// Manifest is the part of a GitHub App manifest the fake validates.
type Manifest struct {
	Name           string `json:"name"`
	URL            string `json:"url"`
	HookAttributes *struct {
		URL    string `json:"url"`
		Active *bool  `json:"active"`
	} `json:"hook_attributes"`
	RedirectURL        string            `json:"redirect_url"`
	Public             bool              `json:"public"`
	DefaultEvents      []string          `json:"default_events"`
	DefaultPermissions map[string]string `json:"default_permissions"`
}

// Apps returns copies of every App the manifest flow made, by id.
func (s *Server) Apps() []App {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]App, 0, len(s.apps))
	for _, a := range s.apps {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

var permissionLevel = map[string]bool{"read": true, "write": true, "admin": true}

// validManifest returns what is wrong with a manifest, or "".
func validManifest(m Manifest) string {
	switch {
	case strings.TrimSpace(m.URL) == "":
		return "url is required"
	case !absoluteURL(m.URL):
		return "url must be an absolute http(s) URL"
	case m.HookAttributes != nil && !absoluteURL(m.HookAttributes.URL):
		return "hook_attributes.url must be an absolute http(s) URL"
	case m.RedirectURL != "" && !absoluteURL(m.RedirectURL):
		return "redirect_url must be an absolute http(s) URL"
	case len(m.Name) > maxAppName:
		return fmt.Sprintf("name is too long (maximum is %d characters)", maxAppName)
	case len(m.DefaultEvents) > 0 && (m.HookAttributes == nil || m.HookAttributes.URL == ""):
		return "default_events need a webhook: hook_attributes.url is required"
	}
	for k, v := range m.DefaultPermissions {
		if !permissionLevel[v] {
			return fmt.Sprintf("default_permissions.%s: %q is not read, write or admin", k, v)
		}
	}
	return ""
}

func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// newApp plays github.com/settings/apps/new receiving a manifest form.
func (s *Server) newApp(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		webError(w, http.StatusBadRequest, "the form could not be read")
		return
	}
	raw := r.PostForm.Get("manifest")
	if raw == "" {
		webError(w, http.StatusUnprocessableEntity, "manifest is required")
		return
	}
	var m Manifest
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		webError(w, http.StatusUnprocessableEntity, "manifest is not valid JSON")
		return
	}
	if msg := validManifest(m); msg != "" {
		webError(w, http.StatusUnprocessableEntity, "Invalid GitHub App manifest: "+msg)
		return
	}
	if m.RedirectURL == "" {
		// GitHub would show the new App's page; a flow without a
		// redirect never gets its code, so the fake refuses it.
		webError(w, http.StatusUnprocessableEntity, "redirect_url is required by this stand-in")
		return
	}
	owner, ownerType := ManifestUser, "User"
	if org := r.PathValue("org"); org != "" {
		owner, ownerType = org, "Organization"
	}
	name := m.Name
	if name == "" {
		name = owner + "-app"
	}
	key, err := rsa.GenerateKey(rand.Reader, manifestKeyLength)
	if err != nil {
		webError(w, http.StatusInternalServerError, "could not make a key")
		return
	}
	slug := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(name), "-"), "-")
	s.mu.Lock()
	for _, a := range s.apps {
		if a.Slug == slug {
			s.mu.Unlock()
			webError(w, http.StatusUnprocessableEntity, "Name is already in use")
			return
		}
	}
	s.appSeq++
	a := &App{
		ID: manifestFirstID + s.appSeq, Slug: slug, Name: name, Owner: owner, OwnerType: ownerType,
		ClientID:      "Iv23" + randomHex(8),
		ClientSecret:  randomHex(20),
		WebhookSecret: randomHex(20),
		PEM:           string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
		Manifest:      json.RawMessage(raw),
		code:          randomHex(10),
		created:       s.now().UTC().Truncate(time.Second),
		key:           key,
	}
	s.apps[a.code] = a
	s.mu.Unlock()

	q := url.Values{"code": {a.code}}
	if st := r.URL.Query().Get("state"); st != "" {
		q.Set("state", st)
	}
	target, _ := url.Parse(m.RedirectURL)
	if target.RawQuery != "" {
		target.RawQuery += "&"
	}
	target.RawQuery += q.Encode()
	http.Redirect(w, r, target.String(), http.StatusFound)
}

// convertManifest is POST /app-manifests/{code}/conversions.
func (s *Server) convertManifest(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue("code")
	s.mu.Lock()
	a := s.apps[code]
	if a == nil || a.Converted || !s.now().Before(a.created.Add(manifestCodeTTL)) {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found", docsManifest)
		return
	}
	a.Converted = true
	app := *a
	s.mu.Unlock()

	var m Manifest
	_ = json.Unmarshal(app.Manifest, &m)
	events := m.DefaultEvents
	if events == nil {
		events = []string{}
	}
	perms := map[string]string{"metadata": "read"}
	for k, v := range m.DefaultPermissions {
		perms[k] = v
	}
	web := "http://" + r.Host
	ts := app.created.Format(time.RFC3339)
	writeJSON(w, http.StatusCreated, map[string]any{
		"id":             app.ID,
		"slug":           app.Slug,
		"node_id":        fmt.Sprintf("A_kwDO%08d", app.ID),
		"client_id":      app.ClientID,
		"owner":          simpleUser(web, app.Owner, app.OwnerType, app.ID+1),
		"name":           app.Name,
		"description":    nil,
		"external_url":   m.URL,
		"html_url":       web + "/apps/" + app.Slug,
		"created_at":     ts,
		"updated_at":     ts,
		"permissions":    perms,
		"events":         events,
		"client_secret":  app.ClientSecret,
		"webhook_secret": app.WebhookSecret,
		"pem":            app.PEM,
	})
}

// simpleUser is GitHub's simple-user object for an account.
func simpleUser(web, login, typ string, id int64) map[string]any {
	api := web + "/users/" + login
	return map[string]any{
		"login": login, "id": id, "node_id": fmt.Sprintf("U_kgDO%08d", id), "type": typ, "site_admin": false,
		"avatar_url": web + "/avatars/" + login, "gravatar_id": "", "url": api, "html_url": web + "/" + login,
		"followers_url": api + "/followers", "following_url": api + "/following{/other_user}",
		"gists_url": api + "/gists{/gist_id}", "starred_url": api + "/starred{/owner}{/repo}",
		"subscriptions_url": api + "/subscriptions", "organizations_url": api + "/orgs",
		"repos_url": api + "/repos", "events_url": api + "/events{/privacy}",
		"received_events_url": api + "/received_events",
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// webError answers a web (not API) route as GitHub's pages do: HTML.
func webError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!DOCTYPE html><html><body><div class=\"flash flash-error\">%s</div></body></html>\n", html.EscapeString(msg))
}
