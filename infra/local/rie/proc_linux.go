package rie

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
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
//
// SIGKILL is delivered when the kernel next schedules the process, so on a loaded machine a
// killed runtime can still be running for a moment after kill(2) returns: killTree returns only
// once each child has stopped running (gone, or a zombie), so a killed environment runs no more
// code after Kill, bounded by killWait.
func killTree(pid int) {
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	kids := children(pid)
	for _, c := range kids {
		_ = syscall.Kill(-c, syscall.SIGKILL)
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	deadline := time.Now().Add(killWait)
	for _, c := range kids {
		for running(c) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
}

// killWait bounds how long killTree waits for a killed child to stop running.
const killWait = 10 * time.Second

// running reports whether pid exists and is neither a zombie nor dead.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
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

// listening reports whether pid holds a TCP socket listening on addr (host:port), from
// /proc/net/tcp (IPv4) and /proc/net/tcp6 (IPv6, where a listener on [::1] or a dual-stack
// one is) and pid's open files. Without /proc to read, it falls back to a dial, which cannot
// tell whose listener answers.
func listening(pid int, addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return false
	}
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return dialable(addr)
	}
	if v6, err := os.ReadFile("/proc/net/tcp6"); err == nil { // absent without IPv6
		table = append(append(table, '\n'), v6...)
	}
	// "sl local_address rem_address st … uid timeout inode": the port is hex after the colon,
	// state 0A is LISTEN.
	want := ":" + strings.ToUpper(strconv.FormatInt(int64(n), 16))
	for len(want) < 5 {
		want = ":0" + want[1:]
	}
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(table), "\n") { // the headers' fields are not "0A"
		f := strings.Fields(line)
		if len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(dir + "/" + fd.Name()); err == nil && inodes[link] {
			return true
		}
	}
	return false
}
