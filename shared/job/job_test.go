package job

import "testing"

func TestStates(t *testing.T) {
	t.Parallel()
	terminal := map[State]bool{Pending: false, Queued: false, Claiming: false, Claimed: true, Failed: true, Abandoned: true, Done: true}
	for s, want := range terminal {
		if s.Terminal() != want || !s.Valid() {
			t.Errorf("%s: terminal %v valid %v, want terminal %v and valid", s, s.Terminal(), s.Valid(), want)
		}
	}
	if State("running").Valid() {
		t.Error(`"running" must not be a valid state`)
	}
}

func TestKeysAndNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, got, want string }{
		{"job key", Key(29679449), "job#29679449"},
		{"rate key", RateKey(42), "rate#42"},
		{"shard", Shard(29679449, 8), "1"},
		{"shard of one", Shard(5, 0), "0"},
		{"runner name", RunnerName("linux-x64", 7), "linux-x64-7"},
		{"owner", Record{Repo: "octo-org/octo-repo"}.Owner(), "octo-org"},
		{"repo name", Record{Repo: "octo-org/octo-repo"}.RepoName(), "octo-repo"},
		{"repo without owner", Record{Repo: "solo"}.RepoName(), ""},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
