package claim_test

// Provisional wiring: a go-github client and a ladder policy standing in
// for shared/ghapp and shared/backoff until they land.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/pool"
)

const appID = int64(99)

var appKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

type secret string

func (s secret) Reveal() string { return string(s) }

type tmpGitHub struct {
	base string
	mu   sync.Mutex
	cl   map[int64]*github.Client
}

func newGitHub(t *testing.T, h *harness) (claim.GitHub, claim.RateSource) {
	return &tmpGitHub{base: h.ghURL, cl: map[int64]*github.Client{}}, nil
}

func (g *tmpGitHub) client(inst int64) (*github.Client, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.cl[inst]; c != nil {
		return c, nil
	}
	tr, err := ghinstallation.New(http.DefaultTransport, appID, inst, appKey())
	if err != nil {
		return nil, err
	}
	tr.BaseURL = g.base
	c := github.NewClient(&http.Client{Transport: tr})
	c.BaseURL, _ = url.Parse(g.base + "/")
	g.cl[inst] = c
	return c, nil
}

func (g *tmpGitHub) GenerateJIT(ctx context.Context, t claim.Target, name string, labels []string, groupID int64) (claim.JIT, error) {
	c, err := g.client(t.InstallationID)
	if err != nil {
		return claim.JIT{}, err
	}
	req := &github.GenerateJITConfigRequest{Name: name, RunnerGroupID: groupID, Labels: labels}
	var cfg *github.JITRunnerConfig
	if t.Scope == pool.ScopeOrg {
		cfg, _, err = c.Actions.GenerateOrgJITConfig(ctx, t.Owner, req)
	} else {
		cfg, _, err = c.Actions.GenerateRepoJITConfig(ctx, t.Owner, t.Repo, req)
	}
	if err != nil {
		return claim.JIT{}, err
	}
	return claim.JIT{Runner: conv(cfg.Runner), Config: secret(cfg.GetEncodedJITConfig())}, nil
}

func conv(r *github.Runner) claim.Runner {
	return claim.Runner{ID: r.GetID(), Name: r.GetName(), Status: r.GetStatus(), Busy: r.GetBusy()}
}

var errNoRunner = errors.New("runner not found")

func (g *tmpGitHub) FindRunner(ctx context.Context, t claim.Target, name string) (claim.Runner, error) {
	c, err := g.client(t.InstallationID)
	if err != nil {
		return claim.Runner{}, err
	}
	rs, _, err := c.Actions.ListRunners(ctx, t.Owner, t.Repo, &github.ListRunnersOptions{Name: &name})
	if err != nil {
		return claim.Runner{}, err
	}
	for _, r := range rs.Runners {
		if r.GetName() == name {
			return conv(r), nil
		}
	}
	return claim.Runner{}, errNoRunner
}

func (g *tmpGitHub) DeleteRunner(ctx context.Context, t claim.Target, id int64) error {
	c, err := g.client(t.InstallationID)
	if err != nil {
		return err
	}
	_, err = c.Actions.RemoveRunner(ctx, t.Owner, t.Repo, id)
	return err
}

func (g *tmpGitHub) JobStatus(ctx context.Context, inst int64, owner, repo string, jobID int64) (string, error) {
	c, err := g.client(inst)
	if err != nil {
		return "", err
	}
	j, _, err := c.Actions.GetWorkflowJobByID(ctx, owner, repo, jobID)
	if err != nil {
		return "", err
	}
	return j.GetStatus(), nil
}

func status(err error) int {
	var e *github.ErrorResponse
	if errors.As(err, &e) && e.Response != nil {
		return e.Response.StatusCode
	}
	return 0
}

func (g *tmpGitHub) IsAlreadyExists(err error) bool { return status(err) == http.StatusConflict }
func (g *tmpGitHub) IsNotFound(err error) bool {
	return errors.Is(err, errNoRunner) || status(err) == http.StatusNotFound
}

func newPolicy(t *testing.T, h *harness, seed uint64) claim.Policy {
	return backoff.Default()
}
