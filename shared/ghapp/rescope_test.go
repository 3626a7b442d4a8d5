package ghapp_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// TestRepositoryAddedToTheInstallationIsReached: an installation token
// keeps the repository selection its installation had when it was
// created. An operator adds a repository to the App's installation, and
// the repository's first job arrives at once: its generate-jitconfig with
// the cached token was a 404, which fails the claim for good
// (non_retryable), for up to the 55 minutes the token stays cached. A 404
// (not of a DELETE, whose 404 is "already gone") on a cached token is
// asked once more with a fresh token, at most once a minute per
// installation, so a lasting refusal costs no token exchange per call.
func TestRepositoryAddedToTheInstallationIsReached(t *testing.T) {
	t.Parallel()
	l := newLagging(t)
	ctx := context.Background()
	l.fake.SetInstallation(inst, "octo", true, "hello")
	if _, err := l.client.GenerateJIT(ctx, inst, repoJIT("before")); err != nil {
		t.Fatal(err) // mints and caches the installation's token
	}
	l.fake.SetInstallation(inst, "octo", true, "hello", "web")
	req := repoJIT("added")
	req.Repo = "web"
	if _, err := l.client.GenerateJIT(ctx, inst, req); err != nil {
		t.Fatalf("a repository added to the installation after its token was cached: %v (class %s); want its runner registered",
			err, failure.Classify(err).Class)
	}
	if n := l.tokens.Load(); n != 2 {
		t.Fatalf("%d token exchanges, want 2 (the first, and one for the added repository)", n)
	}

	// A DELETE's 404 is a runner already gone: no exchange.
	if err := l.client.DeleteRunner(ctx, inst, ghapp.ScopeRepo, "octo", "web", 999999); err != nil {
		t.Fatalf("delete of a runner already gone: %v", err)
	}
	// Another repository added within the minute: its 404 stands (one
	// fresh token a minute), and a minute on it is reached.
	l.fake.SetInstallation(inst, "octo", true, "hello", "web", "api")
	l.clock.Advance(10 * time.Second)
	req = repoJIT("later")
	req.Repo = "api"
	if _, err := l.client.GenerateJIT(ctx, inst, req); failure.Classify(err).Class != failure.NonRetryable {
		t.Fatalf("within the minute: %v; want GitHub's 404 to stand", err)
	}
	if n := l.tokens.Load(); n != 2 {
		t.Fatalf("%d token exchanges after the DELETE's 404 and a refusal within the minute, want still 2", n)
	}
	l.clock.Advance(time.Minute)
	if _, err := l.client.GenerateJIT(ctx, inst, req); err != nil || l.tokens.Load() != 3 {
		t.Fatalf("a minute on: %v, %d token exchanges; want the runner registered with a third token", err, l.tokens.Load())
	}
}

// TestPermissionGrantedSinceTheTokenIsReached: an installation token keeps
// the permissions granted when it was created; a permission the owner
// granted since (the App's settings changed, the owner accepted) answers
// 403 "Resource not accessible by integration" with the cached token, a
// claim failed for good. Asked once more with a fresh token.
func TestPermissionGrantedSinceTheTokenIsReached(t *testing.T) {
	t.Parallel()
	l := newLagging(t)
	ctx := context.Background()
	perms := ghfake.DefaultPermissions()
	delete(perms, "administration")
	l.fake.AddInstallation(ghfake.Installation{ID: inst, Account: "octo", Org: true, Permissions: perms})
	if _, err := l.client.GenerateJIT(ctx, inst, repoJIT("before")); failure.Classify(err).Class != failure.NonRetryable {
		t.Fatalf("without administration: %v; want GitHub's 403 to stand (a fresh token)", err)
	}
	l.fake.AddInstallation(ghfake.Installation{ID: inst, Account: "octo", Org: true}) // granted
	if _, err := l.client.GenerateJIT(ctx, inst, repoJIT("granted")); err != nil || l.tokens.Load() != 2 {
		t.Fatalf("after administration was granted: %v, %d token exchanges; want the runner registered with a second token", err, l.tokens.Load())
	}
}
