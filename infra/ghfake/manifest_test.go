package ghfake_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

const testManifest = `{"name":"ghclaim-test","url":"https://example.com/ghclaim",
"hook_attributes":{"url":"https://hooks.example.com/","active":true},
"redirect_url":"http://127.0.0.1:1/callback","public":false,"default_events":["workflow_job"],
"default_permissions":{"administration":"write","organization_self_hosted_runners":"write","actions":"read","metadata":"read"}}`

// noRedirect is a client that hands back GitHub's redirect instead of following it.
var noRedirect = &http.Client{Transport: web.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// postManifest posts the manifest form as a browser would.
func postManifest(t *testing.T, base, path, manifest string) *http.Response {
	t.Helper()
	resp, err := noRedirect.PostForm(base+path, url.Values{"manifest": {manifest}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// manifestCode runs the form step and returns the code of the redirect.
func manifestCode(t *testing.T, base, path, manifest string) string {
	t.Helper()
	resp := postManifest(t, base, path, manifest)
	if resp.StatusCode != http.StatusFound {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("form: status %d, want 302 (%s)", resp.StatusCode, b)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc.Query().Get("code")
}

type conversion struct {
	ID            int64  `json:"id"`
	Slug          string `json:"slug"`
	HTMLURL       string `json:"html_url"`
	PEM           string `json:"pem"`
	WebhookSecret string `json:"webhook_secret"`
	ClientSecret  string `json:"client_secret"`
	Owner         struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"owner"`
	Events      []string          `json:"events"`
	Permissions map[string]string `json:"permissions"`
}

func convert(t *testing.T, base, code string) (int, conversion) {
	t.Helper()
	resp, err := web.Post(base+"/app-manifests/"+code+"/conversions", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c conversion
	if resp.StatusCode == http.StatusCreated {
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, c
}

func TestManifestFlow(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	setup := func(t *testing.T, opts ...ghfake.Option) (*ghfake.Server, string) {
		fake := ghfake.New(append([]ghfake.Option{ghfake.WithClock(clock)}, opts...)...)
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		return fake, srv.URL
	}

	t.Run("user app: redirect carries code and state, conversion answers once", func(t *testing.T) {
		fake, base := setup(t)
		resp := postManifest(t, base, "/settings/apps/new?state=s3cr3t-state", testManifest)
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("got %d, want 302", resp.StatusCode)
		}
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if loc.Host != "127.0.0.1:1" || loc.Path != "/callback" || loc.Query().Get("state") != "s3cr3t-state" || loc.Query().Get("code") == "" {
			t.Fatalf("redirect %s, want http://127.0.0.1:1/callback?code=…&state=s3cr3t-state", loc)
		}
		status, c := convert(t, base, loc.Query().Get("code"))
		if status != http.StatusCreated {
			t.Fatalf("conversion: got %d, want 201", status)
		}
		apps := fake.Apps()
		if len(apps) != 1 || apps[0].ID != c.ID || apps[0].PEM != c.PEM || apps[0].WebhookSecret != c.WebhookSecret || !apps[0].Converted {
			t.Fatalf("fake holds %+v, conversion said id %d", apps, c.ID)
		}
		if c.Owner.Login != ghfake.ManifestUser || c.Owner.Type != "User" || c.Slug != "ghclaim-test" || c.HTMLURL != base+"/apps/ghclaim-test" {
			t.Errorf("owner %+v slug %q html_url %q", c.Owner, c.Slug, c.HTMLURL)
		}
		if c.Permissions["organization_self_hosted_runners"] != "write" || len(c.Events) != 1 || c.Events[0] != "workflow_job" {
			t.Errorf("permissions %v events %v, want the manifest's", c.Permissions, c.Events)
		}
		blk, _ := pem.Decode([]byte(c.PEM))
		if blk == nil {
			t.Fatal("pem does not decode")
		}
		if _, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err != nil {
			t.Fatalf("pem: %v", err)
		}
		if status, _ := convert(t, base, loc.Query().Get("code")); status != http.StatusNotFound {
			t.Errorf("second conversion: got %d, want 404 (codes are single-use)", status)
		}
	})

	t.Run("org app under a GHES prefix: web at the root", func(t *testing.T) {
		_, base := setup(t, ghfake.WithPathPrefix("/api/v3"))
		code := manifestCode(t, base, "/organizations/octo-org/settings/apps/new", testManifest)
		resp, err := web.Post(base+"/api/v3/app-manifests/"+code+"/conversions", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c conversion
		_ = json.NewDecoder(resp.Body).Decode(&c)
		if resp.StatusCode != http.StatusCreated || c.Owner.Login != "octo-org" || c.Owner.Type != "Organization" {
			t.Fatalf("got %d owner %+v, want 201 owned by Organization octo-org", resp.StatusCode, c.Owner)
		}
	})

	t.Run("code expires after an hour", func(t *testing.T) {
		_, base := setup(t)
		code := manifestCode(t, base, "/settings/apps/new", strings.Replace(testManifest, "ghclaim-test", "ghclaim-expiry", 1))
		advance(time.Hour)
		if status, _ := convert(t, base, code); status != http.StatusNotFound {
			t.Fatalf("got %d, want 404 for an expired code", status)
		}
	})

	bad := []struct {
		name, manifest string
	}{
		{name: "no manifest", manifest: ""},
		{name: "not JSON", manifest: "{"},
		{name: "no url", manifest: `{"name":"a","redirect_url":"http://127.0.0.1:1/cb"}`},
		{name: "relative hook url", manifest: `{"url":"https://e.com","hook_attributes":{"url":"/hook"},"redirect_url":"http://127.0.0.1:1/cb"}`},
		{name: "events without a hook", manifest: `{"url":"https://e.com","default_events":["workflow_job"],"redirect_url":"http://127.0.0.1:1/cb"}`},
		{name: "bad permission level", manifest: `{"url":"https://e.com","default_permissions":{"actions":"rw"},"redirect_url":"http://127.0.0.1:1/cb"}`},
		{name: "name too long", manifest: `{"name":"` + strings.Repeat("n", 35) + `","url":"https://e.com","redirect_url":"http://127.0.0.1:1/cb"}`},
	}
	for _, tt := range bad {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			fake, base := setup(t)
			resp := postManifest(t, base, "/settings/apps/new", tt.manifest)
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("got %d, want 422", resp.StatusCode)
			}
			if n := len(fake.Apps()); n != 0 {
				t.Errorf("%d apps made, want none", n)
			}
		})
	}
}
