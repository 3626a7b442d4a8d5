package awsenv_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

func TestLoad(t *testing.T) {
	full := map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value",
		"AWS_SESSION_TOKEN": "tok-value", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
	}
	without := func(k string) map[string]string {
		m := map[string]string{}
		for kk, v := range full {
			if kk != k {
				m[kk] = v
			}
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{name: "everything", env: full},
		{name: "default region", env: func() map[string]string { m := without("AWS_REGION"); m["AWS_DEFAULT_REGION"] = "eu-west-1"; return m }()},
		{name: "no region", env: without("AWS_REGION"), wantErr: "AWS_REGION"},
		{name: "no key id", env: without("AWS_ACCESS_KEY_ID"), wantErr: "AWS_ACCESS_KEY_ID"},
		{name: "no secret", env: without("AWS_SECRET_ACCESS_KEY"), wantErr: "AWS_SECRET_ACCESS_KEY"},
		{name: "no endpoint", env: without("AWS_ENDPOINT_URL")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := awsenv.Load(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error naming %s", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "tok-value") {
					t.Fatalf("error %q carries a credential", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Region != "eu-west-1" {
				t.Errorf("region %q, want eu-west-1", cfg.Region)
			}
			if got, want := aws.ToString(cfg.BaseEndpoint), tt.env["AWS_ENDPOINT_URL"]; got != want {
				t.Errorf("endpoint %q, want %q", got, want)
			}
			c, err := cfg.Credentials.Retrieve(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c.AccessKeyID != "AKIDEXAMPLE" || c.SecretAccessKey != "s3cr3t-value" || c.SessionToken != "tok-value" {
				t.Errorf("credentials %q/%q/%q not taken from the environment", c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
			}
		})
	}
}

// sentTo is an HTTP client that records where a request went and fails it.
type sentTo struct{ hosts []string }

func (s *sentTo) Do(r *http.Request) (*http.Response, error) {
	s.hosts = append(s.hosts, r.URL.Scheme+"://"+r.URL.Host)
	return nil, errors.New("recorded, not sent")
}

// TestEndpointSettings: the SDK clients a function builds from Load's
// config honour the SDK's endpoint variables as config.LoadDefaultConfig's
// would (FIPS, dual-stack, per-service endpoints, ignoring configured
// ones); an unreadable value is an error naming its variable.
func TestEndpointSettings(t *testing.T) {
	for _, n := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_SECRETS_MANAGER"} {
		t.Setenv(n, "") // the clients look these up in the process too
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
	base := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value"}
	tests := []struct {
		name    string
		env     map[string]string
		sqs, sm string // sm: "" leaves Secrets Manager's endpoint unchecked
	}{
		{name: "defaults", sqs: "https://sqs.us-east-1.amazonaws.com", sm: "https://secretsmanager.us-east-1.amazonaws.com"},
		{name: "fips", env: map[string]string{"AWS_USE_FIPS_ENDPOINT": "true"},
			sqs: "https://sqs-fips.us-east-1.amazonaws.com", sm: "https://secretsmanager-fips.us-east-1.amazonaws.com"},
		{name: "fips off", env: map[string]string{"AWS_USE_FIPS_ENDPOINT": "False"},
			sqs: "https://sqs.us-east-1.amazonaws.com", sm: "https://secretsmanager.us-east-1.amazonaws.com"},
		{name: "dual-stack", env: map[string]string{"AWS_USE_DUALSTACK_ENDPOINT": "true"},
			sqs: "https://sqs.us-east-1.api.aws", sm: "https://secretsmanager.us-east-1.amazonaws.com"}, // Secrets Manager's regular names are dual-stack
		{name: "one service's endpoint", env: map[string]string{"AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:4566"},
			sqs: "https://sqs.us-east-1.amazonaws.com", sm: "http://127.0.0.1:4566"},
		{name: "configured endpoints ignored", env: map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
			"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:5000", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
			sqs: "https://sqs.us-east-1.amazonaws.com", sm: "https://secretsmanager.us-east-1.amazonaws.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := awsenv.Load(func(k string) string {
				if v, ok := tt.env[k]; ok {
					return v
				}
				return base[k]
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := &sentTo{}
			cfg.HTTPClient = rec
			cfg.RetryMaxAttempts = 1
			_, _ = sqs.NewFromConfig(cfg).GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
			_, _ = secretsapi.New(cfg).GetSecretValue(context.Background(), &secretsapi.GetSecretValueInput{SecretID: "s"})
			want := []string{tt.sqs, tt.sm}
			if tt.sm == "" && len(rec.hosts) > 0 {
				rec.hosts, want = rec.hosts[:1], want[:1]
			}
			if !slices.Equal(rec.hosts, want) {
				t.Errorf("requests went to %v, want %v", rec.hosts, want)
			}
		})
	}
	for _, name := range []string{"AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		for value, want := range map[string]string{"yes": name, "true": "AWS_ENDPOINT_URL"} {
			// With AWS_ENDPOINT_URL set: "yes" is unreadable; FIPS or
			// dual-stack with a custom endpoint would fail every request.
			_, err := awsenv.Load(func(k string) string {
				switch k {
				case name:
					return value
				case "AWS_ENDPOINT_URL":
					return "http://127.0.0.1:4566"
				}
				return base[k]
			})
			if name == "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" && value == "true" {
				if err != nil {
					t.Errorf("%s=true with AWS_ENDPOINT_URL: %v, want the endpoint ignored", name, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%s with AWS_ENDPOINT_URL: got %v, want an error naming %s and %s", name, value, err, name, want)
			}
		}
	}
}

// An explicit AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=false is a setting the
// SDK takes as decided (it overrides a config file's true), unlike unset.
func TestIgnoreFalseIsASetting(t *testing.T) {
	for value, wantFound := range map[string]bool{"": false, "false": true, "true": true} {
		cfg, err := awsenv.Load(func(k string) string {
			if k == "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" {
				return value
			}
			return map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET"}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		src := cfg.ConfigSources[0].(interface {
			GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error)
		})
		v, found, _ := src.GetIgnoreConfiguredEndpoints(context.Background())
		if found != wantFound || v != (value == "true") {
			t.Errorf("%q: got (%v, found %v), want (%v, found %v)", value, v, found, value == "true", wantFound)
		}
	}
}

// TestGhclaimEndpoint: GHCLAIM_ENDPOINT_URL (the template's declared
// variable that sam local's --env-vars can set) is the base endpoint when
// AWS_ENDPOINT_URL is unset, and AWS_ENDPOINT_URL (LocalStack's, injected
// into every function it runs) wins when both are; FIPS with it is refused
// at start naming it.
func TestGhclaimEndpoint(t *testing.T) {
	base := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "x"}
	with := func(kv ...string) func(string) string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tt := range []struct {
		name string
		env  func(string) string
		want string
	}{
		{"ghclaim's alone", with(awsenv.EndpointVar, "http://127.0.0.1:5000"), "http://127.0.0.1:5000"},
		{"the SDK's wins", with(awsenv.EndpointVar, "http://127.0.0.1:5000", "AWS_ENDPOINT_URL", "http://127.0.0.1:4566"), "http://127.0.0.1:4566"},
		{"ghclaim's empty (the template's value on AWS)", with(awsenv.EndpointVar, ""), ""},
	} {
		cfg, err := awsenv.Load(tt.env)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := aws.ToString(cfg.BaseEndpoint); got != tt.want {
			t.Errorf("%s: endpoint %q, want %q", tt.name, got, tt.want)
		}
	}
	_, err := awsenv.Load(with(awsenv.EndpointVar, "http://127.0.0.1:5000", "AWS_USE_FIPS_ENDPOINT", "true"))
	if err == nil || !strings.Contains(err.Error(), awsenv.EndpointVar) {
		t.Errorf("FIPS with %s: %v, want an error naming it", awsenv.EndpointVar, err)
	}
}
