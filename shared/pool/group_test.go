package pool

import (
	"strings"
	"testing"
)

// TestRepoScopeTakesOnlyTheDefaultGroup: runner groups exist at an
// organisation (or enterprise), never at a repository, whose runners are
// all in the Default group (id 1). A repo-scoped pool naming another group
// cannot register a runner as asked on any claim, so it is refused at
// start-up, naming the pool's field; an org-scoped pool may name any group.
func TestRepoScopeTakesOnlyTheDefaultGroup(t *testing.T) {
	t.Parallel()
	const tail = `"labels":["self-hosted","linux"],"provisioner":{"type":"dispatch","queue_url":"q"}}]`
	tests := []struct {
		name string
		in   string
		want string // "" = accepted
	}{
		{name: "repo, group omitted", in: `[{"name":"a","scope":"repo",` + tail},
		{name: "repo, Default group", in: `[{"name":"a","scope":"repo","runner_group_id":1,` + tail},
		{name: "scope omitted, Default group", in: `[{"name":"a",` + tail},
		{name: "org, another group", in: `[{"name":"a","scope":"org","runner_group_id":5,` + tail},
		{name: "repo, another group", in: `[{"name":"a","scope":"repo","runner_group_id":5,` + tail, want: "runner_group_id 5"},
		{name: "scope omitted, another group", in: `[{"name":"a","runner_group_id":3,` + tail, want: "runner_group_id 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.in)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want the pool accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
