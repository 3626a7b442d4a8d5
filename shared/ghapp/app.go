package ghapp

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-github/v62/github"
)

// App is the GitHub App as GET /app describes it.
type App struct {
	ID   int64
	Slug string
	Name string
}

// Installation is one installation of the App (GET /app/installations).
type Installation struct {
	ID      int64
	Account string
	// Target is "Organization" or "User".
	Target string
}

// jwtTransport authenticates each request as the App itself (a fresh App
// JWT), for the /app routes an installation token may not call.
type jwtTransport struct {
	c    *Client
	next http.RoundTripper
}

func (t jwtTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	jwt, err := appJWT(t.c.key, t.c.appID, t.c.now())
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+jwt)
	return t.next.RoundTrip(r)
}

// appClient is a go-github client authenticated as the App.
func (c *Client) appClient() *github.Client {
	gh := github.NewClient(&http.Client{Transport: jwtTransport{c: c, next: c.tr}, Timeout: c.timeout})
	gh.BaseURL = c.baseURL
	return gh
}

// App returns the App the key authenticates (GET /app): the operator's
// check that the App id and private key belong together and GitHub is
// reachable.
func (c *Client) App(ctx context.Context) (App, error) {
	a, _, err := c.appClient().Apps.Get(ctx, "")
	if err != nil {
		return App{}, fmt.Errorf("get app %d: %w", c.appID, err)
	}
	return App{ID: a.GetID(), Slug: a.GetSlug(), Name: a.GetName()}, nil
}

// Installations lists the App's installations (GET /app/installations,
// every page).
func (c *Client) Installations(ctx context.Context) ([]Installation, error) {
	gh := c.appClient()
	opt := &github.ListOptions{PerPage: 100}
	var out []Installation
	for {
		page, resp, err := gh.Apps.ListInstallations(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("list installations of app %d: %w", c.appID, err)
		}
		for _, in := range page {
			out = append(out, Installation{ID: in.GetID(), Account: in.GetAccount().GetLogin(), Target: in.GetTargetType()})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}
