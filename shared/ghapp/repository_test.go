package ghapp_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// TestRepository: the repository read says public and user-owned as the
// webhook reads them from a delivery (visibility first: internal is not
// public; owner.type "User"), in one call.
func TestRepository(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		repo *ghfake.Repo // nil: never set (private, an organisation's)
		want ghapp.Repository
	}{
		{name: "private, an organisation's", want: ghapp.Repository{}},
		{name: "public, a user's", repo: &ghfake.Repo{Visibility: "public", User: true}, want: ghapp.Repository{Public: true, UserOwned: true}},
		{name: "public, an organisation's", repo: &ghfake.Repo{Visibility: "public"}, want: ghapp.Repository{Public: true}},
		{name: "internal is not public", repo: &ghfake.Repo{Visibility: "internal"}, want: ghapp.Repository{}},
		{name: "private, a user's", repo: &ghfake.Repo{Visibility: "private", User: true}, want: ghapp.Repository{UserOwned: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, option{})
			if tt.repo != nil {
				f.fake.SetRepo("octo", "hello", *tt.repo)
			}
			before := f.fake.Stats().Calls[ghfake.RouteRepo]
			got, err := f.client.Repository(context.Background(), inst, "octo", "hello")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if n := f.fake.Stats().Calls[ghfake.RouteRepo] - before; n != 1 {
				t.Errorf("%d repository reads, want 1", n)
			}
		})
	}
}

// TestRepositoryErrors: GitHub's refusal comes back typed, for
// shared/failure to classify; arguments that cannot be right never reach
// GitHub.
func TestRepositoryErrors(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	f.fake.SetInstallation(inst, "octo", true, "world")
	_, err := f.client.Repository(context.Background(), inst, "octo", "hello")
	errorResponse(t, err, http.StatusNotFound)

	f.fake.Fail(ghfake.RouteRepo, 1, ghfake.ServerError(http.StatusBadGateway))
	_, err = f.client.Repository(context.Background(), inst, "octo", "world")
	errorResponse(t, err, http.StatusBadGateway)

	if _, err := f.client.Repository(context.Background(), inst, "octo", ""); !errors.Is(err, ghapp.ErrInvalidRequest) {
		t.Fatalf("no repository name: got %v, want ErrInvalidRequest", err)
	}
}
