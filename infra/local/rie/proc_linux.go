package rie

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts the RIE in its own process group and asks the kernel to kill it when the
// thread that started it dies, so a crashed host leaves no RIE behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// lockThread pins the calling goroutine to its OS thread for the rest of its life: Linux sends
// the parent-death signal when the thread that forked the child exits.
func lockThread() { runtime.LockOSThread() }

// killTree kills the RIE pid and the runtime it started. The RIE gives the runtime a process
// group of its own, so the RIE is stopped first (it cannot start another meanwhile), its
// children's groups are killed, then its own.
func killTree(pid int) {
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	for _, c := range children(pid) {
		_ = syscall.Kill(-c, syscall.SIGKILL)
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// children lists the processes whose parent is pid, from /proc/*/stat.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after the last ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}
