package chaos

import (
	"net/http"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// Middleware injects GitHub faults on the wire: for each API request to gh
// the injector draws, and a fault is programmed into the fake for the next
// request (ghfake.Fail on every route, count 1), which under concurrency may
// be a neighbouring request. Either way each drawn fault hits exactly one
// request, so the counts stay exact, and the client sees GitHub's real
// status codes, headers and bodies.
//
// GitHub has no non-retryable fault here: a 401/404/422 would fail the job
// for a reason that is not an outage. Fatal and Unknown draws become 5xx.
func Middleware(gh *ghfake.Server, in *Injector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/_fake/") {
			if k, ok := in.Draw(TargetGitHub, "claimer"); ok {
				gh.Fail(ghfake.RouteAny, 1, GitHubFault(k, in.Intn(4)))
			}
		}
		gh.ServeHTTP(w, r)
	})
}

// GitHubFault is the fake GitHub's fault for kind k; variant (0–3) picks
// among the forms a kind takes on GitHub.
func GitHubFault(k Kind, variant int) ghfake.Fault {
	switch k {
	case Throttle:
		if variant%2 == 0 {
			return ghfake.TooManyRequests(time.Second)
		}
		return ghfake.SecondaryRateLimit(time.Second)
	case Network:
		return ghfake.ConnectionReset()
	case AfterEffect:
		if variant%2 == 0 {
			return ghfake.ConnectionReset().AfterEffect()
		}
		return ghfake.ServerError(http.StatusBadGateway).AfterEffect()
	case Unknown:
		return ghfake.ServerError(http.StatusGatewayTimeout)
	}
	return ghfake.ServerError([]int{500, 502, 503, 500}[variant%4])
}
