package secretscan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// github sits in front of the GitHub stand-in: it records every credential
// that crosses it (the Authorization of each request: App JWTs and
// installation tokens; each token and JIT config answered) and, when told
// to, answers a route with an error whose message echoes the request's
// Authorization header, as a proxy or a verbose error page might.
type github struct {
	next http.Handler

	mu          sync.Mutex
	credentials map[string]bool
	jitConfigs  []string
	echoes      map[string]echo // route substring → fault
}

type echo struct {
	status int
	left   int
}

func newGitHub(next http.Handler) *github {
	return &github{next: next, credentials: map[string]bool{}, echoes: map[string]echo{}}
}

// echo makes the next n requests whose path contains route answer status
// with a GitHub-shaped JSON body that quotes their Authorization header.
func (g *github) echo(route string, status, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.echoes[route] = echo{status: status, left: n}
}

func (g *github) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	g.mu.Lock()
	if _, cred, ok := strings.Cut(auth, " "); ok && cred != "" {
		g.credentials[cred] = true
	}
	var fault *echo
	for route, e := range g.echoes {
		if e.left > 0 && strings.Contains(r.URL.Path, route) {
			e.left--
			g.echoes[route] = e
			fault = &e
			break
		}
	}
	g.mu.Unlock()
	if fault != nil {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(fault.status)
		fmt.Fprintf(w, `{"message":"request refused (Authorization: %s)","documentation_url":"https://docs.github.com/rest","status":"%d"}`, auth, fault.status)
		return
	}
	rec := &recorder{ResponseWriter: w}
	g.next.ServeHTTP(rec, r)
	var answer struct {
		Token     string `json:"token"`
		JITConfig string `json:"encoded_jit_config"`
	}
	if json.Unmarshal(rec.body.Bytes(), &answer) == nil {
		g.mu.Lock()
		if answer.Token != "" {
			g.credentials[answer.Token] = true
		}
		if answer.JITConfig != "" {
			g.jitConfigs = append(g.jitConfigs, answer.JITConfig)
		}
		g.mu.Unlock()
	}
}

// seen returns the credentials and JIT configs recorded so far.
func (g *github) seen() (creds, jits []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.credentials {
		creds = append(creds, c)
	}
	return creds, append([]string(nil), g.jitConfigs...)
}

// recorder keeps a copy of the body written through it.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}
