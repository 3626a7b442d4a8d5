// Package bootstrap builds ghclaim's function binaries for this machine, so the local runs and
// the end-to-end tests execute the production code itself: the same main packages, the same
// -tags lambda.norpc and -ldflags="-s -w" as `make build`, only for the host's GOOS/GOARCH
// instead of linux/arm64 (stripped, as the functions ship: a cold start reads the binary AWS
// runs, and each link does a third less work).
// It also builds the AWS Lambda Runtime Interface Emulator pinned in go.mod as a tool.
//
// Builds go through the go command and its cache, and a binary already in place is relinked
// only when its code changed, so the packages of one `go test` run (and `make run` after it)
// share one build in Dir instead of linking the same binaries once each. -trimpath, as
// `make test` and `make run` build: the flags match, so a machine that ran the tests already has
// every package compiled, whatever directory its clone is in. This package must never build for AWS (`make build` does that) and never modify
// go.mod.
package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Functions are the function names, each a main package under functions/.
var Functions = []string{"webhook", "claimer", "reclaimer", "redeliverer"}

// RIEPackage is the Runtime Interface Emulator's command, a tool of the module.
const RIEPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// ModuleRoot returns the directory of go.mod, walking up from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find go.mod: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find go.mod: none above the working directory; run from inside the ghclaim checkout")
		}
		dir = parent
	}
}

// Dir is the build directory shared by the tests, `make run` and `make local`: root/.build/local.
func Dir(root string) string { return filepath.Join(root, ".build", "local") }

// Build compiles the named functions (default: all of Functions) of the module at root into
// outDir/<name>/bootstrap and returns name → path.
func Build(ctx context.Context, root, outDir string, names ...string) (map[string]string, error) {
	if len(names) == 0 {
		names = Functions
	}
	out := map[string]string{}
	pkgs := make([]string, 0, len(names))
	for _, n := range names {
		pkgs = append(pkgs, "./functions/"+n)
		out[n] = filepath.Join(outDir, n, "bootstrap")
	}
	if err := install(ctx, root, outDir, out, stripped("-tags", "lambda.norpc"), pkgs); err != nil {
		return nil, fmt.Errorf("build functions %s: %w", strings.Join(names, ", "), err)
	}
	return out, nil
}

// BuildRIE compiles the Runtime Interface Emulator pinned in go.mod into outDir and returns
// its path.
func BuildRIE(ctx context.Context, root, outDir string) (string, error) {
	path := filepath.Join(outDir, "aws-lambda-rie"+exe())
	if err := install(ctx, root, outDir, map[string]string{"aws-lambda-rie": path}, stripped(), []string{RIEPackage}); err != nil {
		return "", fmt.Errorf("build the runtime interface emulator: %w", err)
	}
	return path, nil
}

// stripped is the flags of every build here: -trimpath (see the package comment) and no
// symbol table or DWARF, as `make build` links.
func stripped(flags ...string) []string {
	return append([]string{"-trimpath", "-ldflags=-s -w"}, flags...)
}

// install builds pkgs with one go command (the compiler works on them in parallel) and puts
// each binary, named by go build after its package, at its path in targets.
//
// A rebuild of unchanged code links nothing: go build leaves an output file alone when the
// build ID inside it is the one it would produce, so the staging directory starts with hard
// links to the binaries already in place. Several processes (the packages of one `go test`
// run) may share outDir: a lock file serialises them, so one links and the others find its
// result up to date, and each binary moves into place by rename, so a process running the
// previous one is never disturbed.
func install(ctx context.Context, root, outDir string, targets map[string]string, flags, pkgs []string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	unlock, err := lock(filepath.Join(outDir, ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	stage, err := os.MkdirTemp(outDir, ".stage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	for name, path := range targets {
		// A missing binary is simply built.
		_ = os.Link(path, filepath.Join(stage, name+exe()))
	}
	args := append(append([]string{"build"}, flags...), "-o", stage+string(filepath.Separator))
	if err := goCmd(ctx, root, append(args, pkgs...)...); err != nil {
		return err
	}
	for name, path := range targets {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(stage, name+exe()), path); err != nil {
			return err
		}
	}
	return nil
}

func goCmd(ctx context.Context, root string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	// For this machine, whatever GOOS/GOARCH the caller's shell exports for `make build`.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func exe() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}
