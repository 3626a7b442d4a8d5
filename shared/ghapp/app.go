package ghapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
)

// MaxDeliveriesPage is GitHub's cap on per_page for the delivery log.
const MaxDeliveriesPage = 100

// HookDelivery is one entry of the App's webhook delivery log
// (GitHub's hook-delivery-item). A redelivery is a new entry with a new ID
// and the same GUID, Redelivery true.
type HookDelivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	Redelivery  bool
	// Status is GitHub's verdict ("OK" for a 2xx answer, else the failure,
	// e.g. "Invalid HTTP Response: 503"); StatusCode the HTTP status our
	// endpoint answered (0 when none came back).
	Status         string
	StatusCode     int
	Event          string
	Action         string
	InstallationID int64
}

// OK reports whether GitHub counts the delivery as delivered: a 2xx answer
// and GitHub's own status "OK".
func (d HookDelivery) OK() bool {
	return d.StatusCode >= 200 && d.StatusCode < 300 && d.Status == "OK"
}

// DeliveryPage is one page of the delivery log, newest first. Next is the
// cursor of the following page ("" on the last one).
type DeliveryPage struct {
	Deliveries []HookDelivery
	Next       string
}

// app returns the client authenticated as the App itself (a fresh JWT per
// request), for the /app routes; built on first use. Config.WrapApp wraps
// its transport, so a rate-reading transport sees the App's own budget.
func (c *Client) app() *github.Client {
	c.appOnce.Do(func() {
		var rt http.RoundTripper = jwtTransport{c: c, next: c.tr}
		if c.wrapApp != nil {
			rt = c.wrapApp(rt)
		}
		gh := github.NewClient(&http.Client{Transport: rateTrim{rt}, Timeout: c.timeout})
		gh.BaseURL = c.baseURL
		c.appClient = gh
	})
	return c.appClient
}

// appState is the App-level client, apart from the installations'.
type appState struct {
	appOnce   sync.Once
	appClient *github.Client
}

// ListHookDeliveries reads one page of the App's webhook delivery log
// (GET /app/hook/deliveries), newest first; cursor "" is the newest page.
// perPage is capped at MaxDeliveriesPage.
func (c *Client) ListHookDeliveries(ctx context.Context, cursor string, perPage int) (DeliveryPage, error) {
	if perPage <= 0 || perPage > MaxDeliveriesPage {
		perPage = MaxDeliveriesPage
	}
	ds, resp, err := c.app().Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{Cursor: cursor, PerPage: perPage})
	if err != nil {
		return DeliveryPage{}, fmt.Errorf("list hook deliveries: %w", err)
	}
	p := DeliveryPage{Next: resp.Cursor, Deliveries: make([]HookDelivery, 0, len(ds))}
	for _, d := range ds {
		p.Deliveries = append(p.Deliveries, HookDelivery{
			ID: d.GetID(), GUID: d.GetGUID(), DeliveredAt: d.GetDeliveredAt().Time, Redelivery: d.GetRedelivery(),
			Status: d.GetStatus(), StatusCode: d.GetStatusCode(), Event: d.GetEvent(), Action: d.GetAction(),
			InstallationID: d.GetInstallationID(),
		})
	}
	return p, nil
}

// RedeliverHookDelivery asks GitHub to deliver an entry of the log again
// (POST /app/hook/deliveries/{id}/attempts). GitHub accepts with a 202 and
// delivers later; go-github reports a 202 as *github.AcceptedError, which
// is the success here.
func (c *Client) RedeliverHookDelivery(ctx context.Context, deliveryID int64) error {
	_, _, err := c.app().Apps.RedeliverHookDelivery(ctx, deliveryID)
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		return fmt.Errorf("redeliver hook delivery %d: %w", deliveryID, err)
	}
	return nil
}

// jwtTransport authenticates each request as the App, with a JWT dated by
// the client's clock.
type jwtTransport struct {
	c    *Client
	next http.RoundTripper
}

func (t jwtTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	jwt, err := appJWT(t.c.key, t.c.appID, t.c.now())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := t.next.RoundTrip(out)
	if resp != nil {
		// The answer points at the request as the caller made it, without
		// the JWT: go-github keeps it in every error it returns, and the
		// JWT mints tokens of every installation for minutes.
		resp.Request = req
	}
	return resp, err
}

// App is the GitHub App as GET /app describes it.
type App struct {
	ID   int64
	Slug string
	Name string
}

// App returns the App the key authenticates (GET /app): the operator's
// check that the App id and private key belong together and GitHub is
// reachable.
func (c *Client) App(ctx context.Context) (App, error) {
	a, _, err := c.app().Apps.Get(ctx, "")
	if err != nil {
		return App{}, fmt.Errorf("get app %d: %w", c.appID, err)
	}
	return App{ID: a.GetID(), Slug: a.GetSlug(), Name: a.GetName()}, nil
}
