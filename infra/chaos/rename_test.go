package chaos

import (
	"testing"

	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestRenamedPools: the rename changes the linux pool's name only (labels,
// provisioner and the other pools as they were), and the rollback names it
// linux again.
func TestRenamedPools(t *testing.T) {
	start := []pool.Pool{
		{Name: PoolEC2, Labels: []string{"self-hosted", "linux", "x64"}, Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: "lt"}},
		{Name: PoolDispatch, Labels: []string{"self-hosted", "gpu"}},
	}
	next := renamed(start, PoolRenamed)
	if next[0].Name != PoolRenamed || next[1].Name != PoolDispatch || start[0].Name != PoolEC2 {
		t.Fatalf("renamed: %s, %s (start's first now %s)", next[0].Name, next[1].Name, start[0].Name)
	}
	if next[0].Provisioner.LaunchTemplate != start[0].Provisioner.LaunchTemplate || len(next[0].Labels) != 3 {
		t.Fatalf("renamed changed more than the name: %+v", next[0])
	}
	if back := renamed(next, PoolEC2); back[0].Name != PoolEC2 {
		t.Fatalf("rolled back: %s", back[0].Name)
	}
}

// TestJobOfRenamedRunner: the accounting reads the job of a runner named
// after the renamed pool as of the others (duplicates and orphans count
// across names).
func TestJobOfRenamedRunner(t *testing.T) {
	for name, want := range map[string]int64{
		"linux-7000000001": 7000000001, "linux-next-7000000001": 7000000001, "linux-next-7000000001-r2": 7000000001,
		"gpu-7000000002": 7000000002, "hosted-12": 0, "linux-next": 0,
	} {
		if got := jobOfRunner(name); got != want {
			t.Errorf("jobOfRunner(%q) = %d, want %d", name, got, want)
		}
	}
}
