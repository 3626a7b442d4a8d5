package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/app"
)

// refusingSM refuses every write, as Secrets Manager does without the
// permission.
type refusingSM struct{}

func (refusingSM) PutSecretValue(context.Context, *secretsmanager.PutSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error) {
	return nil, errors.New("AccessDeniedException: not authorized to perform secretsmanager:PutSecretValue")
}

// TestStoreFailureSaysWhatIsLeft: when the key cannot be stored after the
// conversion, GitHub's answer was its only copy and it is never shown: the
// error says to make new ones (before: "store the key by hand", a key the
// operator never saw).
func TestStoreFailureSaysWhatIsLeft(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var out bytes.Buffer
	_, err := app.Run(context.Background(), f.config(func(pageURL string) { _, _ = submit(pageURL) }), f.cf, refusingSM{}, &out)
	if err == nil || !strings.Contains(err.Error(), "AccessDeniedException") || !strings.Contains(err.Error(), "generate a new private key") ||
		!strings.Contains(err.Error(), "run make app again") {
		t.Fatalf("Run: %v; want the refusal and what is left to do", err)
	}
	for _, a := range f.fake.Apps() {
		if strings.Contains(err.Error()+out.String(), a.PEM) {
			t.Fatal("the key reached the error or the output")
		}
	}
}

// commaSecret rewrites the conversion answer's webhook_secret to hold a
// comma, which GitHub's generated (hex) secrets never do.
func commaSecret(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/conversions") {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var answer map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err == nil && rec.Code == http.StatusCreated {
			answer["webhook_secret"] = "0123abcd,4567ef"
		}
		b, _ := json.Marshal(answer)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(b)
	})
}

// TestCommaInTheWebhookSecretIsNotStored: the webhook reads its secret as a
// rotation list ("new,old"), so a secret with a comma would refuse every
// delivery. The key is stored, the secret is not, and the error says what
// to do, without the secret.
func TestCommaInTheWebhookSecretIsNotStored(t *testing.T) {
	t.Parallel()
	f := setup(t)
	gh := httptest.NewServer(commaSecret(f.fake))
	t.Cleanup(gh.Close)
	f.gh = gh
	before := f.secretValue(t, f.stack.WebhookSecretARN)
	var out bytes.Buffer
	_, err := app.Run(context.Background(), f.config(func(pageURL string) { _, _ = submit(pageURL) }), f.cf, f.sm, &out)
	if err == nil || !strings.Contains(err.Error(), "holds a comma") || !strings.Contains(err.Error(), f.stack.WebhookSecretARN) ||
		!strings.Contains(err.Error(), "set a new webhook secret without commas") {
		t.Fatalf("Run: %v; want the comma, the secret's ARN and what to do", err)
	}
	if strings.Contains(err.Error()+out.String(), "0123abcd") {
		t.Fatal("the webhook secret reached the error or the output")
	}
	if after := f.secretValue(t, f.stack.WebhookSecretARN); after != before {
		t.Fatal("the webhook secret with a comma was stored")
	}
	apps := f.fake.Apps()
	if len(apps) != 1 || f.secretValue(t, f.stack.GitHubAppPrivateKeyARN) != apps[0].PEM {
		t.Fatalf("%d Apps; want one, its key stored", len(apps))
	}
}
