package ghapp_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestUnauthorizedIsNobodysBudget: GitHub answers a credential it cannot
// resolve (here the App's key, rotated on GitHub) 401 with the rate
// headers of the unauthenticated budget of the caller's address (ghfake's
// DefaultUnauthenticatedLimit), which Lambda's shared addresses may have
// spent. That budget is neither the App's nor an installation's: taken
// for one, a 401 with remaining 0 stopped the redeliverer (its App
// reading at 0) and had go-github refuse every call of the installation's
// client, with no request, until the unauthenticated reset, up to an hour
// after the key was fixed.
func TestUnauthorizedIsNobodysBudget(t *testing.T) {
	t.Parallel()
	f, clk, seen := setupAhead(t)
	_, pub := testKey(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	f.fake.SetUnauthenticatedRate(60, 0, clk.Now().Add(time.Hour))
	f.fake.SetPublicKey(&other.PublicKey)
	ctx := context.Background()

	if _, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7); err == nil {
		t.Fatal("job status with a rotated key: no error, want GitHub's 401")
	}
	if _, err := f.client.App(ctx); err == nil {
		t.Fatal("GET /app with a rotated key: no error, want GitHub's 401")
	}
	if observed := seen.all(); len(observed) != 0 {
		t.Errorf("readings %+v taken from the 401s, want none: the unauthenticated budget is nobody's", observed)
	}

	// The operator fixes the key; the refusal's hold passes.
	f.fake.SetPublicKey(pub)
	clk.Set(clk.Now().Add(time.Minute))
	if _, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7); err != nil {
		t.Errorf("job status once the key is fixed: %v, want GitHub's answer", err)
	}
	if _, err := f.client.App(ctx); err != nil {
		t.Errorf("GET /app once the key is fixed: %v, want GitHub's answer", err)
	}
}
