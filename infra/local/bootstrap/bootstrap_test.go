package bootstrap_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/local/bootstrap"
)

func TestBuildWritesOneBootstrapPerFunctionForThisMachine(t *testing.T) {
	t.Parallel()
	root, err := bootstrap.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// The caller's shell may export the AWS target; the local build must ignore it.
	paths, err := bootstrap.Build(context.Background(), root, out, "reclaimer")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(out, "reclaimer", "bootstrap")
	if paths["reclaimer"] != want {
		t.Fatalf("path: got %q, want %q", paths["reclaimer"], want)
	}
	// It runs here: without a Runtime API the Lambda library says so and exits non-zero,
	// which proves the binary was built for this machine and with the lambda.norpc runtime.
	cmd := exec.Command(want)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	outText, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the bootstrap ran without a Runtime API and succeeded: %s", outText)
	}
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("the bootstrap does not run on this machine: %v", err)
	}
	if strings.Contains(string(outText), "exec format error") {
		t.Fatalf("built for another machine: %s", outText)
	}
}
