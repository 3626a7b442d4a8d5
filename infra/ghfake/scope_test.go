package ghfake_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestJITRepoScopeHasOnlyTheDefaultGroup: runner groups are an
// organisation's (WithRunnerGroups); a repository's runners are all in the
// Default group (1), so the repository route refuses another group even
// when the organisation has it, and registers nothing.
func TestJITRepoScopeHasOnlyTheDefaultGroup(t *testing.T) {
	t.Parallel()
	f := setup(t, ghfake.WithRunnerGroups(1, 5))
	ctx := context.Background()
	req := jitReq("a")
	req.RunnerGroupID = 5
	if _, _, err := f.gh.Actions.GenerateOrgJITConfig(ctx, "octo", req); err != nil {
		t.Fatalf("org route, group 5: %v, want success", err)
	}
	_, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq("b"))
	if err != nil {
		t.Fatalf("repo route, Default group: %v, want success", err)
	}
	req = jitReq("c")
	req.RunnerGroupID = 5
	_, _, err = f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", req)
	errorResponse(t, err, 422)
	if _, ok := f.fake.RunnerByName("c"); ok {
		t.Errorf("runner c registered at the repository in group 5, want none")
	}
}

// TestJITWorkFolderDefaultsToWork: work_folder is optional and GitHub's
// description gives it the default "_work"; a request without it (every
// one ghclaim sends) gets a runner, and a config, whose work folder is
// "_work", not "".
func TestJITWorkFolderDefaultsToWork(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cfg, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "octo", "hello", jitReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	rn, ok := f.fake.RunnerByName("a")
	if !ok {
		t.Fatal("runner not registered")
	}
	if rn.WorkFolder != "_work" {
		t.Errorf("registered work folder %q, want %q", rn.WorkFolder, "_work")
	}
	if got := runnerFile(t, cfg)["WorkFolder"]; got != "_work" {
		t.Errorf(".runner WorkFolder %q, want %q", got, "_work")
	}
}

// runnerFile decodes the .runner file of an encoded JIT config.
func runnerFile(t *testing.T, cfg *github.JITRunnerConfig) map[string]string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(cfg.GetEncodedJITConfig())
	if err != nil {
		t.Fatal(err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(files[".runner"])
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
