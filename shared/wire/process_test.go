package wire_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/wire"
)

// TestProcessExitsNamingTheFunction: a wiring error stops the process
// with exit status 1 and "<name>: <error>" on stderr; a wiring that works
// hands back its handler, built from the process's environment.
func TestProcessExitsNamingTheFunction(t *testing.T) {
	if os.Getenv("WIRE_PROCESS_CHILD") == "1" {
		wire.Process("claimer", func(context.Context, wire.Env) (int, error) {
			return 0, errors.New("TABLE_NAME is required")
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessExitsNamingTheFunction$")
	cmd.Env = append(os.Environ(), "WIRE_PROCESS_CHILD=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("child: %v, want exit status 1", err)
	}
	if got := stderr.String(); !strings.Contains(got, "claimer: TABLE_NAME is required") {
		t.Errorf("stderr %q, want it to name the function and the error", got)
	}

	t.Setenv("WIRE_PROCESS_PROBE", "from the environment")
	got := wire.Process("webhook", func(_ context.Context, e wire.Env) (string, error) {
		if e.Out != os.Stdout || e.Now == nil {
			return "", errors.New("not the process's own output and clock")
		}
		return e.Getenv("WIRE_PROCESS_PROBE"), nil
	})
	if got != "from the environment" {
		t.Errorf("handler built from %q, want the process's environment", got)
	}
}
