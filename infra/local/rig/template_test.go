package rig_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/local/rig"
)

func TestFunctionsReadTheTemplatesEnvironment(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "template.yaml")
	tmpl := `
Parameters:
  RetryLadder:
    Type: String
    Default: 30s,1m
  LogLevel:
    Type: String
    Default: INFO
  Pools:
    Type: String
    Default: ""
Conditions:
  HasPools: !Not [!Equals [!Ref Pools, ""]]
  NoPools: !Not [!Condition HasPools]
Globals:
  Function:
    Timeout: 3
    MemorySize: 256
    Environment:
      Variables:
        TABLE_NAME: !Ref Table
        LOG_LEVEL: !Ref LogLevel
        POOLS: !If [HasPools, !Ref Pools, !If [NoPools, "scaffold", !Sub "${Unreachable}"]]
Resources:
  WebhookFunction:
    Properties:
      Timeout: 10
      Environment:
        Variables:
          WEBHOOK_SECRET_ARN: {"Ref": "WebhookSecret"}
  ClaimerFunction:
    Properties:
      Environment:
        Variables:
          RETRY_LADDER: !Ref RetryLadder
          LITERAL: "x"
  ReclaimerFunction:
    Properties:
      Timeout: 55
  RedelivererFunction:
    Properties:
      Timeout: 60
`
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	fns, err := rig.Functions(path, map[string]string{"RetryLadder": "1s,2s", "Pools": "[pools]"},
		map[string]string{"Table": "tbl-1", "WebhookSecret": "arn:secret"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, fn, key, want string
	}{
		{"a global Ref to a resource", "reclaimer", "TABLE_NAME", "tbl-1"},
		{"a parameter's default", "webhook", "LOG_LEVEL", "INFO"},
		{"a parameter override", "claimer", "RETRY_LADDER", "1s,2s"},
		{"the long Ref form", "webhook", "WEBHOOK_SECRET_ARN", "arn:secret"},
		{"a literal", "claimer", "LITERAL", "x"},
		{"the branch of an If its condition takes", "claimer", "POOLS", "[pools]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fns[tt.fn].Env[tt.key]; got != tt.want {
				t.Errorf("%s %s: got %q, want %q", tt.fn, tt.key, got, tt.want)
			}
		})
	}
	if fns["webhook"].Timeout != 10*time.Second || fns["claimer"].Timeout != 3*time.Second || fns["claimer"].MemoryMB != 256 {
		t.Errorf("limits: webhook %s, claimer %s %d MB; want 10s, 3s (global), 256 MB", fns["webhook"].Timeout, fns["claimer"].Timeout, fns["claimer"].MemoryMB)
	}
	if _, err := rig.Functions(path, nil, nil); err == nil {
		t.Errorf("an unresolvable Ref (Table with no stack) must fail, naming the variable")
	}
	fns, err = rig.Functions(path, nil, map[string]string{"Table": "tbl-1", "WebhookSecret": "arn:secret"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fns["webhook"].Env["POOLS"]; got != "scaffold" {
		t.Errorf("POOLS with the default Pools: got %q, want the other branch, scaffold", got)
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr    string
		want    time.Duration
		wantErr bool
	}{
		{"rate(1 minute)", time.Minute, false},
		{"rate(5 minutes)", 5 * time.Minute, false},
		{"rate(2 seconds)", 2 * time.Second, false},
		{"cron(0 * * * ? *)", 0, true},
		{"rate(0 minutes)", 0, true},
		{"rate(1 fortnight)", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			got, err := rig.ParseRate(tt.expr)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %s, %v; want %s (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
