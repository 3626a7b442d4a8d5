package awsenv_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ghclaim/ghclaim/shared/awsenv"
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
