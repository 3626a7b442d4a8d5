package claim_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goList runs `go list args...` in this package's directory.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	bin, err := exec.LookPath("go")
	if err != nil {
		bin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(bin, append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}

// TestNoAWSServiceDependency: the claim flow names its ports in the
// domain's types, so neither it nor anything it imports pulls in an AWS
// service SDK (DynamoDB, SQS, EC2, SSM): the adapters depend on the domain,
// never the other way round.
func TestNoAWSServiceDependency(t *testing.T) {
	const self = "github.com/ghclaim/ghclaim/shared/claim"
	// shared/reclaim is imported for reclaim.Spread alone, and still
	// imports the store and queue adapters itself (its ports are being
	// moved separately). Until the spread moves to a pure package, its
	// dependencies are not held against the claimer.
	exempt := map[string]bool{"github.com/ghclaim/ghclaim/shared/reclaim": true}
	var roots []string
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, self) {
		if !exempt[imp] {
			roots = append(roots, imp)
		}
	}
	for _, dep := range goList(t, append([]string{"-deps"}, roots...)...) {
		if strings.Contains(dep, "github.com/aws/aws-sdk-go-v2/service/") {
			t.Errorf("%s depends on %s: a port speaks an adapter's types", self, dep)
		}
	}
}
