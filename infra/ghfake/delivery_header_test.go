package ghfake_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestDeliveryHeaderIsGitHubs: a delivery carries every header GitHub
// documents for an App's webhook (docs.github.com/webhooks/
// webhook-events-and-payloads, Delivery headers), both signatures among
// them: GitHub still sends the SHA-1 X-Hub-Signature beside
// X-Hub-Signature-256, so a handler that reads the wrong one is caught
// here. The SHA-256 value is GitHub's own test vector
// (docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries).
func TestDeliveryHeaderIsGitHubs(t *testing.T) {
	t.Parallel()
	const secret, body = "It's a Secret to Everybody", "Hello, World!"
	sha1Mac := hmac.New(sha1.New, []byte(secret))
	sha1Mac.Write([]byte(body))
	want := map[string]string{
		"Content-Type":                           "application/json",
		"X-Github-Event":                         "workflow_job",
		"X-Github-Delivery":                      "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"X-Github-Hook-Id":                       strconv.Itoa(ghfake.HookID),
		"X-Github-Hook-Installation-Target-Type": "integration",
		"X-Github-Hook-Installation-Target-Id":   "1234",
		"X-Hub-Signature":                        "sha1=" + hex.EncodeToString(sha1Mac.Sum(nil)),
		"X-Hub-Signature-256":                    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
	}
	h := ghfake.DeliveryHeader("workflow_job", "72d3162e-cc78-11e3-81ab-4c9367dc0958", 1234, []byte(body), secret)
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if ua := h.Get("User-Agent"); len(ua) <= len("GitHub-Hookshot/") || ua[:len("GitHub-Hookshot/")] != "GitHub-Hookshot/" {
		t.Errorf("User-Agent = %q, want the GitHub-Hookshot/ prefix", ua)
	}
	// A webhook without a secret is sent unsigned.
	unsigned := ghfake.DeliveryHeader("ping", "g", 1234, []byte(body), "")
	if s1, s256 := unsigned.Get("X-Hub-Signature"), unsigned.Get("X-Hub-Signature-256"); s1 != "" || s256 != "" {
		t.Errorf("no secret: signatures %q, %q, want none", s1, s256)
	}
}

// TestDeliverSendsGitHubsHeader: what Deliver sends is DeliveryHeader for
// the fake's App, and a redelivery sends the same again.
func TestDeliverSendsGitHubsHeader(t *testing.T) {
	t.Parallel()
	f := setup(t, ghfake.WithAppID(appID))
	var got []http.Header
	f.fake.SetWebhook(func(_ context.Context, h http.Header, _ []byte) (int, []byte, error) {
		got = append(got, h)
		return 200, nil, nil
	}, "s")
	body := []byte(`{"action":"queued"}`)
	f.fake.Deliver(context.Background(), "workflow_job", "g-1", body)
	want := ghfake.DeliveryHeader("workflow_job", "g-1", appID, body, "s")
	if len(got) != 1 {
		t.Fatalf("%d deliveries reached the webhook, want 1", len(got))
	}
	for k := range want {
		if got[0].Get(k) != want.Get(k) {
			t.Errorf("%s = %q, want %q", k, got[0].Get(k), want.Get(k))
		}
	}
}

// TestHTTPTargetFollowsNoRedirect: GitHub does not follow a redirect: the
// 3xx is the answer, a failed delivery. Go's client follows one (a 307
// re-posts the body), so the webhook behind it got the delivery and the
// log said OK.
func TestHTTPTargetFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, _ *http.Request) {
		followed.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f := setup(t)
	f.fake.SetWebhook(ghfake.HTTPTarget(srv.URL+"/hook"), "s")
	d := f.fake.Deliver(context.Background(), "workflow_job", "", []byte(`{"action":"queued"}`))
	if d.OK() || d.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("delivery = %q %d, want a failed delivery with status 307", d.Status, d.StatusCode)
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times, want never", n)
	}
}

// TestRedeliverySignsWithTheSecretOfTheMoment: GitHub signs every send with
// the webhook's secret as it is when it sends, so a redelivery after the
// secret was rotated carries the new signature, and one after the secret was
// cleared carries none. The fake used to copy the first send's header into
// the redelivery: the old signatures reached a webhook whose secret had been
// cleared, and a handler that keeps accepting a retired secret's signatures
// passed its tests.
func TestRedeliverySignsWithTheSecretOfTheMoment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, secret string }{
		{name: "rotated", secret: "new secret"},
		{name: "cleared", secret: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			var (
				mu  sync.Mutex
				got []http.Header
			)
			hook := func(_ context.Context, h http.Header, _ []byte) (int, []byte, error) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, h)
				return http.StatusServiceUnavailable, nil, nil
			}
			f.fake.SetWebhook(hook, "old secret")
			body := []byte(`{"action":"queued"}`)
			first := f.fake.Deliver(context.Background(), "workflow_job", "g-1", body)
			f.fake.SetWebhook(hook, tc.secret)

			iat := t0.Add(-30 * time.Second).Unix()
			req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/app/hook/deliveries/%d/attempts", f.srv.URL, first.ID), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600}))
			resp, err := web.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("redelivery answered %d, want 202", resp.StatusCode)
			}
			f.fake.Drain()

			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 {
				t.Fatalf("%d sends reached the webhook, want 2 (the delivery and its redelivery)", len(got))
			}
			want := ghfake.DeliveryHeader("workflow_job", "g-1", appID, body, tc.secret)
			for _, k := range []string{"X-Hub-Signature", "X-Hub-Signature-256", "X-GitHub-Delivery"} {
				if g, w := got[1].Get(k), want.Get(k); g != w {
					t.Errorf("redelivery %s = %q, want %q", k, g, w)
				}
			}
			if old := got[0].Get("X-Hub-Signature-256"); old == "" || got[1].Get("X-Hub-Signature-256") == old {
				t.Errorf("redelivery X-Hub-Signature-256 = %q, want other than the first send's %q", got[1].Get("X-Hub-Signature-256"), old)
			}
			if log := f.fake.Deliveries(); len(log) != 2 || log[0].Header.Get("X-Hub-Signature-256") != want.Get("X-Hub-Signature-256") {
				t.Errorf("logged redelivery header = %v, want the one sent", log[0].Header)
			}
		})
	}
}
