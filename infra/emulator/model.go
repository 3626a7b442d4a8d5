package emulator

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ServiceModel returns AWS's published model of a service API version
// (botocore's data/<service>/<version>/service-2.json, the description
// the AWS SDKs are generated from), read from the botocore that moto runs
// on: every machine that runs the emulator has it. Tests check the
// shapes of hand-written clients (shared/ec2api) against it.
func ServiceModel(service, version string) ([]byte, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'): %w", err)
	}
	py, err := interpreter(bin)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(py, "-c", "import botocore, os; print(os.path.dirname(botocore.__file__))").Output()
	if err != nil {
		return nil, fmt.Errorf("find botocore with %s: %w", py, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "data", service, version)
	if b, err := os.ReadFile(filepath.Join(dir, "service-2.json")); err == nil {
		return b, nil
	}
	gz, err := os.ReadFile(filepath.Join(dir, "service-2.json.gz"))
	if err != nil {
		return nil, fmt.Errorf("no model of %s %s in botocore: %w", service, version, err)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("read model of %s %s: %w", service, version, err)
	}
	return io.ReadAll(r)
}
