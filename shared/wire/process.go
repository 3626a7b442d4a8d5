package wire

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ghclaim/ghclaim/shared/redact"
)

// Process wires a function from the process's own environment (os.Getenv,
// stdout, the real clock), once per cold start, the way every
// functions/<name>/main.go starts: a wiring error is printed as
// "<name>: <error>" on stderr and the process exits 1, so Lambda reports
// an init failure that names the bad variable.
func Process[H any](name string, wire func(context.Context, Env) (H, error)) H {
	h, err := wire(context.Background(), Env{Getenv: os.Getenv, Out: os.Stdout, Now: time.Now})
	if err != nil {
		// Each variable's value is quoted through redact.Input already;
		// redact.Error is the backstop for a text that was not.
		fmt.Fprintln(os.Stderr, name+":", redact.Error(err))
		os.Exit(1)
	}
	return h
}
