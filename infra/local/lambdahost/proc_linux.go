package lambdahost

import (
	"runtime"
	"syscall"
)

// sysProcAttr puts the runtime in its own process group (so Kill takes any children it forked
// too) and asks the kernel to kill it when the thread that started it dies, so a crashed host
// leaves no orphan runtime behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// lockThread pins the calling goroutine to its OS thread for the rest of its life: Linux sends
// the parent-death signal when the thread that forked the child exits.
func lockThread() { runtime.LockOSThread() }

// killGroup kills the process group led by pid.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
