package ghfake_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestPagingLinks: a list spanning pages carries GitHub's whole Link header
// (prev, next, last, first, in that order, each as applies), so a client
// that jumps to rel="last" or walks back pages meets it here; before, only
// rel="next" was sent. Under a path prefix the links keep it.
func TestPagingLinks(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"", "/api/v3"} {
		t.Run("prefix "+prefix, func(t *testing.T) {
			t.Parallel()
			var opts []ghfake.Option
			if prefix != "" {
				opts = append(opts, ghfake.WithPathPrefix(prefix))
			}
			f := setup(t, opts...)
			gh := client(t, f.srv.URL+prefix+"/", f.fake.IssueToken(inst))
			for i := range 5 {
				if _, _, err := gh.Actions.GenerateRepoJITConfig(context.Background(), "octo", "hello", jitReq(fmt.Sprint("r", i))); err != nil {
					t.Fatal(err)
				}
			}
			base := f.srv.URL + prefix + "/repos/octo/hello/actions/runners?"
			l := func(page int, rel string) string {
				return fmt.Sprintf(`<%spage=%d&per_page=2>; rel="%s"`, base, page, rel)
			}
			want := map[int]string{
				1: strings.Join([]string{l(2, "next"), l(3, "last")}, ", "),
				2: strings.Join([]string{l(1, "prev"), l(3, "next"), l(3, "last"), l(1, "first")}, ", "),
				3: strings.Join([]string{l(2, "prev"), l(1, "first")}, ", "),
			}
			for p := 1; p <= 3; p++ {
				_, resp, err := gh.Actions.ListRunners(context.Background(), "octo", "hello",
					&github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 2, Page: p}})
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Header.Get("Link"); got != want[p] {
					t.Errorf("page %d: Link\n %s\nwant\n %s", p, got, want[p])
				}
				// go-github reads the same pages from it.
				wantNext, wantPrev, wantLast, wantFirst := 0, 0, 0, 0
				if p < 3 {
					wantNext, wantLast = p+1, 3
				}
				if p > 1 {
					wantPrev, wantFirst = p-1, 1
				}
				if resp.NextPage != wantNext || resp.PrevPage != wantPrev || resp.LastPage != wantLast || resp.FirstPage != wantFirst {
					t.Errorf("page %d: go-github read next %d prev %d last %d first %d, want %d %d %d %d", p,
						resp.NextPage, resp.PrevPage, resp.LastPage, resp.FirstPage, wantNext, wantPrev, wantLast, wantFirst)
				}
			}
			// One page: no Link at all.
			resp := rawAPI(t, f, http.MethodGet, prefix+"/repos/octo/hello/actions/runners?per_page=5", nil,
				map[string]string{"Authorization": "token " + f.fake.IssueToken(inst)})
			resp.Body.Close()
			if got := resp.Header.Get("Link"); got != "" {
				t.Errorf("a list on one page: Link %q, want none", got)
			}
		})
	}
}
