// Command withmoto runs a command with a moto factory up (emulator.StartFactory): every test
// binary under it that asks for an emulator gets a fresh moto_server forked from one warm
// process instead of launching and warming its own. make test runs go test under it.
//
//	withmoto go test ./...
//
// It starts no factory when AWS_ENDPOINT_URL names an emulator (the tests use that one), and
// runs the command without one, after saying why, when moto cannot be started: each test then
// launches its own moto_server, or fails saying how to get one. It exits with the command's
// status and stops the factory, and every server in it, on the way out.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withmoto COMMAND [ARG...]")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	if os.Getenv(emulator.EndpointEnv) == "" {
		f, err := emulator.StartFactory(context.Background())
		if err != nil {
			fmt.Fprintf(os.Stderr, "withmoto: %v; each test launches its own moto_server\n", err)
		} else {
			defer f.Close()
			for k, v := range f.Env() {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
	}
	// Ctrl-C reaches the command through the terminal's process group; a TERM sent to this
	// process alone is passed on. Either way the factory stops after the command.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "withmoto: %v\n", err)
		return 127
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code >= 0 {
			return code
		}
		return 1 // killed by a signal
	default:
		fmt.Fprintf(os.Stderr, "withmoto: %v\n", err)
		return 1
	}
}
