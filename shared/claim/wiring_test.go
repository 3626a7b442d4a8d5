package claim_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"sync"
	"testing"

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
// and feeds the tracker the claimer reads.
func newGitHub(t *testing.T, h *harness) (claim.GitHub, *ratelimit.Tracker) {
	t.Helper()
	tr := ratelimit.NewTracker(h.store, ratelimit.DefaultPersistRule(), h.clock.Now)
	gh, err := ghapp.New(ghapp.Config{
		AppID: appID, PrivateKey: appKey(), BaseURL: h.ghURL,
		Wrap: func(inst int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, inst, tr, h.clock.Now)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return gh, tr
}

func newPolicy() claim.Policy { return backoff.Default() }
