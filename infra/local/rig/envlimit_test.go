package rig_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ghclaim/ghclaim/infra/local/rig"
	"github.com/ghclaim/ghclaim/shared/config"
)

// longRefs are the stack's physical names as CloudFormation makes them
// for a stack name of 64 characters (the longest the RunnerPools bound is
// checked for) in a Region with a long name.
func longRefs() map[string]string {
	stack := "ghclaim-" + strings.Repeat("s", 56)
	const region, account = "ap-southeast-4", "123456789012"
	queue := (stack + "-ClaimsQueue-AbCdEfGhIjKl")[:80] // SQS names end at 80
	return map[string]string{
		"AWS::StackName":      stack,
		"Table":               stack + "-Table-1A2B3C4D5E6F7",
		"ClaimsQueue":         "https://sqs." + region + ".amazonaws.com/" + account + "/" + queue,
		"WebhookSecret":       "arn:aws:secretsmanager:" + region + ":" + account + ":secret:WebhookSecret-AbCdEfGhIjKl-a1b2c3",
		"GitHubAppPrivateKey": "arn:aws:secretsmanager:" + region + ":" + account + ":secret:GitHubAppPrivateKey-AbCdEfGhIjKl-a1b2c3",
	}
}

// poolsOf is a RUNNER_POOLS list of dispatch pools of exactly n bytes
// (the last pool's last label padded).
func poolsOf(n int) string {
	pool := func(i int, pad string) string {
		return fmt.Sprintf(`{"name":"pool-%02d","labels":["self-hosted","linux","x64","team-%02d%s"],`+
			`"provisioner":{"type":"dispatch","queue_url":"https://sqs.us-east-1.amazonaws.com/123456789012/runners-%02d"}}`, i, i, pad, i)
	}
	var pools []string
	for i := 1; ; i++ {
		if len("["+strings.Join(append(pools, pool(i, "")), ",")+"]") > n {
			last := len(pools)
			pad := n - len("["+strings.Join(pools, ",")+"]")
			pools[last-1] = pool(last, strings.Repeat("x", pad))
			return "[" + strings.Join(pools, ",") + "]"
		}
		pools = append(pools, pool(i, ""))
	}
}

// TestRunnerPoolsTheStackTakesFitLambdasEnvironment: Lambda refuses a
// function whose environment is over 4 KB in all (the deploy fails), and
// RUNNER_POOLS reaches every function. Whatever RunnerPools the template
// takes (its MaxLength) fits, with a stack name of 64 characters and a
// GitHub Enterprise URL; a longer list, which CloudFormation's own 4 KB
// would take, is refused here as Lambda refuses it, naming the way out.
func TestRunnerPoolsTheStackTakesFitLambdasEnvironment(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "..", "template.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Parameters map[string]struct {
			MaxLength string `yaml:"MaxLength"`
		} `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(data, &tmpl); err != nil {
		t.Fatal(err)
	}
	limit, err := strconv.Atoi(tmpl.Parameters["RunnerPools"].MaxLength)
	if err != nil || limit <= 0 {
		t.Fatalf("RunnerPools has no MaxLength (%q): CloudFormation takes up to 4096 bytes, more than Lambda's environment holds", tmpl.Parameters["RunnerPools"].MaxLength)
	}
	params := func(pools string) map[string]string {
		return map[string]string{"RunnerPools": pools, "GitHubAppId": "1234567", "GitHubApiUrl": "https://github.example-enterprise.com/api/v3"}
	}
	pools := poolsOf(limit)
	fns, err := rig.Functions(path, params(pools), longRefs())
	if err != nil {
		t.Fatalf("RunnerPools of %d bytes (MaxLength %d): %v", len(pools), limit, err)
	}
	if len(pools) != limit {
		t.Fatalf("the pools made up are %d bytes, not MaxLength %d", len(pools), limit)
	}
	if _, err := config.LoadClaimer(func(k string) string { return fns["claimer"].Env[k] }); err != nil {
		t.Fatalf("the claimer refuses the pools: %v", err)
	}
	for name, fn := range fns {
		if size := rig.EnvSize(fn.Env); size > rig.MaxEnvBytes {
			t.Errorf("%s: environment of %d bytes", name, size)
		}
	}
	// What CloudFormation would take but Lambda would not.
	big := poolsOf(4096 - 300)
	_, err = rig.Functions(path, params(big), longRefs())
	if err == nil || !strings.Contains(err.Error(), "over Lambda's 4096") || !strings.Contains(err.Error(), "RunnerPoolsParameter") {
		t.Errorf("RunnerPools of %d bytes: err %v, want Lambda's refusal naming RunnerPoolsParameter", len(big), err)
	}
}
