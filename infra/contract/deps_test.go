package contract

import (
	"reflect"
	"testing"
)

// TestDomainIsFreeOfAWS: the domain packages never depend on an AWS service
// package. The flows (webhook, claim, reclaim) run the same check in their
// own tests.
func TestDomainIsFreeOfAWS(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{
		"github.com/ghclaim/ghclaim/shared/job",
		"github.com/ghclaim/ghclaim/shared/backoff",
		"github.com/ghclaim/ghclaim/shared/failure",
		"github.com/ghclaim/ghclaim/shared/pool",
	} {
		t.Run(pkg, func(t *testing.T) {
			t.Parallel()
			DepsFree(t, pkg)
		})
	}
}

// TestDepsFreeCatchesAnAdapter: the check fails on a package that does
// pull in a service (shared/store imports the DynamoDB client), and names
// the chain.
func TestDepsFreeCatchesAnAdapter(t *testing.T) {
	t.Parallel()
	rec := &recorder{TB: t}
	DepsFree(rec, "github.com/ghclaim/ghclaim/shared/store")
	if !rec.failed {
		t.Fatal("DepsFree passed shared/store, which imports the DynamoDB client")
	}
}

func TestPathTo(t *testing.T) {
	t.Parallel()
	imports := map[string][]string{
		"a": {"b", "c"},
		"b": {"d"},
		"c": {"x/bad"},
		"d": {"x/bad"},
	}
	bad := func(p string) bool { return p == "x/bad" }
	if got, want := pathTo(imports, "a", bad), []string{"a", "c", "x/bad"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want the shortest chain %v", got, want)
	}
	if got := pathTo(imports, "b", func(string) bool { return false }); got != nil {
		t.Errorf("got %v, want nil when nothing matches", got)
	}
}

// recorder is a testing.TB whose Errorf only records that it was called,
// so a test can check that a helper fails; anything else (a Fatalf of a
// broken `go list`) reaches the real test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
