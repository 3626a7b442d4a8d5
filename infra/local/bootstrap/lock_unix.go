//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bootstrap

import (
	"os"
	"syscall"
)

// lock takes an exclusive lock on path (created if missing) until the returned function runs;
// the kernel drops it if the process dies.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
