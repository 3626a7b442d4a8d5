package job

import "testing"

func TestStates(t *testing.T) {
	t.Parallel()
	// Claimed is not terminal (the reclaimer checks that its runner took
	// the job) but settled: a claimer has nothing left to do for it.
	terminal := map[State]bool{Pending: false, Queued: false, Claiming: false, Claimed: false, Failed: true, Abandoned: true, Done: true}
	settled := map[State]bool{Pending: false, Queued: false, Claiming: false, Claimed: true, Failed: true, Abandoned: true, Done: true}
	for s, want := range terminal {
		if s.Terminal() != want || s.Settled() != settled[s] || !s.Valid() {
			t.Errorf("%s: terminal %v settled %v valid %v, want terminal %v, settled %v and valid", s, s.Terminal(), s.Settled(), s.Valid(), want, settled[s])
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
