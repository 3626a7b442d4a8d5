package webhook

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseDocumentedShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body func(t testing.TB) []byte
		want Job
	}{
		{
			name: "queued with null runner fields",
			body: func(t testing.TB) []byte { return compact(t, payload(t, "queued")) },
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "queued", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "waiting",
			body: func(t testing.TB) []byte { return compact(t, payload(t, "waiting")) },
			want: Job{Action: ActionWaiting, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "waiting", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "in_progress names the runner",
			body: func(t testing.TB) []byte { return compact(t, payload(t, "in_progress")) },
			want: Job{Action: ActionInProgress, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				RunnerName: "linux-x64-29679449", Status: "in_progress", Repo: "octo-org/octo-repo", InstallationID: 42,
				CreatedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), StartedAt: time.Date(2026, 11, 30, 9, 0, 41, 0, time.UTC)},
		},
		{
			name: "completed",
			body: func(t testing.TB) []byte { return compact(t, payload(t, "completed")) },
			want: Job{Action: ActionCompleted, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				RunnerName: "linux-x64-29679449", Status: "completed", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "completed with a null label, as GitHub's schema allows: left out",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "completed"), "workflow_job.labels", []any{"self-hosted", nil, "linux", "x64"}))
			},
			want: Job{Action: ActionCompleted, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				RunnerName: "linux-x64-29679449", Status: "completed", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "in_progress with only null labels: none left",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "in_progress"), "workflow_job.labels", []any{nil}))
			},
			want: Job{Action: ActionInProgress, JobID: 29679449, RunID: 10416386539, Labels: []string{},
				RunnerName: "linux-x64-29679449", Status: "in_progress", Repo: "octo-org/octo-repo", InstallationID: 42,
				CreatedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), StartedAt: time.Date(2026, 11, 30, 9, 0, 41, 0, time.UTC)},
		},
		{
			name: "in_progress without installation: not needed to mark done",
			body: func(t testing.TB) []byte { return compact(t, del(payload(t, "in_progress"), "installation")) },
			want: Job{Action: ActionInProgress, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				RunnerName: "linux-x64-29679449", Status: "in_progress", Repo: "octo-org/octo-repo",
				CreatedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), StartedAt: time.Date(2026, 11, 30, 9, 0, 41, 0, time.UTC)},
		},
		{
			name: "completed with an installation without id",
			body: func(t testing.TB) []byte { return compact(t, del(payload(t, "completed"), "installation.id")) },
			want: Job{Action: ActionCompleted, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				RunnerName: "linux-x64-29679449", Status: "completed", Repo: "octo-org/octo-repo"},
		},
		{
			name: "waiting without installation",
			body: func(t testing.TB) []byte { return compact(t, del(payload(t, "waiting"), "installation")) },
			want: Job{Action: ActionWaiting, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "waiting", Repo: "octo-org/octo-repo"},
		},
		{
			name: "extra unknown fields everywhere are ignored",
			body: func(t testing.TB) []byte {
				m := payload(t, "queued")
				m["brand_new_field"] = map[string]any{"x": []any{1, "two"}}
				set(m, "workflow_job.some_future_field", true)
				set(m, "repository.custom_properties", map[string]any{"team": "ci"})
				set(m, "installation.account", nil)
				return compact(t, m)
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "queued", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "public by visibility",
			body: func(t testing.TB) []byte {
				return compact(t, set(set(payload(t, "queued"), "repository.visibility", "public"), "repository.private", false))
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "queued", Repo: "octo-org/octo-repo", Public: true, InstallationID: 42},
		},
		{
			name: "internal is not public",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "repository.visibility", "internal"))
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "queued", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "no visibility, private false is public",
			body: func(t testing.TB) []byte {
				return compact(t, set(del(payload(t, "queued"), "repository.visibility"), "repository.private", false))
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "queued", Repo: "octo-org/octo-repo", Public: true, InstallationID: 42},
		},
		{
			name: "neither flag counts as public",
			body: func(t testing.TB) []byte {
				return compact(t, del(del(payload(t, "queued"), "repository.visibility"), "repository.private"))
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "queued", Repo: "octo-org/octo-repo", Public: true, InstallationID: 42},
		},
		{
			name: "empty labels parse (and match no pool later)",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{}))
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{},
				Status: "queued", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "exactly 100 labels",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", labels(100)))
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: strs(labels(100)),
				Status: "queued", Repo: "octo-org/octo-repo", InstallationID: 42},
		},
		{
			name: "enterprise managed user owner",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "repository.full_name", "octocat_acme/my.repo-1"))
			},
			want: Job{Action: ActionQueued, JobID: 29679449, RunID: 10416386539, Labels: []string{"self-hosted", "linux", "x64"},
				Status: "queued", Repo: "octocat_acme/my.repo-1", InstallationID: 42},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.body(t))
			if err != nil {
				t.Fatalf("Parse = %v, want nil", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func labels(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = "label-" + strings.Repeat("x", i%3) + string(rune('a'+i%26))
	}
	return out
}

func strs(in []any) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = v.(string)
	}
	return out
}

