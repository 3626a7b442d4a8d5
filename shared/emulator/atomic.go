package emulator

import (
	_ "embed"
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
		dir, err := os.MkdirTemp("", "ghclaim-moto-")
		if err != nil {
			launcher.err = err
			return
		}
		launcher.path = filepath.Join(dir, "moto_atomic.py")
		launcher.err = os.WriteFile(launcher.path, motoAtomic, 0o600)
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
	b, err := os.ReadFile(script)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", script, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if !strings.HasPrefix(first, "#!") {
		return "", fmt.Errorf("%s has no #! line naming its Python", script)
	}
	fields := strings.Fields(strings.TrimPrefix(first, "#!"))
	if len(fields) == 0 {
		return "", fmt.Errorf("%s: empty #! line", script)
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		return exec.LookPath(fields[1])
	}
	return fields[0], nil
}
