package ghapp_test

import (
	"fmt"
	"testing"

	"github.com/ghclaim/ghclaim/shared/ghapp"
)

func TestLacks(t *testing.T) {
	t.Parallel()
	all := map[string]string{"administration": "write", "organization_self_hosted_runners": "write", "actions": "read", "metadata": "read"}
	tests := []struct {
		name    string
		granted map[string]string
		scopes  []string
		want    string
	}{
		{name: "everything", granted: all, scopes: []string{ghapp.ScopeRepo, ghapp.ScopeOrg}, want: "[]"},
		{name: "repo pools, no org runners", granted: map[string]string{"administration": "write", "actions": "read"}, scopes: []string{ghapp.ScopeRepo}, want: "[]"},
		{name: "org pools, no org runners", granted: map[string]string{"administration": "write", "actions": "read"}, scopes: []string{ghapp.ScopeOrg},
			want: "[organization_self_hosted_runners:write]"},
		{name: "read is not write", granted: map[string]string{"administration": "read", "actions": "write"}, scopes: []string{ghapp.ScopeRepo},
			want: "[administration:write]"},
		{name: "nothing granted", granted: nil, scopes: []string{ghapp.ScopeRepo},
			want: "[actions:read administration:write]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fmt.Sprint(ghapp.Lacks(tt.granted, ghapp.Needs(tt.scopes...))); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}
