//go:build !linux

package lambdahost

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: outside Linux the runtime is killed directly, not as a group.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// lockThread is a no-op: parent-death signals exist only on Linux.
func lockThread() {}

// killGroup kills the process pid.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
