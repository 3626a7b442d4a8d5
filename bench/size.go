package bench

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Functions are the Lambda functions, each a main package under functions/.
var Functions = []string{"webhook", "claimer", "reclaimer"}

// Binary is one function's deployable.
type Binary struct {
	Function string `json:"function"`
	// Bytes is the bootstrap as `make build` makes it (linux/arm64,
	// stripped, -tags lambda.norpc); ZipBytes the deployment package.
	Bytes    int64 `json:"bytes"`
	ZipBytes int64 `json:"zip_bytes"`
}

// BuildSizes builds every function exactly as the Makefile's build target
// does (same environment and flags) into dir and measures the results.
func BuildSizes(ctx context.Context, root, dir string) ([]Binary, time.Duration, error) {
	start := time.Now()
	args := []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", dir + string(filepath.Separator)}
	for _, f := range Functions {
		args = append(args, "./functions/"+f)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, 0, fmt.Errorf("build functions: %v\n%s", err, out)
	}
	took := time.Since(start)
	var out []Binary
	for _, f := range Functions {
		p := filepath.Join(dir, f)
		st, err := os.Stat(p)
		if err != nil {
			return nil, took, err
		}
		z, err := zipSize(p)
		if err != nil {
			return nil, took, err
		}
		out = append(out, Binary{Function: f, Bytes: st.Size(), ZipBytes: z})
	}
	return out, took, nil
}

// zipSize is the size of a deployment package holding the file as
// "bootstrap", deflated as sam build's zip is.
func zipSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate})
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(w, f); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}
