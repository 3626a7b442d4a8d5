package secretsapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

// endpoint is an aws.HTTPClient that records each request and answers
// with one canned answer.
type endpoint struct {
	status int
	body   string
	reqs   []*http.Request
	bodies []string
}

func (e *endpoint) Do(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	e.reqs, e.bodies = append(e.reqs, r), append(e.bodies, string(b))
	return &http.Response{
		StatusCode: e.status, Status: http.StatusText(e.status),
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amzn-Requestid": {"sm-request-id"}},
		Body:   io.NopCloser(strings.NewReader(e.body)), Request: r,
	}, nil
}

func setup(t *testing.T, status int, body string) (*secretsapi.Client, *endpoint) {
	t.Helper()
	e := &endpoint{status: status, body: body}
	cfg := aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret-key-example", ""),
		HTTPClient:  e,
	}
	return secretsapi.New(cfg, func(o *secretsapi.Options) {
		o.Now = func() time.Time { return time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC) }
		o.Sleep = func(context.Context, time.Duration) error { return nil }
	}), e
}

const arn = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:ghclaim/webhook-a1b2c3"

func TestGetSecretValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		answer     string
		wantString *string
		wantBinary string
	}{
		// GetSecretValue's example answer in the Secrets Manager API reference.
		{name: "a string", answer: `{"ARN":"` + arn + `","CreatedDate":1.523477145713E9,"Name":"ghclaim/webhook","SecretString":"s3cr3t,old","VersionId":"EXAMPLE1-90ab-cdef-fedc-ba987SECRET1","VersionStages":["AWSPREVIOUS"]}`,
			wantString: aws.String("s3cr3t,old")},
		{name: "bytes, base64 on the wire", answer: `{"ARN":"` + arn + `","Name":"ghclaim/app-key","SecretBinary":"LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ==","VersionId":"v1","VersionStages":["AWSCURRENT"]}`,
			wantBinary: "-----BEGIN RSA PRIVATE KEY-----"},
		{name: "an empty string is not no string", answer: `{"ARN":"` + arn + `","SecretString":"","VersionId":"v1"}`, wantString: aws.String("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, e := setup(t, 200, tt.answer)
			out, err := c.GetSecretValue(context.Background(), &secretsapi.GetSecretValueInput{SecretID: arn})
			if err != nil {
				t.Fatal(err)
			}
			r := e.reqs[0]
			switch {
			case r.URL.String() != "https://secretsmanager.eu-west-1.amazonaws.com/" || r.Method != http.MethodPost:
				t.Errorf("request: %s %s", r.Method, r.URL)
			case r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
				t.Errorf("headers: %v", r.Header)
			case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/eu-west-1/secretsmanager/aws4_request"):
				t.Errorf("Authorization: %q", r.Header.Get("Authorization"))
			case e.bodies[0] != `{"SecretId":"`+arn+`"}`:
				t.Errorf("body: got %s", e.bodies[0])
			}
			if (out.SecretString == nil) != (tt.wantString == nil) || (tt.wantString != nil && *out.SecretString != *tt.wantString) {
				t.Errorf("SecretString: got %v, want %v", out.SecretString, tt.wantString)
			}
			if string(out.SecretBinary) != tt.wantBinary || out.ARN != arn {
				t.Errorf("got binary %q, ARN %q; want %q, %s", out.SecretBinary, out.ARN, tt.wantBinary, arn)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	c, _ := setup(t, 400, `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}`)
	_, err := c.GetSecretValue(context.Background(), &secretsapi.GetSecretValueInput{SecretID: arn})
	var api smithy.APIError
	var op *smithy.OperationError
	switch {
	case !errors.As(err, &api) || api.ErrorCode() != secretsapi.CodeResourceNotFound || api.ErrorMessage() != "Secrets Manager can't find the specified secret.":
		t.Errorf("got %v, want ResourceNotFoundException with its message", err)
	case !secretsapi.IsCode(err, secretsapi.CodeResourceNotFound) || secretsapi.IsCode(err, secretsapi.CodeInvalidRequest):
		t.Errorf("IsCode(%v): want ResourceNotFoundException only", err)
	case !errors.As(err, &op) || op.Service() != "Secrets Manager" || op.Operation() != "GetSecretValue":
		t.Errorf("got %v, want an operation error of Secrets Manager GetSecretValue", err)
	}
}

// TestRegionalIsTheSDKsRule compares Regional with the SDK's own resolver
// for every partition, with FIPS and dual-stack on and off.
func TestRegionalIsTheSDKsRule(t *testing.T) {
	t.Parallel()
	sdk := secretsmanager.NewDefaultEndpointResolverV2()
	for _, region := range []string{"us-east-1", "eu-central-2", "cn-north-1", "us-gov-west-1", "us-iso-east-1", "us-isob-east-1", "eu-isoe-west-1", "us-isof-south-1", "eusc-de-east-1"} {
		for _, fips := range []bool{false, true} {
			for _, dual := range []bool{false, true} {
				want, err := sdk.ResolveEndpoint(context.Background(), secretsmanager.EndpointParameters{Region: aws.String(region), UseFIPS: aws.Bool(fips), UseDualStack: aws.Bool(dual)})
				if err != nil {
					t.Fatalf("%s fips=%t dual=%t: the SDK: %v", region, fips, dual, err)
				}
				if got := secretsapi.Regional(region, fips, dual); got != want.URI.String() {
					t.Errorf("%s fips=%t dual=%t: got %s, want the SDK's %s", region, fips, dual, got, want.URI.String())
				}
			}
		}
	}
}

// The functions' configuration (shared/awsenv) reaches the rule, and the
// service's own configured endpoint wins.
func TestEndpointFromTheEnvironment(t *testing.T) {
	for _, n := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER"} {
		t.Setenv(n, "")
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		env  map[string]string
		want string
	}{
		{env: map[string]string{"AWS_REGION": "us-gov-west-1", "AWS_USE_FIPS_ENDPOINT": "true"}, want: "https://secretsmanager-fips.us-gov-west-1.amazonaws.com"},
		{env: map[string]string{"AWS_REGION": "eu-west-1", "AWS_USE_DUALSTACK_ENDPOINT": "true"}, want: "https://secretsmanager.eu-west-1.amazonaws.com"},
		{env: map[string]string{"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:5003"}, want: "http://127.0.0.1:5003"},
	}
	for _, tt := range tests {
		tt.env["AWS_ACCESS_KEY_ID"], tt.env["AWS_SECRET_ACCESS_KEY"] = "AKID", "SECRET"
		cfg, err := awsenv.Load(func(k string) string { return tt.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if got, err := secretsapi.Service.Endpoint(cfg); err != nil || got != tt.want {
			t.Errorf("%v: got %q, %v; want %s", tt.env, got, err, tt.want)
		}
	}
}

// TestRequestsAndAnswersMatchTheModel checks every member sent or read
// against Secrets Manager's published model, and the protocol's names.
func TestRequestsAndAnswersMatchTheModel(t *testing.T) {
	t.Parallel()
	m, err := emulator.LoadJSONModel("secretsmanager", "2017-10-17")
	if err != nil {
		t.Fatal(err)
	}
	if m.Metadata.TargetPrefix != "secretsmanager" || m.Metadata.JSONVersion != "1.1" {
		t.Errorf("protocol: got target prefix %q, JSON %q; want secretsmanager, 1.1", m.Metadata.TargetPrefix, m.Metadata.JSONVersion)
	}
	m.CheckOperation(t, "GetSecretValue", secretsapi.GetSecretValueInput{}, secretsapi.GetSecretValueOutput{})
	m.CheckErrors(t, secretsapi.CodeResourceNotFound, secretsapi.CodeInvalidRequest)
}
