package secret

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

type fakeSM struct {
	value *string
	err   error
	asked []string
}

func (f *fakeSM) GetSecretValue(_ context.Context, in *secretsapi.GetSecretValueInput) (*secretsapi.GetSecretValueOutput, error) {
	f.asked = append(f.asked, in.SecretID)
	if f.err != nil {
		return nil, f.err
	}
	return &secretsapi.GetSecretValueOutput{SecretString: f.value}, nil
}

func TestResolve(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:secretsmanager:us-east-1:1:secret:webhook"
	tests := []struct {
		name       string
		sm         *fakeSM
		arn, plain string
		want       string
		wantErr    error
	}{
		{name: "ARN wins over the plain value", sm: &fakeSM{value: aws.String("from-sm")}, arn: arn, plain: "local", want: "from-sm"},
		{name: "plain value without an ARN", arn: "", plain: "local", want: "local"},
		{name: "neither", arn: "", plain: "  ", wantErr: ErrEmpty},
		{name: "empty secret", sm: &fakeSM{value: aws.String(" ")}, arn: arn, wantErr: ErrEmpty},
		{name: "no string", sm: &fakeSM{}, arn: arn, wantErr: ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sm SecretsManager
			if tt.sm != nil {
				sm = tt.sm
			}
			got, err := Resolve(context.Background(), sm, tt.arn, tt.plain)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %q, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			if tt.sm != nil && (len(tt.sm.asked) != 1 || tt.sm.asked[0] != tt.arn) {
				t.Errorf("asked Secrets Manager for %v, want [%s]", tt.sm.asked, tt.arn)
			}
		})
	}
}

func TestResolveErrorNeverCarriesTheValue(t *testing.T) {
	t.Parallel()
	sm := &fakeSM{err: errors.New("AccessDeniedException")}
	_, err := Resolve(context.Background(), sm, "arn:x", "plain-local-value")
	if err == nil || strings.Contains(err.Error(), "plain-local-value") || !strings.Contains(err.Error(), "arn:x") {
		t.Fatalf("got %v, want an error naming the ARN and no value", err)
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	got := Split(" new , old,,")
	if len(got) != 2 || got[0] != "new" || got[1] != "old" {
		t.Fatalf("got %q, want [new old]", got)
	}
}

// TestErrorNeverQuotesASecretPastedForItsARN: a variable meant for the
// secret's ARN that holds the secret itself (a webhook secret of GitHub's
// shape, lower-case hex, which the logs' shape redaction lets through) is
// not quoted back by the error; an ARN still is.
func TestErrorNeverQuotesASecretPastedForItsARN(t *testing.T) {
	t.Parallel()
	const pasted = "5ec5ca9e0f1b2c3d4e5f60718293a4b5c6d7e8f9"
	notFound := &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "Secrets Manager can't find the specified secret.", Fault: smithy.FaultClient}
	for _, id := range []string{pasted, "arn:aws:secretsmanager:us-east-1:1:secret:webhook"} {
		_, rerr := Resolve(context.Background(), &fakeSM{err: errors.New("ValidationException")}, id, "")
		_, cerr := NewCache(&fakeSM{err: notFound}, id, "", CacheOptions{}).Get(context.Background())
		// AWS's refusal names the resource as it was asked for: with the
		// role's policy naming the stack's secret, a pasted value is
		// refused (AccessDeniedException "... on resource: <SecretId>").
		_, rdenied := Resolve(context.Background(), deniedSM{}, id, "")
		_, cdenied := NewCache(deniedSM{}, id, "", CacheOptions{}).Get(context.Background())
		var denied *smithy.GenericAPIError
		if !errors.As(cdenied, &denied) || denied.Code != "AccessDeniedException" {
			t.Errorf("got %v, want AWS's error still reachable (errors.As)", cdenied)
		}
		for _, err := range []error{rerr, cerr, rdenied, cdenied} {
			leaked := err == nil || strings.Contains(err.Error(), pasted)
			if id == pasted && leaked {
				t.Errorf("got %v, want an error that does not quote the pasted secret", err)
			}
			if id != pasted && (err == nil || !strings.Contains(err.Error(), id)) {
				t.Errorf("got %v, want an error naming the ARN %s", err, id)
			}
		}
	}
}

// deniedSM refuses as Secrets Manager does a SecretId the role's policy
// does not name: the message quotes the id.
type deniedSM struct{}

func (deniedSM) GetSecretValue(_ context.Context, in *secretsapi.GetSecretValueInput) (*secretsapi.GetSecretValueOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User: arn:aws:sts::123456789012:assumed-role/ghclaim-WebhookFunctionRole-1A2B3C/ghclaim-WebhookFunction-4D5E6F" +
		" is not authorized to perform: secretsmanager:GetSecretValue on resource: " + in.SecretID +
		" because no identity-based policy allows the secretsmanager:GetSecretValue action"}
}
