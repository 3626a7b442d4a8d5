package bootstrap_test

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ghclaim/ghclaim/infra/local/bootstrap"
)

// TestBuildWritesOneBootstrapPerFunctionForThisMachine builds into the shared directory, as
// the rig and the end-to-end tests do, from several goroutines at once (the packages of one
// `go test` run build there in parallel), then once more: unchanged code keeps the very file
// in place, so no process links the same binary twice.
func TestBuildWritesOneBootstrapPerFunctionForThisMachine(t *testing.T) {
	t.Parallel()
	root, err := bootstrap.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := bootstrap.Dir(root)
	want := filepath.Join(out, "reclaimer", "bootstrap")
	// The caller's shell may export the AWS target; the local build must ignore it.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			paths, err := bootstrap.Build(context.Background(), root, out, "reclaimer")
			if err == nil && paths["reclaimer"] != want {
				t.Errorf("path: got %q, want %q", paths["reclaimer"], want)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bootstrap.Build(context.Background(), root, out, "reclaimer"); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	// Same file, not same times: go build touches an up-to-date binary it leaves in place.
	if !os.SameFile(before, after) {
		t.Errorf("a rebuild of unchanged code replaced %s: it was linked again", want)
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
	// Linked as `make build` links: no symbol table, no DWARF.
	if runtime.GOOS == "linux" {
		f, err := elf.Open(want)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, s := range []string{".symtab", ".debug_info", ".zdebug_info"} {
			if f.Section(s) != nil {
				t.Errorf("%s has a %s section: linked without -ldflags=\"-s -w\", unlike `make build`", want, s)
			}
		}
	}
}
