package cli_test

import (
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/cli"
)

// A --table that does not exist (a typo) failed with DynamoDB's
// "ResourceNotFoundException: Requested resource not found", which does
// not say which resource: each command that reads the table names it.
func TestAMissingTableIsNamed(t *testing.T) {
	t.Parallel()
	const table = "ghclaim-no-such-table"
	for _, args := range [][]string{
		{"job", "7801"},
		{"jobs"},
		{"rate"},
		{"retry", "7801", "--queue-url", "http://127.0.0.1:1/q", "--sweep-shards", "8"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			r := run(t, nil, append(args, "--table", table)...)
			if r.code != cli.ExitFail || !strings.Contains(r.stderr, "table "+table+": ") {
				t.Fatalf("exit %d, stderr %q; want exit 1 naming table %s", r.code, r.stderr, table)
			}
		})
	}
}
