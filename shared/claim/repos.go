package claim

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// RepoTTL is how long a claimer process trusts what GitHub said of a
// repository's visibility and owner type (repoCache).
const RepoTTL = 5 * time.Minute

// maxRepos bounds repoCache: past it, expired entries go, and if none
// has, all of them (a fresh start costs a read per repository, no more).
const maxRepos = 4096

// repoCache remembers, per process, GitHub's answer to a repository read
// (resolve: the job's recorded pool no longer serves it, and the pool that
// does depends on the repository's visibility and owner type as they are
// now) for RepoTTL. A job its pool refuses by policy (allow_public turned
// off while public repositories' jobs were queued) is retried on the ladder
// until MAX_AGE, a dozen attempts: read each time, a backlog of five
// hundred such jobs cost six thousand calls of the installation's budget
// in ninety minutes, starving the claims of every other job. Remembered,
// the jobs of one repository cost one read per process every RepoTTL. A
// repository made private (or transferred) since is seen within RepoTTL:
// one more rung of the ladder. Only public answers are remembered (keep),
// and no failure is.
type repoCache struct {
	mu sync.Mutex
	m  map[repoKey]repoEntry
	// reading holds the reads in flight: a batch's workers claiming jobs
	// of one repository at once wait for the first one's answer.
	reading map[repoKey]*repoRead
}

type repoKey struct {
	installation int64
	repo         string // owner/name, lower case: GitHub's names are case-insensitive
}

type repoEntry struct {
	r  ghapp.Repository
	at time.Time
}

type repoRead struct {
	done chan struct{}
	r    ghapp.Repository
	err  error
}

// errReadAborted is a shared read's answer when the read ended without
// one (it panicked: the claimer recovers per message, and the next
// read must not wait for it).
var errReadAborted = errors.New("repository read aborted")

// get returns the repository as gh says it is, or as it said within
// RepoTTL before now. Concurrent callers for one repository share one
// read; a caller whose share of it failed for the reader's context alone
// (another invocation's deadline) reads for itself.
func (c *repoCache) get(ctx context.Context, gh GitHub, installation int64, owner, name string, now time.Time) (ghapp.Repository, error) {
	k := repoKey{installation, strings.ToLower(owner + "/" + name)}
	for {
		c.mu.Lock()
		if e, ok := c.m[k]; ok && now.Sub(e.at) < RepoTTL && !now.Before(e.at) {
			c.mu.Unlock()
			return e.r, nil
		}
		rd, waiting := c.reading[k]
		if !waiting {
			break // c.mu held: this caller reads
		}
		c.mu.Unlock()
		select {
		case <-rd.done:
		case <-ctx.Done():
			return ghapp.Repository{}, ctx.Err()
		}
		if isContextErr(rd.err) && ctx.Err() == nil {
			continue
		}
		return rd.r, rd.err
	}
	rd := &repoRead{done: make(chan struct{}), err: errReadAborted}
	if c.reading == nil {
		c.reading = map[repoKey]*repoRead{}
	}
	c.reading[k] = rd
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.reading, k)
		close(rd.done)
		if rd.err == nil && rd.r.Public {
			c.keep(k, rd.r, now)
		}
	}()
	rd.r, rd.err = gh.Repository(ctx, installation, owner, name)
	return rd.r, rd.err
}

// keep remembers r, read at now, under k; c.mu is held. Only a public
// repository is remembered: that answer refuses the job wherever public
// repositories are not allowed (the backlog repoCache is for), and held
// stale it only delays a repository made private since. A private one,
// held stale after the repository was made public again, would let a
// job of a public repository (a fork's pull request) be claimed in a
// pool that refuses them; read each time, it costs a read per job, which
// is then claimed.
func (c *repoCache) keep(k repoKey, r ghapp.Repository, now time.Time) {
	if c.m == nil {
		c.m = map[repoKey]repoEntry{}
	}
	if len(c.m) >= maxRepos {
		for k, e := range c.m {
			if now.Sub(e.at) >= RepoTTL || now.Before(e.at) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxRepos {
			clear(c.m)
		}
	}
	c.m[k] = repoEntry{r: r, at: now}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
