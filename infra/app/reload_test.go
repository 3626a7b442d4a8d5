package app_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/app"
	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// heldSM holds the first PutSecretValue until release is closed, as a slow
// Secrets Manager call would: the first callback is then converting.
type heldSM struct {
	next    app.SecretsManager
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func newHeldSM(next app.SecretsManager) *heldSM {
	return &heldSM{next: next, started: make(chan struct{}), release: make(chan struct{})}
}

func (s *heldSM) PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, o ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	first := false
	s.once.Do(func() { first = true; close(s.started) })
	if first {
		<-s.release
	}
	return s.next.PutSecretValue(ctx, in, o...)
}

// TestReloadWhileConvertingConvertsNothing: the operator reloads GitHub's
// redirect while the first callback is storing the secrets (the page looks
// stuck, and "reload" is what a failed page says). The reload converts
// nothing (the code works once: GitHub's 404 for it used to end make app
// as a failure while the first callback stored the App, whose id was never
// shown) and says the conversion is under way; the run ends with the App.
func TestReloadWhileConvertingConvertsNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sm := newHeldSM(f.sm)
	reload := make(chan int, 1)
	cfg := f.config(func(pageURL string) {
		u, ok := firstCallbackHeld(t, sm, pageURL)
		if !ok {
			return
		}
		code, _ := submitTo(u) // the reload, while the first one stores
		reload <- code
		close(sm.release)
	})
	res, err := app.Run(context.Background(), cfg, f.cf, sm, &bytes.Buffer{})
	apps := f.fake.Apps()
	if err != nil || len(apps) != 1 || res.AppID != apps[0].ID || f.secretValue(t, f.stack.GitHubAppPrivateKeyARN) != apps[0].PEM {
		t.Fatalf("Run: %+v, %v; want the App registered and its key stored", res, err)
	}
	if code := <-reload; code != http.StatusConflict {
		t.Errorf("the reload while converting answered %d, want 409 (under way)", code)
	}
	if n := f.fake.Stats().Calls[ghfake.RouteManifestConversion]; n != 1 {
		t.Errorf("%d conversions, want 1: the code works once", n)
	}
}

// TestInterruptedWhileConvertingWaitsForTheApp: make app is interrupted
// (Ctrl-C, or its time is up) while a callback converts GitHub's code and
// stores the secrets. The code is spent and only that answer holds the
// App's key, so the run waits for it and ends with the App, instead of
// "no redirect" and an App whose key may or may not be stored.
func TestInterruptedWhileConvertingWaitsForTheApp(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sm := newHeldSM(f.sm)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := &signalWriter{line: "A conversion is under way", seen: make(chan struct{})}
	ran := make(chan struct{})
	cfg := f.config(func(pageURL string) {
		if _, ok := firstCallbackHeld(t, sm, pageURL); !ok {
			return
		}
		cancel() // interrupted while the first callback stores
		select {
		case <-waiting.seen: // the run waits for the conversion
		case <-ran: // it did not wait
		}
		close(sm.release)
	})
	res, err := app.Run(ctx, cfg, f.cf, sm, waiting)
	close(ran)
	apps := f.fake.Apps()
	if err != nil || len(apps) != 1 || res.AppID != apps[0].ID {
		t.Fatalf("Run: %+v, %v; want it to wait for the conversion under way and end with the App", res, err)
	}
}

// signalWriter closes seen once a write holds line.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	line string
	seen chan struct{}
	done bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.line) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

// firstCallbackHeld posts the page's manifest to GitHub and follows
// GitHub's redirect once, in the background: that first callback converts
// the code and stays in its first PutSecretValue (sm holds it). It returns
// the redirect, for a reload; false when the post failed (then nothing is
// held, and the run times out).
func firstCallbackHeld(t *testing.T, sm *heldSM, pageURL string) (*url.URL, bool) {
	t.Helper()
	u, err := postManifestFor(pageURL)
	if err != nil {
		t.Error(err)
		close(sm.release)
		return nil, false
	}
	go func() { _, _ = submitTo(u) }()
	<-sm.started
	return u, true
}
