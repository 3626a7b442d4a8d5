// Package bootstrap builds ghclaim's function binaries for this machine, so the local runs and
// the end-to-end tests execute the production code itself: the same main packages, the same
// -tags lambda.norpc as `make build`, only for the host's GOOS/GOARCH instead of linux/arm64.
// It also builds the AWS Lambda Runtime Interface Emulator pinned in go.mod as a tool.
//
// Builds go through the go command and its cache, so a rebuild of unchanged code costs well
// under a second. No -trimpath: the flags match `go test`'s, so a machine that ran the tests
// already has every dependency compiled. This package must never build for AWS (`make build` does that) and never
// modify go.mod.
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
	// One go command for all packages: the compiler works on them in parallel. It writes each
	// binary under its package name into a staging directory, moved into place afterwards.
	stage := filepath.Join(outDir, ".stage")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return nil, fmt.Errorf("build functions: %w", err)
	}
	args := append([]string{"build", "-tags", "lambda.norpc", "-o", stage + string(filepath.Separator)}, pkgs...)
	if err := goCmd(ctx, root, args...); err != nil {
		return nil, fmt.Errorf("build functions %s: %w", strings.Join(names, ", "), err)
	}
	for _, n := range names {
		if err := os.MkdirAll(filepath.Dir(out[n]), 0o755); err != nil {
			return nil, fmt.Errorf("build %s: %w", n, err)
		}
		if err := os.Rename(filepath.Join(stage, n+exe()), out[n]); err != nil {
			return nil, fmt.Errorf("build %s: %w", n, err)
		}
	}
	return out, nil
}

// BuildRIE compiles the Runtime Interface Emulator pinned in go.mod into outDir and returns
// its path.
func BuildRIE(ctx context.Context, root, outDir string) (string, error) {
	path := filepath.Join(outDir, "aws-lambda-rie"+exe())
	if err := goCmd(ctx, root, "build", "-o", path, RIEPackage); err != nil {
		return "", fmt.Errorf("build the runtime interface emulator: %w", err)
	}
	return path, nil
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
