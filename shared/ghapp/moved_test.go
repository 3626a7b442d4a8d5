package ghapp_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// TestRenamedRepository: a job's repository renamed, or transferred,
// after the caller learned its name (the job record keeps the old one).
// GitHub answers the old name with a redirect to /repositories/{id}/…:
// 301 for a read, 307 for generate-jitconfig and the delete, which must be
// sent again with the same method, body and credentials. Every
// repository-scoped call still does its work on the renamed repository
// through the old name, and each went through the redirect.
func TestRenamedRepository(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, prefix      string
		newOwner, newName string
		selected          bool // the installation selects octo/hello by name
	}{
		{name: "renamed", newOwner: "octo", newName: "world", selected: true},
		{name: "transferred", newOwner: "mona", newName: "hello"},
		{name: "renamed, Enterprise Server", prefix: "/api/v3", newOwner: "octo", newName: "world", selected: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, option{prefix: tt.prefix})
			ctx := context.Background()
			if tt.selected {
				f.fake.SetInstallation(inst, "octo", true, "hello")
			}
			f.fake.SetRepo("octo", "hello", ghfake.Repo{Visibility: "public", User: true})
			f.fake.SetJob("octo", "hello", ghfake.Job{ID: 9, Status: "in_progress"})
			// The caller learns the name (and its installation token)
			// before the rename.
			if _, err := f.client.Repository(ctx, inst, "octo", "hello"); err != nil {
				t.Fatal(err)
			}
			f.fake.RenameRepo("octo", "hello", tt.newOwner, tt.newName)
			before := f.fake.Stats()

			jit, err := f.client.GenerateJIT(ctx, inst, repoJIT("pool-1"))
			if err != nil {
				t.Fatalf("generate jit config through the old name: %v", err)
			}
			rs := f.fake.Runners()
			if len(rs) != 1 || rs[0].ID != jit.RunnerID || rs[0].Name != "pool-1" || rs[0].Owner != tt.newOwner || rs[0].Repo != tt.newName ||
				len(rs[0].Labels) != 2 {
				t.Fatalf("runners %+v, want pool-1 (id %d, its labels) registered at %s/%s", rs, jit.RunnerID, tt.newOwner, tt.newName)
			}
			found, err := f.client.FindRunner(ctx, inst, ghapp.ScopeRepo, "octo", "hello", "pool-1")
			if err != nil || found.ID != jit.RunnerID {
				t.Fatalf("find runner through the old name: %+v %v, want id %d", found, err, jit.RunnerID)
			}
			status, err := f.client.JobStatus(ctx, inst, "octo", "hello", 9)
			if err != nil || status != "in_progress" {
				t.Fatalf("job status through the old name: %q %v, want in_progress", status, err)
			}
			repo, err := f.client.Repository(ctx, inst, "octo", "hello")
			if err != nil || repo != (ghapp.Repository{Public: true, UserOwned: true}) {
				t.Fatalf("repository through the old name: %+v %v, want public and a user's", repo, err)
			}
			// A runner GitHub no longer has is no error to DeleteRunner
			// (404): only the stand-in's runners tell it was deleted.
			if err := f.client.DeleteRunner(ctx, inst, ghapp.ScopeRepo, "octo", "hello", jit.RunnerID); err != nil {
				t.Fatalf("delete runner through the old name: %v", err)
			}
			if rs := f.fake.Runners(); len(rs) != 0 {
				t.Fatalf("runners %+v after the delete, want none", rs)
			}

			after := f.fake.Stats()
			for _, route := range []string{ghfake.RouteRepoJIT, ghfake.RouteRepoRunners, ghfake.RouteJob, ghfake.RouteRepo, ghfake.RouteRepoDeleteRunner} {
				redirects := after.Redirects[route] - before.Redirects[route]
				calls := after.Calls[route] - before.Calls[route]
				if redirects != 1 || calls != 2 {
					t.Errorf("%s: %d redirects in %d calls, want the old name redirected once and its target called", route, redirects, calls)
				}
			}
			if n := after.JITCalls - before.JITCalls; n != 2 {
				t.Errorf("%d JIT calls, want 2: the redirected POST and the one re-sent to its target", n)
			}
		})
	}
}
