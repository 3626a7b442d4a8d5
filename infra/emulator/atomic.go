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
	"time"
)

// motoAtomic wraps moto_server so that DynamoDB item operations are atomic,
// as they are on AWS (see the script's comment). Without it, two concurrent
// conditional writes to one item can both succeed on moto, and every race
// test of ghclaim would test moto's bug instead of our conditions.
//
//go:embed moto_atomic.py
var motoAtomic []byte

// motoAMIs is the image catalogue moto_server starts with (MOTO_AMIS_PATH): three of
// moto's default images, the first of them the one tests launch by id (ami-03cf127a).
// Without it, moto loads ~1,200 images for the region on the first EC2 call and every
// DescribeImages serialises all of them (1.5 s of CPU each); the tests only need one
// image id for a launch template, and moto does not validate image ids at launch.
//
//go:embed moto_amis.json
var motoAMIs []byte

var launcher struct {
	once         sync.Once
	script, amis string
	err          error
}

// atomicLauncher returns the command that starts moto with atomic DynamoDB
// items: the Python interpreter that runs moto_server (its shebang; pyenv
// shims are resolved through `pyenv which`), and the embedded script; and the
// environment it runs in (the small image catalogue, unless the caller's
// environment names one).
func atomicLauncher(motoServer string) (argv, env []string, err error) {
	py, err := interpreter(motoServer)
	if err != nil {
		return nil, nil, err
	}
	launcher.once.Do(func() {
		launcher.script, launcher.err = sharedFile("ghclaim-moto-atomic-", ".py", motoAtomic)
		if launcher.err == nil {
			launcher.amis, launcher.err = sharedFile("ghclaim-moto-amis-", ".json", motoAMIs)
		}
	})
	if launcher.err != nil {
		return nil, nil, fmt.Errorf("write moto launcher: %w", launcher.err)
	}
	env = os.Environ()
	if _, ok := os.LookupEnv("MOTO_AMIS_PATH"); !ok {
		env = append(env, "MOTO_AMIS_PATH="+launcher.amis)
	}
	return []string{py, launcher.script}, env, nil
}

// sharedFile writes content to one file per content version in the temporary directory,
// shared by every process on the machine (written once, never a temporary directory per
// test run), and returns its path. Writing a new version removes the other versions not
// touched for staleShared: a run still using one would have refreshed it.
func sharedFile(prefix, suffix string, content []byte) (string, error) {
	sum := sha256.Sum256(content)
	path := filepath.Join(os.TempDir(), prefix+hex.EncodeToString(sum[:6])+suffix)
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, content) {
		now := time.Now()
		_ = os.Chtimes(path, now, now) // in use: not stale for the others' clean-up
		return path, nil
	}
	removeStale(prefix, suffix, path)
	tmp, err := os.CreateTemp(os.TempDir(), prefix+"*.tmp")
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(content)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	// Rename is atomic: a concurrent process sees the old file or this one.
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return path, nil
}

// staleShared is how long a shared file's other versions are kept unused.
const staleShared = 24 * time.Hour

// removeStale removes the versions of a shared file other than keep not touched for
// staleShared (errors ignored: another process may be removing them too).
func removeStale(prefix, suffix, keep string) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"+suffix))
	for _, f := range old {
		if f == keep {
			continue
		}
		if fi, err := os.Stat(f); err == nil && time.Since(fi.ModTime()) > staleShared {
			_ = os.Remove(f)
		}
	}
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
