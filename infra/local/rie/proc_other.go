//go:build !linux

package rie

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: outside Linux the RIE is killed directly, not as a group.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// lockThread is a no-op: parent-death signals exist only on Linux.
func lockThread() {}

// killTree kills the RIE pid only: without /proc its runtime is not found, and exits at its next
// Runtime API call.
func killTree(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// running reports false: without /proc a process's state is not read.
func running(int) bool { return false }

// listening reports whether something accepts connections on addr: without /proc, whose
// listener it is cannot be told.
func listening(_ int, addr string) bool { return dialable(addr) }
