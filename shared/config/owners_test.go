package config

import (
	"slices"
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
