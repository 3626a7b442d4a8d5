package secret

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

type fakeSM struct {
	value *string
	err   error
	asked []string
}

func (f *fakeSM) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.asked = append(f.asked, aws.ToString(in.SecretId))
	if f.err != nil {
		return nil, f.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: f.value}, nil
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
