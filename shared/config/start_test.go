package config

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// Start reads the pools from a real SecureString parameter (moto, through the SDK client it
// builds from the environment, as on Lambda) and names a missing one.
func TestStartReadsThePoolsParameter(t *testing.T) {
	t.Parallel()
	srv := emulator.ForTest(t)
	ctx := context.Background()
	name := "/" + emulator.StackName(t.Name()) + "/pools"
	if err := provisiontest.PutParameter(ctx, ssmapi.New(srv.ConfigForTest(t)), &ssmapi.PutParameterInput{
		Name: name, Value: twoPools, Type: ssmapi.TypeSecureString,
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		parameter string
		wantPools int
		wantErr   string
	}{
		{name: "none named: the environment's pools", wantPools: 1},
		{name: "a SecureString", parameter: name, wantPools: 2},
		// Named through shownName: the test's name holds a long run.
		{name: "missing", parameter: name + "-missing", wantErr: shownName(name+"-missing") + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			maps.Copy(m, srv.Env())
			m[PoolsParameterVar] = tt.parameter
			c, awsCfg, err := Start(ctx, env(m), LoadReclaimer)
			if tt.wantErr != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.Var != PoolsParameterVar || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want a %s error naming %s", err, PoolsParameterVar, tt.wantErr)
				}
				return
			}
			if err != nil || len(c.Pools) != tt.wantPools || awsCfg.Region != emulator.Region {
				t.Fatalf("got %d pools, region %q, %v, want %d pools in %s", len(c.Pools), awsCfg.Region, err, tt.wantPools, emulator.Region)
			}
		})
	}
}

func TestStartNamesAMissingRegion(t *testing.T) {
	t.Parallel()
	m := base()
	m["AWS_ACCESS_KEY_ID"], m["AWS_SECRET_ACCESS_KEY"] = "k", "s"
	if _, _, err := Start(context.Background(), env(m), LoadWebhook); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Fatalf("got %v, want an error naming AWS_REGION", err)
	}
}
