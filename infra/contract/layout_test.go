package contract

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ghclaim/ghclaim/"

// goList runs `go list` with args and returns its lines.
func goList(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %s", strings.Join(args, " "), msg)
	}
	return strings.Fields(string(out))
}

// TestSharedHoldsOnlyWhatTheFunctionsShip: every package under shared/ is
// built into a Lambda bootstrap, and no bootstrap carries a test kit
// (infra/: the GitHub stand-in, the emulator launcher, the in-memory ports,
// fault injection). Test kits live beside the tools that use them.
func TestSharedHoldsOnlyWhatTheFunctionsShip(t *testing.T) {
	t.Parallel()
	lambda := []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}
	shipped := map[string]bool{}
	for _, p := range goList(t, lambda, "-tags", "lambda.norpc", "-deps", "./../../functions/...") {
		shipped[p] = true
		if strings.HasPrefix(p, module+"infra/") {
			t.Errorf("a function bootstrap carries the test kit %s", p)
		}
	}
	for _, p := range goList(t, nil, "./../../shared/...") {
		if !shipped[p] {
			t.Errorf("%s is under shared/ but no function ships it: move it beside what uses it (infra/)", p)
		}
	}
}

// TestFunctionsShipOnlyTheirServices: each bootstrap links the AWS service
// clients its function uses and no other (EC2's is shared/ec2api, SSM's
// shared/ssmapi and Secrets Manager's shared/secretsapi, never the SDK's
// packages), and only the functions that call
// GitHub as the App link go-github. The functions are wired through
// shared/wire's packages: a piece of wiring put where a function that does
// not use it imports it (the EC2 provisioner in shared/wire, say) would
// grow that bootstrap, and fails here naming the package.
func TestFunctionsShipOnlyTheirServices(t *testing.T) {
	t.Parallel()
	const goGitHub = "github.com/google/go-github/"
	base := []string{"dynamodb", "dynamodbstreams", "secretsmanager", "ssm"}
	for _, tc := range []struct {
		name     string
		services []string
		github   bool
	}{
		{name: "webhook", services: append([]string{"sqs"}, base...)},
		{name: "claimer", services: append([]string{"sqs", "ec2"}, base...), github: true},
		{name: "reclaimer", services: append([]string{"sqs", "ec2"}, base...), github: true},
		{name: "janitor", services: append([]string{"sqs", "ec2"}, base...), github: true},
		{name: "redeliverer", services: base, github: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lambda := []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}
			got := map[string]bool{}
			sawGitHub := false
			for _, p := range goList(t, lambda, "-tags", "lambda.norpc", "-deps", "./../../functions/"+tc.name) {
				sawGitHub = sawGitHub || strings.HasPrefix(p, goGitHub)
				if rest, ok := strings.CutPrefix(p, awsService); ok {
					switch svc, _, _ := strings.Cut(rest, "/"); svc {
					case "internal":
					case "ec2", "ssm", "secretsmanager":
						t.Errorf("functions/%s links the SDK's %s package (%s): it goes through ghclaim's own client", tc.name, svc, p)
					default:
						got[svc] = true
					}
				}
				switch p {
				case module + "shared/ec2api":
					got["ec2"] = true // ghclaim's own EC2 client
				case module + "shared/ssmapi":
					got["ssm"] = true // its own SSM client
				case module + "shared/secretsapi":
					got["secretsmanager"] = true // and Secrets Manager's
				}
			}
			want := map[string]bool{}
			for _, s := range tc.services {
				want[s] = true
				if !got[s] {
					t.Errorf("functions/%s does not link the %s client it uses: is this list stale?", tc.name, s)
				}
			}
			for s := range got {
				if !want[s] {
					t.Errorf("functions/%s links the %s client, which it does not use", tc.name, s)
				}
			}
			if sawGitHub != tc.github {
				t.Errorf("functions/%s links go-github: got %v, want %v", tc.name, sawGitHub, tc.github)
			}
		})
	}
}
