package config

import (
	"slices"
	"strings"
	"testing"
)

// TestAllowedOwners: ALLOWED_OWNERS is a comma list an operator types by
// hand; spaces around names and empty items must not turn an allowed owner
// into an unknown one (" octo" never equals "octo").
func TestAllowedOwners(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		want        []string
	}{
		{"unset allows any owner", "", nil},
		{"one", "octo", []string{"octo"}},
		{"spaces and empty items", " octo , Other-Org ,, ", []string{"octo", "Other-Org"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			m["ALLOWED_OWNERS"] = tt.value
			w, err := LoadWebhook(env(m))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(w.AllowedOwners, tt.want) {
				t.Fatalf("AllowedOwners %q, want %q", w.AllowedOwners, tt.want)
			}
		})
	}
}

// TestAllowedOwnersRefusesWhatNoOwnerIs: an entry no owner's login can
// equal (a repository, a mention, a URL) would refuse every job of that
// owner without a word; the cold start fails instead, quoting it.
func TestAllowedOwnersRefusesWhatNoOwnerIs(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"octo-org/octo-repo", "https://github.com/octo-org", "@octo-org", "octo, -dash"} {
		m := base()
		m["ALLOWED_OWNERS"] = v
		w, err := LoadWebhook(env(m))
		if err == nil || !strings.Contains(err.Error(), "ALLOWED_OWNERS") || !strings.Contains(err.Error(), "is not an owner's login") {
			t.Errorf("ALLOWED_OWNERS=%q: got owners %q, error %v; want an error naming the variable and the entry", v, w.AllowedOwners, err)
		}
	}
}
