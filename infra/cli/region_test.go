package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/cli"
)

// Without a region every AWS call failed with the SDK's "endpoint rule
// error, Invalid Configuration: Missing Region" (against moto, with an
// unreadable 500), after the flags were read: AWSConfig refuses at once,
// saying what to set. Not parallel: it sets the environment.
func TestAWSConfigNeedsARegion(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "config")
	must(t, os.WriteFile(empty, nil, 0o600))
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	if _, err := cli.AWSConfig(context.Background()); err == nil || !strings.Contains(err.Error(), "no AWS region: set AWS_REGION") {
		t.Fatalf("AWSConfig without a region: error %v, want one saying to set AWS_REGION", err)
	}
	t.Setenv("AWS_REGION", "eu-west-3")
	if cfg, err := cli.AWSConfig(context.Background()); err != nil || cfg.Region != "eu-west-3" {
		t.Fatalf("AWSConfig with AWS_REGION=eu-west-3: region %q, error %v", cfg.Region, err)
	}
}
