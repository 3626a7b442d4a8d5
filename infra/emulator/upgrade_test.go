package emulator_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

// releaseTemplate is template.yaml as released at 674a79e, whose table's
// sweep index was "sweep", projection ALL: the stacks an upgrade starts
// from.
const releaseTemplate = "testdata/template-674a79e.yaml"

// TestUpgradeChangesOneIndexPerDeploy: CloudFormation changes no index in
// place and adds or removes one per update (the stand-in,
// CheckIndexUpdate, refuses as it does; moto applies anything). The keys-only
// sweep index therefore has a new name, and a stack from the release
// upgrades in two deploys, as README says: LegacySweepIndex=keep (adds
// sweep_keys beside sweep), then drop (removes sweep). One deploy straight
// to drop is refused, and renaming the index back to "sweep" would be an
// in-place change, refused whatever the path.
func TestUpgradeChangesOneIndexPerDeploy(t *testing.T) {
	t.Parallel()
	head := filepath.Join("..", "..", "template.yaml")
	load := func(path string, params map[string]string) map[string]emulator.Index {
		t.Helper()
		ix, err := emulator.TableIndexes(path, params)
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	release := load(releaseTemplate, nil)
	if p := release["sweep"].Projection; len(p) == 0 || p[0] != "ALL" {
		t.Fatalf("the release's sweep index %+v, want projection ALL", release["sweep"])
	}
	keep := load(head, map[string]string{"LegacySweepIndex": "keep"})
	keepKeys := load(head, map[string]string{"LegacySweepIndex": "keep-keys-only"})
	drop := load(head, nil) // the default
	// A stack of main between 3f21869 and sweep_keys: "sweep", keys only.
	mainKeysOnly := map[string]emulator.Index{"sweep": {Name: "sweep", Keys: release["sweep"].Keys, Projection: []string{"KEYS_ONLY"}}}

	for _, step := range []struct {
		name          string
		before, after map[string]emulator.Index
		refused       string // "" when CloudFormation applies it
	}{
		{"release, then keep", release, keep, ""},
		{"keep, then drop", keep, drop, ""},
		{"a new stack's updates", drop, drop, ""},
		{"release straight to drop", release, drop, "more than one GSI creation or deletion"},
		{"main's keys-only sweep, then keep-keys-only", mainKeysOnly, keepKeys, ""},
		{"keep-keys-only, then drop", keepKeys, drop, ""},
		{"main's keys-only sweep with the release's keep", mainKeysOnly, keep, "Cannot update GSI's properties"},
	} {
		err := emulator.CheckIndexUpdate(step.before, step.after)
		switch {
		case step.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", step.name, err)
		case step.refused != "" && (err == nil || !strings.Contains(err.Error(), step.refused)):
			t.Errorf("%s: %v, want CloudFormation's refusal %q", step.name, err, step.refused)
		}
	}
	if len(drop) != 1 || drop["sweep_keys"].Projection[0] != "KEYS_ONLY" {
		t.Errorf("a stack's indexes %+v, want sweep_keys alone, keys only", drop)
	}
}

// TestCheckIndexUpdateRefusesInPlaceChanges: the in-place change the
// release's index took at first (ALL to KEYS_ONLY under the same name)
// is refused with CloudFormation's message; so is a change of key.
func TestCheckIndexUpdateRefusesInPlaceChanges(t *testing.T) {
	t.Parallel()
	old := map[string]emulator.Index{"sweep": {Name: "sweep", Keys: []string{"sweep_shard S HASH", "sweep_at N RANGE"}, Projection: []string{"ALL"}}}
	for name, changed := range map[string]emulator.Index{
		"projection": {Name: "sweep", Keys: old["sweep"].Keys, Projection: []string{"KEYS_ONLY"}},
		"included":   {Name: "sweep", Keys: old["sweep"].Keys, Projection: []string{"INCLUDE", "state", "version"}},
		"key":        {Name: "sweep", Keys: []string{"sweep_shard S HASH"}, Projection: []string{"ALL"}},
	} {
		err := emulator.CheckIndexUpdate(old, map[string]emulator.Index{"sweep": changed})
		if err == nil || !strings.Contains(err.Error(), "Cannot update GSI's properties") {
			t.Errorf("%s changed in place: %v, want refused", name, err)
		}
	}
}

// TestReclaimerReadsAnIndexItHasAndMay: in every LegacySweepIndex mode, the
// index the reclaimer is told to read (SWEEP_INDEX) is one the table has,
// and its role may Query it; while the old index is kept, it may Query
// sweep_keys too, which it reads once the drop deploy removed the old one
// before updating the function (shared/store: Stale).
func TestReclaimerReadsAnIndexItHasAndMay(t *testing.T) {
	t.Parallel()
	head := filepath.Join("..", "..", "template.yaml")
	for _, mode := range []string{"drop", "keep", "keep-keys-only"} {
		params := map[string]string{"LegacySweepIndex": mode}
		indexes, err := emulator.TableIndexes(head, params)
		if err != nil {
			t.Fatal(err)
		}
		fn, err := emulator.Resolve(head, params, "Resources", "ReclaimerFunction", "Properties")
		if err != nil {
			t.Fatal(err)
		}
		props := fn.(map[string]any)
		env := props["Environment"].(map[string]any)["Variables"].(map[string]any)
		index := fmt.Sprint(env["SWEEP_INDEX"])
		if _, ok := indexes[index]; !ok {
			t.Errorf("%s: the reclaimer reads %q, which the table (%v) lacks", mode, index, indexes)
		}
		var allowed []string
		for _, pol := range emulator.AsList(props["Policies"]) {
			for _, st := range emulator.PolicyStatements(pol) {
				if st["Action"] != "dynamodb:Query" {
					continue
				}
				for _, r := range emulator.AsList(st["Resource"]) {
					sub, _ := r.(map[string]any)["Fn::Sub"].(string)
					_, ix, _ := strings.Cut(sub, "/index/")
					allowed = append(allowed, ix)
				}
			}
		}
		want := []string{index}
		if mode != "drop" {
			want = append(want, "sweep_keys")
		}
		for _, w := range want {
			if !slices.Contains(allowed, w) {
				t.Errorf("%s: the reclaimer's role may Query %v, not %s", mode, allowed, w)
			}
		}
		if mode == "drop" && len(allowed) != 1 {
			t.Errorf("drop: the reclaimer's role may Query %v, want sweep_keys alone", allowed)
		}
	}
}
