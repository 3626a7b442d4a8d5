package rig_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ghclaim/ghclaim/infra/local/rig"
	"github.com/ghclaim/ghclaim/shared/config"
)

// longRefs are the stack's physical names as CloudFormation makes them
// for a stack name of 128 characters (CloudFormation's longest) in a
// Region with a long name.
func longRefs() map[string]string {
	stack := "ghclaim-" + strings.Repeat("s", 120)
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

// Pool shapes of RUNNER_POOLS, each padded in its last label: dispatch
// pools; EC2 pools of three subnets and three types; pools of many short
// labels (the most quotes a character: each one escaped in Lambda's JSON).
var poolShapes = map[string]func(i int, pad string) string{
	"dispatch": func(i int, pad string) string {
		return fmt.Sprintf(`{"name":"pool-%02d","labels":["self-hosted","linux","x64","team-%02d%s"],`+
			`"provisioner":{"type":"dispatch","queue_url":"https://sqs.us-east-1.amazonaws.com/123456789012/runners-%02d"}}`, i, i, pad, i)
	},
	"ec2": func(i int, pad string) string {
		return fmt.Sprintf(`{"name":"linux-%02d","labels":["self-hosted","linux","arm64","t%02d%s"],"scope":"repo",`+
			`"provisioner":{"type":"ec2","launch_template":"lt-0123456789abcdef%d","subnets":["subnet-0a1b2c3d","subnet-0a1b2c3e","subnet-0a1b2c3f"],`+
			`"instance_types":["m7g.large","c7g.large","r7g.large"]}}`, i, i, pad, i)
	},
	"many labels": func(i int, pad string) string {
		return fmt.Sprintf(`{"name":"p%02d","labels":["self-hosted","a","b","c","d","e","f","g","h","i","j","k","l","m","n","o%s"],`+
			`"provisioner":{"type":"dispatch","queue_url":"https://sqs.us-east-1.amazonaws.com/123456789012/q%02d"}}`, i, pad, i)
	},
}

// poolsOf is a RUNNER_POOLS list of pools of the given shape, of exactly
// n bytes (the last pool's last label padded).
func poolsOf(shape string, n int) string {
	pool := poolShapes[shape]
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
// function whose environment is over 4 KB in all, measured as JSON (the
// deploy fails), and RUNNER_POOLS reaches every function. What RunnerPools
// the template takes (printable ASCII, its MaxLength) fits, in every pool
// shape, the most quoted included, with a stack name of 128 characters and
// every other parameter that reaches the functions as long as the
// template takes (a GitHub Enterprise URL, a namespace, ...); a longer list, which CloudFormation's own 4 KB
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
			MaxLength      string `yaml:"MaxLength"`
			AllowedPattern string `yaml:"AllowedPattern"`
		} `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(data, &tmpl); err != nil {
		t.Fatal(err)
	}
	// A character count bounds the bytes only for ASCII (Lambda's JSON
	// takes up to 6 bytes for another character): the pattern keeps it.
	re, err := regexp.Compile(tmpl.Parameters["RunnerPools"].AllowedPattern)
	if err != nil || re.MatchString(`[{"name":"jp","labels":["東京"]}]`) || re.MatchString("[\n]") || !re.MatchString(poolsOf("ec2", 600)) {
		t.Fatalf("RunnerPools' AllowedPattern %q (%v) must take printable ASCII on one line, and only that", tmpl.Parameters["RunnerPools"].AllowedPattern, err)
	}
	limit, err := strconv.Atoi(tmpl.Parameters["RunnerPools"].MaxLength)
	if err != nil || limit <= 0 {
		t.Fatalf("RunnerPools has no MaxLength (%q): CloudFormation takes up to 4096 bytes, more than Lambda's environment holds", tmpl.Parameters["RunnerPools"].MaxLength)
	}
	// A GitHub Enterprise URL as long as the template takes.
	urlMax, err := strconv.Atoi(tmpl.Parameters["GitHubApiUrl"].MaxLength)
	if err != nil {
		t.Fatalf("GitHubApiUrl has no MaxLength (%q): it shares the 4 KB", tmpl.Parameters["GitHubApiUrl"].MaxLength)
	}
	ghes := "https://github." + strings.Repeat("e", urlMax-len("https://github..com/api/v3")) + ".com/api/v3"
	// Every other free-text parameter that reaches the functions, as long
	// as the template takes (the content is all the rig reads: length).
	longest := map[string]string{}
	for name, v := range map[string]struct {
		part string
		list bool
	}{"MetricsNamespace": {"n", false}, "AllowedOwners": {"octo-org", true}, "RetryLadder": {"30s", true}, "RunnerPoolsParameter": {"/p", false}} {
		n, err := strconv.Atoi(tmpl.Parameters[name].MaxLength)
		if err != nil {
			t.Fatalf("%s has no MaxLength (%q): it shares the 4 KB", name, tmpl.Parameters[name].MaxLength)
		}
		longest[name] = filled(v.part, n, v.list)
	}
	params := func(pools string) map[string]string {
		p := map[string]string{"RunnerPools": pools, "GitHubAppId": "1234567", "GitHubApiUrl": ghes}
		for k, v := range longest {
			p[k] = v
		}
		return p
	}
	for shape := range poolShapes {
		pools := poolsOf(shape, limit)
		if len(pools) != limit {
			t.Fatalf("%s: the pools made up are %d bytes, not MaxLength %d", shape, len(pools), limit)
		}
		fns, err := rig.Functions(path, params(pools), longRefs())
		if err != nil {
			t.Errorf("%s: RunnerPools of %d bytes (MaxLength %d): %v", shape, len(pools), limit, err)
			continue
		}
		if _, err := config.LoadClaimer(func(k string) string { return fns["claimer"].Env[k] }); err != nil {
			t.Fatalf("%s: the claimer refuses the pools: %v", shape, err)
		}
	}
	// What CloudFormation would take but Lambda would not.
	big := poolsOf("dispatch", 4096-300)
	_, err = rig.Functions(path, params(big), longRefs())
	if err == nil || !strings.Contains(err.Error(), "over Lambda's 4096") || !strings.Contains(err.Error(), "RunnerPoolsParameter") {
		t.Errorf("RunnerPools of %d bytes: err %v, want Lambda's refusal naming RunnerPoolsParameter", len(big), err)
	}
}

// filled is a valid value of exactly n bytes: a list of part, comma
// separated, its last item padded with zeros after its first character
// ("3000s", "o000cto-org"); or part padded with zeros at its end.
func filled(part string, n int, list bool) string {
	if !list {
		return part + strings.Repeat("0", n-len(part))
	}
	var parts []string
	for len(strings.Join(append(parts, part), ",")) <= n {
		parts = append(parts, part)
	}
	pad := n - len(strings.Join(parts, ","))
	last := parts[len(parts)-1]
	parts[len(parts)-1] = last[:1] + strings.Repeat("0", pad) + last[1:]
	return strings.Join(parts, ",")
}
