package ghapp_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goGithubMajor matches a go-github package path and captures its major
// version suffix ("" for v1).
var goGithubMajor = regexp.MustCompile(`^github\.com/google/go-github(/v[0-9]+)?/`)

// TestOneGoGithubMajor: the functions ship one go-github major, the one this
// package speaks (DESIGN.md: v62). A dependency that pulls another one in
// beside it (as ghinstallation did with v88) doubles the client code in
// every bootstrap and splits the typed errors shared/failure relies on.
func TestOneGoGithubMajor(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not on PATH: %v", err)
	}
	// The package list of the Lambda build itself (make build's target and tags).
	cmd := exec.Command(goBin, "list", "-deps", "-tags", "lambda.norpc", "github.com/ghclaim/ghclaim/functions/...")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, exitStderr(err))
	}
	var majors []string
	for _, pkg := range strings.Fields(string(out)) {
		if m := goGithubMajor.FindStringSubmatch(pkg + "/"); m != nil && !slices.Contains(majors, m[1]) {
			majors = append(majors, m[1])
		}
	}
	if want := []string{"/v62"}; !slices.Equal(majors, want) {
		t.Errorf("go-github majors in the functions' build = %q, want only %q", majors, want)
	}
}

func exitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
