package contract

import (
	"os/exec"
	"strings"
	"testing"
)

// awsService prefixes the import path of every AWS service client package.
const awsService = "github.com/aws/aws-sdk-go-v2/service/"

// DepsFree fails t when package pkg (an import path) depends, through any
// chain of imports, on an AWS service package: the domain (shared/job and
// the flows) speaks its own types, and only the adapters import the SDK's
// services. It asks `go list -deps` (test files are not in that list), and
// names the import chain that pulls the first offender in.
func DepsFree(t testing.TB, pkg string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go list -deps %s: the go command is needed: %v", pkg, err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %s", pkg, msg)
	}
	imports := map[string][]string{}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		imports[f[0]] = f[1:]
		found = found || f[0] == pkg
	}
	if !found {
		t.Fatalf("go list -deps %s did not list the package itself: is %q its import path?", pkg, pkg)
	}
	if chain := pathTo(imports, pkg, func(p string) bool { return strings.HasPrefix(p, awsService) }); chain != nil {
		t.Errorf("%s depends on an AWS service package: %s", pkg, strings.Join(chain, " → "))
	}
}

// pathTo returns the shortest import chain from root to a package that
// matches bad, or nil when none does.
func pathTo(imports map[string][]string, root string, bad func(string) bool) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if bad(p) {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}
