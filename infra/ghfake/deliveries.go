package ghfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The App's webhook delivery log, as GitHub keeps it: every delivery the
// fake was asked to make (Deliver) or told about (RecordDelivery), newest
// first, paged with an opaque cursor in the Link header, kept Retention (3
// days, GitHub's) on the injected clock; and a redelivery that re-sends the
// original body to the webhook Target (same GUID, new id, redelivery true)
// and logs its outcome like any delivery. As GitHub does, the fake answers
// the ask 202 Accepted with {} without waiting for the redelivery, which
// reaches the Target and the log whenever the endpoint answers: maybe long
// after the redeliverer's call returned. A test that needs the outcome
// waits for it with Drain. (The fake used to redeliver before answering,
// kinder than GitHub: a redeliverer tested on it could rely on the outcome
// being in the log as soon as its ask returned.) The list's `status` filter
// is GitHub's too: by status_code, so it never lists an unanswered delivery.

// Routes of the delivery log, authenticated by the App JWT and charged to
// the App's own budget.
const (
	RouteDeliveries = "GET /app/hook/deliveries"
	RouteDelivery   = "GET /app/hook/deliveries/{delivery_id}"
	RouteRedeliver  = "POST /app/hook/deliveries/{delivery_id}/attempts"
)

const (
	// DefaultRetention is how long GitHub keeps a delivery in the log.
	DefaultRetention   = 72 * time.Hour
	defaultDeliveryPer = 30
	maxDeliveryPer     = 100
	cursorPrefix       = "v1_"
	docsDeliveries     = "https://docs.github.com/rest/apps/webhooks#list-deliveries-for-an-app-webhook"
	// StatusOK is GitHub's status of a delivery answered 2xx.
	StatusOK = "OK"
	// StatusUnreachable is GitHub's status of a delivery that got no answer.
	StatusUnreachable = "failed to connect to host"
)

// HookDelivery is one entry of the delivery log.
type HookDelivery struct {
	ID             int64     `json:"id"`
	GUID           string    `json:"guid"`
	DeliveredAt    time.Time `json:"delivered_at"`
	Redelivery     bool      `json:"redelivery"`
	Status         string    `json:"status"`
	StatusCode     int       `json:"status_code"`
	Event          string    `json:"event"`
	Action         string    `json:"action,omitempty"`
	InstallationID int64     `json:"installation_id,omitempty"`
	RepositoryID   int64     `json:"repository_id,omitempty"`
	// Header and Body are the request as sent (Body empty for an entry
	// recorded without one: it cannot be redelivered to a Target).
	Header http.Header `json:"-"`
	Body   []byte      `json:"-"`
	// Response is the body the endpoint answered.
	Response string `json:"-"`
}

// OK reports whether the delivery reached the endpoint and got a 2xx.
func (d HookDelivery) OK() bool { return d.Status == StatusOK }

// Target receives webhook deliveries, as the App's webhook URL does: it
// returns the status and body answered, or an error when no answer came
// (connection refused, timeout).
type Target func(ctx context.Context, header http.Header, body []byte) (int, []byte, error)

// HTTPTarget posts deliveries to url as GitHub does: a 10 s timeout
// (docs.github.com/webhooks/using-webhooks/best-practices-for-using-webhooks)
// and no redirect followed: a 3xx is the answer, a failed delivery like
// any non-2xx (Go's client would follow it, re-posting the body on a 307
// or 308, kinder than GitHub).
func HTTPTarget(url string) Target {
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	return func(ctx context.Context, h http.Header, body []byte) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header = h.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return resp.StatusCode, b, nil
	}
}

// WithRetention sets how long deliveries stay in the log (default 3 days).
// GitHub prunes lazily; a longer retention lets a test prove that a
// redeliverer does not rely on the pruning.
func WithRetention(d time.Duration) Option { return func(s *Server) { s.retention = d } }

// Drain waits until every redelivery asked so far (and any asked while it
// waits) has reached the webhook Target and is logged. A test calls it
// where it needs a redelivery's outcome: in the delivery log, or at the
// webhook.
func (s *Server) Drain() {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	for s.pendingN > 0 {
		s.pendingDone.Wait()
	}
}

// redeliverLater sends d in the background, counted until it is logged
// (Drain). A counter under a condition rather than a sync.WaitGroup: a
// redelivery may be asked while a test drains, which a WaitGroup forbids.
func (s *Server) redeliverLater(ctx context.Context, d HookDelivery) {
	s.pendingMu.Lock()
	s.pendingN++
	s.pendingMu.Unlock()
	go func() {
		defer func() {
			s.pendingMu.Lock()
			s.pendingN--
			s.pendingDone.Broadcast()
			s.pendingMu.Unlock()
		}()
		s.send(ctx, d)
	}()
}

// SetWebhook sets where deliveries go and the secret they are signed with
// (DeliveryHeader: an empty secret sends them unsigned, as GitHub does for
// a webhook without one). A nil target makes every delivery fail unreached.
func (s *Server) SetWebhook(t Target, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target, s.secret = t, secret
}

