package app_test

import (
	"bytes"
	"context"
	"errors"
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
