package pool

import (
	"strings"
	"testing"
)

func TestServe(t *testing.T) {
	t.Parallel()
	ps, err := Parse(`[
 {"name":"org-linux","labels":["self-hosted","linux"],"scope":"org","provisioner":{"type":"dispatch","queue_url":"q"}},
 {"name":"repo-linux","labels":["self-hosted","linux","x64"],"provisioner":{"type":"dispatch","queue_url":"q"}},
 {"name":"org-gpu","labels":["self-hosted","gpu"],"scope":"org","allow_public":true,"provisioner":{"type":"dispatch","queue_url":"q"}},
 {"name":"open","labels":["self-hosted","arm64"],"allow_public":true,"provisioner":{"type":"dispatch","queue_url":"q"}}
]`)
	if err != nil {
		t.Fatal(err)
	}
	org := Repository{FullName: "octo-org/app"}
	tests := []struct {
		name    string
		labels  []string
		repo    Repository
		want    string // the pool's name; "" = none
		wantWhy string // part of the reason when none
	}{
		{name: "first match", labels: []string{"linux"}, repo: org, want: "org-linux"},
		{name: "no pool has the labels", labels: []string{"windows"}, repo: org, wantWhy: "no pool matches labels [windows]"},
		{name: "user account: the repo-scoped match", labels: []string{"self-hosted", "linux"},
			repo: Repository{FullName: "mona/app", UserOwned: true}, want: "repo-linux"},
		{name: "user account: no repo-scoped match", labels: []string{"gpu"},
			repo: Repository{FullName: "mona/app", UserOwned: true}, wantWhy: "pool org-gpu registers runners at the organisation, and mona is a user account"},
		{name: "public refused", labels: []string{"linux"}, repo: Repository{FullName: "octo-org/app", Public: true},
			wantWhy: "repository octo-org/app is public and pool org-linux does not allow public repositories"},
		{name: "public allowed", labels: []string{"arm64"}, repo: Repository{FullName: "octo-org/app", Public: true}, want: "open"},
		{name: "public user repository: the repo-scoped match's policy", labels: []string{"linux"},
			repo: Repository{FullName: "mona/app", Public: true, UserOwned: true}, wantWhy: "pool repo-linux does not allow public"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, why := Serve(ps, tt.labels, tt.repo)
			if p.Name != tt.want || (tt.want == "") != (why != "") {
				t.Fatalf("got pool %q (why %q), want %q", p.Name, why, tt.want)
			}
			if !strings.Contains(why, tt.wantWhy) {
				t.Errorf("why %q, want it to say %q", why, tt.wantWhy)
			}
		})
	}
}

func TestIsPublic(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	str := func(s string) *string { return &s }
	tests := []struct {
		name       string
		private    *bool
		visibility *string
		want       bool
	}{
		{name: "visibility public", private: &yes, visibility: str("public"), want: true},
		{name: "visibility private", private: &no, visibility: str("private"), want: false},
		{name: "visibility internal", visibility: str("internal"), want: false},
		{name: "private flag only", private: &yes, want: false},
		{name: "not private", private: &no, want: true},
		{name: "empty visibility: the flag", private: &yes, visibility: str(""), want: false},
		{name: "neither: public, the stricter case", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsPublic(tt.private, tt.visibility); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