// SetAppRateLimit sets the App's own budget (the JWT-authenticated routes
// and the token exchange).
func (s *Server) SetAppRateLimit(limit, remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appRate = &bucket{limit: limit, remaining: remaining, reset: reset}
}

// Deliver sends one webhook delivery as GitHub does (signed, with a new
// GUID when guid is ""), to the Target set by SetWebhook, and logs it with
// its outcome.
func (s *Server) Deliver(ctx context.Context, event, guid string, body []byte) HookDelivery {
	if guid == "" {
		s.mu.Lock()
		s.guidSeq++
		guid = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.guidSeq)
		s.mu.Unlock()
	}
	return s.send(ctx, HookDelivery{GUID: guid, Event: event, Body: body})
}

// HookID is the id of the App's webhook the fake delivers for
// (X-GitHub-Hook-ID).
const HookID = 4242

// DeliveryHeader is the header GitHub sends with a delivery of the App
// appID's webhook (docs.github.com/webhooks/webhook-events-and-payloads,
// Delivery headers): the event, the GUID, the hook, its target (the App:
// type "integration", id the App's), a GitHub-Hookshot user agent, JSON,
// and, when the webhook has a secret, both signatures: the legacy SHA-1
// X-Hub-Signature beside X-Hub-Signature-256, each an HMAC hex digest of
// the body prefixed "sha1=" and "sha256=". Every test kit that delivers
// webhooks sends it, so none sends less than GitHub does.
func DeliveryHeader(event, guid string, appID int64, body []byte, secret string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/ghfake")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", guid)
	h.Set("X-GitHub-Hook-ID", strconv.Itoa(HookID))
	h.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	h.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(appID, 10))
	if secret != "" {
		h.Set("X-Hub-Signature", "sha1="+hexMAC(sha1.New, body, secret))
		h.Set("X-Hub-Signature-256", "sha256="+hexMAC(sha256.New, body, secret))
	}
	return h
}