// badPayloads are payloads that must be refused with a 400 naming what is
// wrong; the handler test runs the same table end to end.
func badPayloads(t testing.TB) []struct {
	name  string
	body  []byte
	field string // the PayloadError's field
	text  string // part of its message
} {
	q := func() map[string]any { return payload(t, "queued") }
	return []struct {
		name  string
		body  []byte
		field string
		text  string
	}{
		{name: "empty body", body: []byte{}, text: "empty body"},
		{name: "invalid UTF-8", body: []byte("{\"action\":\"queued\xff\"}"), text: "UTF-8"},
		{name: "not JSON", body: []byte("action=queued"), text: "not valid JSON"},
		{name: "truncated JSON", body: compact(t, q())[:200], text: "not valid JSON"},
		{name: "trailing garbage", body: append(compact(t, q()), '}'), text: "not valid JSON"},
		{name: "array not object", body: []byte(`[{"action":"queued"}]`), text: "want a JSON object"},
		{name: "null", body: []byte(`null`), field: "action", text: "required"},
		{name: "missing action", body: compact(t, del(q(), "action")), field: "action", text: "required"},
		{name: "action a number", body: compact(t, set(q(), "action", 7)), field: "action", text: "want a string"},
		{name: "unknown action", body: compact(t, set(q(), "action", "requested")), field: "action", text: `unknown action "requested"`},
		{name: "missing workflow_job", body: compact(t, del(q(), "workflow_job")), field: "workflow_job", text: "required"},
		{name: "workflow_job a string", body: compact(t, set(q(), "workflow_job", "29679449")), field: "workflow_job", text: "want an object"},
		{name: "missing job id", body: compact(t, del(q(), "workflow_job.id")), field: "workflow_job.id", text: "required"},
		{name: "job id 0", body: compact(t, set(q(), "workflow_job.id", 0)), field: "workflow_job.id", text: "not a positive id"},
		{name: "job id negative", body: compact(t, set(q(), "workflow_job.id", -5)), field: "workflow_job.id", text: "not a positive id"},
		{name: "job id a string", body: compact(t, set(q(), "workflow_job.id", "29679449")), field: "workflow_job.id", text: "want an integer"},
		{name: "job id fractional", body: compact(t, set(q(), "workflow_job.id", 1.5)), field: "workflow_job.id", text: "want an integer"},
		{name: "job id past int64", body: []byte(strings.Replace(string(compact(t, q())), `"id":29679449`, `"id":99999999999999999999`, 1)), field: "workflow_job.id", text: "want an integer"},
		{name: "missing run id", body: compact(t, del(q(), "workflow_job.run_id")), field: "workflow_job.run_id", text: "required"},
		{name: "run id 0", body: compact(t, set(q(), "workflow_job.run_id", 0)), field: "workflow_job.run_id", text: "not a positive id"},
		{name: "missing labels", body: compact(t, del(q(), "workflow_job.labels")), field: "workflow_job.labels", text: "required"},
		{name: "null labels", body: compact(t, set(q(), "workflow_job.labels", nil)), field: "workflow_job.labels", text: "required"},
		{name: "labels a string", body: compact(t, set(q(), "workflow_job.labels", "self-hosted")), field: "workflow_job.labels", text: "array of strings"},
		{name: "label a number", body: compact(t, set(q(), "workflow_job.labels", []any{"self-hosted", 3})), field: "workflow_job.labels[1]", text: "want a string"},
		{name: "label null", body: compact(t, set(q(), "workflow_job.labels", []any{nil})), field: "workflow_job.labels[0]", text: "want a string, got null"},
		{name: "completed with a label a number", body: compact(t, set(payload(t, "completed"), "workflow_job.labels", []any{"self-hosted", 3})), field: "workflow_job.labels[1]", text: "want a string"},
		{name: "empty label", body: compact(t, set(q(), "workflow_job.labels", []any{"self-hosted", ""})), field: "workflow_job.labels[1]", text: "empty label"},
		{name: "blank label", body: compact(t, set(q(), "workflow_job.labels", []any{"  "})), field: "workflow_job.labels[0]", text: "empty label"},
		{name: "101 labels", body: compact(t, set(q(), "workflow_job.labels", labels(101))), field: "workflow_job.labels", text: "more than 100"},
		{name: "runner_name a number", body: compact(t, set(q(), "workflow_job.runner_name", 17)), field: "workflow_job.runner_name", text: "want a string"},
		{name: "missing repository", body: compact(t, del(q(), "repository")), field: "repository", text: "required"},
		{name: "missing full_name", body: compact(t, del(q(), "repository.full_name")), field: "repository.full_name", text: "required"},
		{name: "full_name without owner", body: compact(t, set(q(), "repository.full_name", "octo-repo")), field: "repository.full_name", text: "not owner/name"},
		{name: "full_name with two slashes", body: compact(t, set(q(), "repository.full_name", "a/b/c")), field: "repository.full_name", text: "not owner/name"},
		{name: "full_name empty owner", body: compact(t, set(q(), "repository.full_name", "/octo-repo")), field: "repository.full_name", text: "not owner/name"},
		{name: "full_name dot-dot", body: compact(t, set(q(), "repository.full_name", "octo-org/..")), field: "repository.full_name", text: "not owner/name"},
		{name: "private a string", body: compact(t, set(q(), "repository.private", "true")), field: "repository.private", text: "want a boolean"},
		{name: "missing installation", body: compact(t, del(q(), "installation")), field: "installation.id", text: "required for queued: is this webhook configured on the GitHub App?"},
		{name: "installation without id", body: compact(t, del(q(), "installation.id")), field: "installation.id", text: "is this webhook configured on the GitHub App?"},
		{name: "installation id 0", body: compact(t, set(q(), "installation.id", 0)), field: "installation.id", text: "not a positive id"},
		{name: "completed with installation id 0", body: compact(t, set(payload(t, "completed"), "installation.id", 0)), field: "installation.id", text: "not a positive id"},
		{name: "completed with installation id a string", body: compact(t, set(payload(t, "completed"), "installation.id", "42")), field: "installation.id", text: "want an integer"},
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range badPayloads(t) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.body)
			var pe *PayloadError
			if !errors.As(err, &pe) || !errors.Is(err, ErrBadPayload) {
				t.Fatalf("Parse = %v, want a *PayloadError (ErrBadPayload)", err)
			}
			if pe.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", pe.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not say %q", err, tt.text)
			}
		})
	}
}
