package rie

import "testing"

// Running is running, for the external tests: whether a pid still runs
// code (neither gone nor a zombie).
var Running = running

// Listening is listening, for the external tests: whether pid listens on addr.
var Listening = listening

// FreeAddrs is freeAddrs, for a test's own picker.
var FreeAddrs = freeAddrs

// SetPickAddrs makes pick choose the RIE's addresses until t ends. Only for a test that is not
// parallel: the picker is the package's.
func SetPickAddrs(t testing.TB, pick func(n int) ([]string, error)) {
	old := pickAddrs
	pickAddrs = pick
	t.Cleanup(func() { pickAddrs = old })
}

// PID is the pid of the aws-lambda-rie process e runs now, 0 when none runs.
func PID(e *Environment) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == nil || e.proc.dead() || e.proc.cmd.Process == nil {
		return 0
	}
	return e.proc.cmd.Process.Pid
}
