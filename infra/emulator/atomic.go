package emulator

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// motoAtomic wraps moto_server so that DynamoDB item operations are atomic,
// as they are on AWS (see the script's comment). Without it, two concurrent
// conditional writes to one item can both succeed on moto, and every race
// test of ghclaim would test moto's bug instead of our conditions.
//
//go:embed moto_atomic.py
var motoAtomic []byte

var launcher struct {
	once sync.Once
	path string
	err  error
}

// atomicLauncher returns the command that starts moto with atomic DynamoDB
// items: the Python interpreter that runs moto_server (its shebang; pyenv
// shims are resolved through `pyenv which`), and the embedded script.
func atomicLauncher(motoServer string) ([]string, error) {
	py, err := interpreter(motoServer)
	if err != nil {
		return nil, err
	}
	launcher.once.Do(func() {
		// One file per script version, shared by every process on the
		// machine: written once, never a temporary directory per test run.
		sum := sha256.Sum256(motoAtomic)
		launcher.path = filepath.Join(os.TempDir(), "ghclaim-moto-atomic-"+hex.EncodeToString(sum[:6])+".py")
		if b, err := os.ReadFile(launcher.path); err == nil && bytes.Equal(b, motoAtomic) {
			return
		}
		tmp, err := os.CreateTemp(os.TempDir(), "ghclaim-moto-atomic-*.tmp")
		if err != nil {
			launcher.err = err
			return
		}
		_, werr := tmp.Write(motoAtomic)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			os.Remove(tmp.Name())
			launcher.err = err
			return
		}
		// Rename is atomic: a concurrent process sees the old file or this one.
		if err := os.Rename(tmp.Name(), launcher.path); err != nil {
			os.Remove(tmp.Name())
			launcher.err = err
		}
	})
	if launcher.err != nil {
		return nil, fmt.Errorf("write moto launcher: %w", launcher.err)
	}
	return []string{py, launcher.path}, nil
}

func interpreter(motoServer string) (string, error) {
	script := motoServer
	if out, err := exec.Command("pyenv", "which", "moto_server").Output(); err == nil {
		script = strings.TrimSpace(string(out))
	}
	if py, ok := shebangPython(script); ok {
		return py, nil
	}
	// pip writes a /bin/sh trampoline for long interpreter paths, and other
	// installers wrap moto_server differently: fall back to python3, if it
	// has moto.
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("no Python with moto found: %s names none and %w", script, err)
	}
	if err := exec.Command(py, "-c", "import moto.server").Run(); err != nil {
		return "", fmt.Errorf("no Python with moto found: %s names none and %s cannot import moto.server: %w", script, py, err)
	}
	return py, nil
}

// shebangPython returns the Python interpreter named by script's #! line.
func shebangPython(script string) (string, bool) {
	b, err := os.ReadFile(script)
	if err != nil {
		return "", false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(strings.TrimPrefix(first, "#!"))
	if !strings.HasPrefix(first, "#!") || len(fields) == 0 {
		return "", false
	}
	py := fields[0]
	if filepath.Base(py) == "env" && len(fields) > 1 {
		if py, err = exec.LookPath(fields[1]); err != nil {
			return "", false
		}
	}
	if !strings.HasPrefix(filepath.Base(py), "python") {
		return "", false
	}
	return py, true
}
