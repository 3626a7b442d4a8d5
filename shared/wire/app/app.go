// Package app wires the GitHub App client as the claimer, the reclaimer,
// the janitor and the redeliverer use it: the private key read when needed
// through the TTL secret cache (wire.Secret), and every response's
// X-RateLimit-* reading fed to the function's rate state. It is the one
// place that wiring is written, so the four cannot drift apart.
//
// Decision: a package of its own, not part of shared/wire, because it links
// go-github, which the webhook's bootstrap does not carry.
//
// It must never read the key at wiring time (a function deployed before
// make app wrote it must start) nor log it.
package app

import (
	"cmp"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/wire"
)

// Tracked is the App client of a function that acts for installations
// (claimer, reclaimer, janitor): each installation's readings go to a
// tracker that shares them with the other functions through st. The
// tracker is returned for the flow's rate reads and its Persist.
func Tracked(env wire.Env, awsCfg aws.Config, c config.GitHubApp, st ratelimit.Store) (*ghapp.Keyed, *ratelimit.Tracker, error) {
	rates := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), env.Now)
	gh, err := keyed(awsCfg, c, ghapp.Config{
		Wrap: func(installationID int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, installationID, rates, env.Now)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return gh, rates, nil
}

// Own is the App client of a function that calls the App's own routes
// (the redeliverer reads the delivery log with the App's JWT): their
// readings, the App's budget, go to budget.
func Own(env wire.Env, awsCfg aws.Config, c config.GitHubApp, budget ratelimit.Observer) (*ghapp.Keyed, error) {
	return keyed(awsCfg, c, ghapp.Config{
		WrapApp: func(base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, 0, budget, env.Now)
		},
	})
}

// keyed completes cfg with the App's id and API and builds the client on
// the key's secret cache.
func keyed(awsCfg aws.Config, c config.GitHubApp, cfg ghapp.Config) (*ghapp.Keyed, error) {
	key := wire.Secret(awsCfg, c.PrivateKeyARN, c.PrivateKey)
	cfg.AppID, cfg.BaseURL, cfg.KeyName = c.AppID, c.GitHubAPIURL, cmp.Or(key.Name(), "GITHUB_APP_PRIVATE_KEY")
	return ghapp.NewKeyed(cfg, key.Bytes)
}
