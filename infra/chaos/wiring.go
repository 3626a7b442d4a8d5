package chaos

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"time"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// GitHubFactory builds one claimer process's GitHub client for the App
// appID with key, talking to the API at baseURL, and the process's rate
// state shared through st (nil: the claimer's default).
type GitHubFactory func(baseURL string, appID int64, key []byte, st ratelimit.Store) (claim.GitHub, claim.RateState, error)

// NewAppKey returns a fresh PEM RSA key for a test GitHub App.
func NewAppKey() ([]byte, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
}

// AppGitHub is the production wiring, as functions/claimer builds it: the
// ghapp client with the rate-reading transport feeding a process-local
// tracker, which the claimer reads as its RateSource.
func AppGitHub(baseURL string, appID int64, key []byte, st ratelimit.Store) (claim.GitHub, claim.RateState, error) {
	tracker := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), time.Now)
	gh, err := ghapp.New(ghapp.Config{
		AppID: appID, PrivateKey: key, BaseURL: baseURL,
		Wrap: func(inst int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, inst, tracker, time.Now)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return gh, tracker, nil
}
