package emulator

import (
	"runtime"
	"syscall"
)

// sysProcAttr puts the child in its own process group and asks the kernel to kill it when the
// thread that started it dies, so a crashed test binary leaves no orphan.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// lockThread pins the calling goroutine to its OS thread for the rest of its life; see run.
func lockThread() { runtime.LockOSThread() }

// killGroup kills the process group led by pid.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
