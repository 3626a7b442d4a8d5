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
