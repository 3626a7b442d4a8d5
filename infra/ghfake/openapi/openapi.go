// Package openapi checks JSON against GitHub's own published description of
// it: the answers of the REST routes ghclaim calls (what infra/ghfake
// serves) and the webhook payloads ghclaim receives (events/, test
// fixtures). A stand-in is only as good as its likeness to GitHub, and this
// is how the tests prove the likeness instead of assuming it.
//
// Design decisions:
//   - The description is vendored, not fetched: rest.json and webhooks.json
//     hold only the slice ghclaim needs (the operations of ghfake's Route*
//     patterns, the ping and workflow_job webhooks, and the component
//     schemas they reach), taken from the api.github.com documents of the
//     npm packages @octokit/openapi and @octokit/openapi-webhooks; their
//     "x-source" names the package versions. gen.mjs regenerates them and
//     is run by hand, never by `make test` (tests stay offline).
//   - gen.mjs turns OpenAPI's schema dialect into plain JSON Schema 2020-12
//     (nullable becomes a "null" type), so this package only compiles JSON
//     Schema, with a library, and asserts formats (date-time, uri).
//   - An error status the description does not list for a route (a 401 or
//     a rate-limit 403 that GitHub sends on any route) is checked against
//     GitHub's generic "basic-error" shape; an undescribed success status
//     is an error.
//
// It is a test kit: nothing in a production binary imports it.
package openapi

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed rest.json webhooks.json
var files embed.FS

const (
	restURL     = "https://ghclaim.invalid/openapi/rest.json"
	webhooksURL = "https://ghclaim.invalid/openapi/webhooks.json"
	basicError  = "basic-error"
)

// ErrUndescribed is returned for a route or a success status that GitHub's
// description does not have.
var ErrUndescribed = errors.New("not in GitHub's description")

// Description is the compiled slice of GitHub's description.
type Description struct {
	c         *jsonschema.Compiler
	responses map[string]map[string]string // route → status → $defs name ("": no body)

	mu     sync.Mutex
	cached map[string]*jsonschema.Schema
}

// Load reads the vendored description.
func Load() (*Description, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	var rest struct {
		Responses map[string]map[string]string `json:"x-responses"`
	}
	for url, name := range map[string]string{restURL: "rest.json", webhooksURL: "webhooks.json"} {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", name, err)
		}
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", name, err)
		}
		if url == restURL {
			if err := json.Unmarshal(b, &rest); err != nil {
				return nil, fmt.Errorf("openapi: %s: %w", name, err)
			}
		}
	}
	return &Description{c: c, responses: rest.Responses, cached: map[string]*jsonschema.Schema{}}, nil
}

func (d *Description) schema(url, def string) (*jsonschema.Schema, error) {
	loc := url + "#/$defs/" + def
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.cached[loc]; s != nil {
		return s, nil
	}
	s, err := d.c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("openapi: compile %s: %w", def, err)
	}
	d.cached[loc] = s
	return s, nil
}

// Statuses returns the statuses the description lists for route (a
// ghfake Route* pattern such as "GET /orgs/{org}/actions/runners").
func (d *Description) Statuses(route string) []int {
	var out []int
	for st := range d.responses[route] {
		if n, err := strconv.Atoi(st); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Response checks an answer of route: status and body against the
// response the description gives for that status.
func (d *Description) Response(route string, status int, body []byte) error {
	byStatus, ok := d.responses[route]
	if !ok {
		return fmt.Errorf("route %q: %w", route, ErrUndescribed)
	}
	def, ok := byStatus[strconv.Itoa(status)]
	switch {
	case !ok && status < 400:
		return fmt.Errorf("%s answered %d: %w", route, status, ErrUndescribed)
	case !ok:
		def = basicError
	case def == "":
		if len(bytes.TrimSpace(body)) != 0 {
			return fmt.Errorf("%s %d: GitHub sends no body, got %q", route, status, body)
		}
		return nil
	}
	return d.validate(restURL, def, body, fmt.Sprintf("%s %d", route, status))
}

// Webhook checks a delivery body of event (the X-GitHub-Event header):
// "ping", or "workflow_job" with the body's action.
func (d *Description) Webhook(event string, body []byte) error {
	def := event
	if event != "ping" {
		var head struct {
			Action string `json:"action"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			return fmt.Errorf("%s: %w", event, err)
		}
		def = strings.ReplaceAll(event+"-"+head.Action, "_", "-")
	}
	return d.validate(webhooksURL, def, body, "webhook "+def)
}

func (d *Description) validate(url, def string, body []byte, what string) error {
	s, err := d.schema(url, def)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: body is not JSON: %w", what, err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