func hexMAC(hash func() hash.Hash, body []byte, secret string) string {
	m := hmac.New(hash, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// send signs d's body with the webhook's secret as it is now, posts it to
// the target and logs the outcome.
func (s *Server) send(ctx context.Context, d HookDelivery) HookDelivery {
	s.mu.Lock()
	target, secret, appID := s.target, s.secret, s.appID
	s.mu.Unlock()
	if appID == 0 {
		appID = 1 // GET /app's id
	}
	// Built afresh for every send, a redelivery included: GitHub signs with
	// the secret the webhook has now, not the one of the first send, and
	// sends no signature once the secret is cleared.
	d.Header = DeliveryHeader(d.Event, d.GUID, appID, d.Body, secret)
	var p struct {
		Action       string `json:"action"`
		Installation struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Repository struct {
			ID int64 `json:"id"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(d.Body, &p)
	d.Action, d.InstallationID, d.RepositoryID = p.Action, p.Installation.ID, p.Repository.ID
	d.Status, d.StatusCode = StatusUnreachable, 0
	if target != nil {
		code, resp, err := target(ctx, d.Header.Clone(), d.Body)
		switch {
		case err != nil:
		case code >= 200 && code < 300:
			d.Status, d.StatusCode, d.Response = StatusOK, code, string(resp)
		default:
			d.Status, d.StatusCode, d.Response = fmt.Sprintf("Invalid HTTP Response: %d", code), code, string(resp)
		}
	}
	return s.RecordDelivery(d)
}

// RecordDelivery adds d to the log as it is (its outcome included), with a
// new id; DeliveredAt defaults to the clock's now. It returns the entry.
func (s *Server) RecordDelivery(d HookDelivery) HookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliverySeq++
	d.ID = s.deliverySeq
	if d.DeliveredAt.IsZero() {
		d.DeliveredAt = s.now()
	}
	d.DeliveredAt = d.DeliveredAt.UTC()
	if d.Status == "" {
		d.Status = StatusOK
		if d.StatusCode < 200 || d.StatusCode >= 300 {
			d.Status = fmt.Sprintf("Invalid HTTP Response: %d", d.StatusCode)
		}
	}
	d.Header = d.Header.Clone()
	d.Body = slices.Clone(d.Body)
	s.deliveries = append(s.deliveries, d)
	return d
}

// Deliveries returns the log as GitHub lists it: retained entries, newest first.
func (s *Server) Deliveries() []HookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retained()
}

// retained returns the entries still kept, newest first, dropping the
// others for good. Callers hold s.mu.
func (s *Server) retained() []HookDelivery {
	cut := s.now().Add(-s.retention)
	kept := s.deliveries[:0]
	for _, d := range s.deliveries {
		if !d.DeliveredAt.Before(cut) {
			kept = append(kept, d)
		}
	}
	s.deliveries = kept
	out := slices.Clone(kept)
	slices.Reverse(out) // ids grow with time: newest first
	return out
}

func (s *Server) delivery(id int64) (HookDelivery, bool) {
	for _, d := range s.retained() {
		if d.ID == id {
			return d, true
		}
	}
	return HookDelivery{}, false
}

// listDeliveries answers GET /app/hook/deliveries.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	per := defaultDeliveryPer
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "Bad request: per_page", docsDeliveries)
			return
		}
		per = min(n, maxDeliveryPer)
	}
	status := r.URL.Query().Get("status")
	keep, ok := statusFilters[status]
	if !ok {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+strconv.Quote(status)+` is not a member of ["success", "failure"].`, docsDeliveries)
		return
	}
	before := int64(-1)
	if c := r.URL.Query().Get("cursor"); c != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(c, cursorPrefix), 10, 64)
		if !strings.HasPrefix(c, cursorPrefix) || err != nil {
			writeError(w, http.StatusBadRequest, "Bad request: cursor", docsDeliveries)
			return
		}
		before = id
	}
	s.mu.Lock()
	all := s.retained()
	s.mu.Unlock()
	var page []HookDelivery
	more := false
	for _, d := range all {
		if (before >= 0 && d.ID >= before) || !keep(d.StatusCode) {
			continue
		}
		if len(page) == per {
			more = true
			break
		}
		page = append(page, d)
	}
	if more {
		q := url.Values{"per_page": {strconv.Itoa(per)}, "cursor": {cursorPrefix + strconv.FormatInt(page[len(page)-1].ID, 10)}}
		if status != "" {
			q.Set("status", status)
		}
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s/app/hook/deliveries?%s>; rel="next"`, r.Host, s.prefix, q.Encode()))
	}
	items := make([]map[string]any, 0, len(page))
	for _, d := range page {
		items = append(items, deliveryItem(d))
	}
	writeJSON(w, http.StatusOK, items)
}

// statusFilters are the values of the list's `status` parameter, by
// status_code as GitHub's description has them: "success" is 200-399,
// "failure" 400-599. A delivery that got no answer (status_code 0: a
// timeout, a refused connection) is neither, so `status=failure` never
// lists it; a fake that ignored the filter would let a redeliverer rely on
// it and miss exactly the deliveries an endpoint down leaves.
var statusFilters = map[string]func(code int) bool{
	"":        func(int) bool { return true },
	"success": func(c int) bool { return c >= 200 && c <= 399 },
	"failure": func(c int) bool { return c >= 400 && c <= 599 },
}

// deliveryItem is GitHub's hook-delivery-item for d.
func deliveryItem(d HookDelivery) map[string]any {
	var action, inst, repo any
	if d.Action != "" {
		action = d.Action
	}
	if d.InstallationID != 0 {
		inst = d.InstallationID
	}
	if d.RepositoryID != 0 {
		repo = d.RepositoryID
	}
	return map[string]any{
		"id": d.ID, "guid": d.GUID, "delivered_at": d.DeliveredAt.Format(time.RFC3339),
		"redelivery": d.Redelivery, "duration": 0.05, "status": d.Status, "status_code": d.StatusCode,
		"event": d.Event, "action": action, "installation_id": inst, "repository_id": repo, "throttled_at": nil,
	}
}

// getDelivery answers GET /app/hook/deliveries/{delivery_id}: the entry
// with the request and response.
func (s *Server) getDelivery(w http.ResponseWriter, r *http.Request) {
	d, ok := s.pathDelivery(r)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsDeliveries)
		return
	}
	item := deliveryItem(d)
	headers := map[string]string{}
	for k := range d.Header {
		headers[k] = d.Header.Get(k)
	}
	var payload any
	if json.Unmarshal(d.Body, &payload) != nil {
		payload = nil
	}
	item["url"] = ""
	item["request"] = map[string]any{"headers": headers, "payload": payload}
	item["response"] = map[string]any{"headers": map[string]string{}, "payload": d.Response}
	writeJSON(w, http.StatusOK, item)
}

// redeliver answers POST /app/hook/deliveries/{delivery_id}/attempts as
// GitHub does: 202 Accepted with {} (GitHub's description: an object), and
// the original body goes to the Target afterwards, its header built anew
// (DeliveryHeader: signed with the secret of the moment, not the first
// send's), logged as a redelivery when it is answered. Nothing of it is in the log when the 202
// is sent.
func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) {
	d, ok := s.pathDelivery(r)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsDeliveries)
		return
	}
	s.mu.Lock()
	s.redeliveries[d.GUID]++
	s.mu.Unlock()
	// The answer does not wait for the redelivery: a slow or hung
	// endpoint delays the log entry, never the 202. Counted for Drain
	// before the 202 leaves, so a test that drains on the answer waits.
	s.redeliverLater(context.WithoutCancel(r.Context()),
		HookDelivery{GUID: d.GUID, Event: d.Event, Body: d.Body, Redelivery: true})
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

func (s *Server) pathDelivery(r *http.Request) (HookDelivery, bool) {
	id, err := strconv.ParseInt(r.PathValue("delivery_id"), 10, 64)
	if err != nil {
		return HookDelivery{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivery(id)
}

// Redeliveries returns how many redeliveries of guid were asked.
func (s *Server) Redeliveries(guid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redeliveries[guid]
}
