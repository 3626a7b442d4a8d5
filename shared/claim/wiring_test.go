package claim_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

const appID = int64(99)

// appKey is the GitHub App's private key, made once per test binary.
var appKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

// newGitHub is one process's GitHub App client and rate tracker, wired
// as main wires them: the rate transport wraps each installation's client
// and feeds the tracker the claimer reads (transport false: a client
// without it).
func newGitHub(t *testing.T, rs ratelimit.Store, url string, now func() time.Time, transport bool) (claim.GitHub, *ratelimit.Tracker) {
	t.Helper()
	tr := ratelimit.NewTracker(rs, ratelimit.DefaultPersistRule(), now)
	cfg := ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: url, Now: now}
	if transport {
		cfg.Wrap = func(inst int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, inst, tr, now)
		}
	}
	gh, err := ghapp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return gh, tr
}

func newPolicy() claim.Policy { return backoff.Default() }
