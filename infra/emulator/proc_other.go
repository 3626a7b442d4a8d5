//go:build !linux

package emulator

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: outside Linux the child is killed directly, not as a group.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// lockThread is a no-op: parent-death signals exist only on Linux.
func lockThread() {}

// killGroup kills the process group led by pid, or the process itself where groups are unavailable.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
