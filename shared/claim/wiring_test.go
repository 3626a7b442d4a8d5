package claim_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"sync"
	"testing"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
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

// newGitHub is one process's GitHub App client, as main builds it.
func newGitHub(t *testing.T, h *harness) (claim.GitHub, claim.RateSource) {
	t.Helper()
	gh, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: h.ghURL})
	if err != nil {
		t.Fatal(err)
	}
	return gh, nil
}

func newPolicy() claim.Policy { return backoff.Default() }
