package claim

import (
	"context"
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
// one more rung of the ladder. Failures are not remembered.
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

// get returns the repository as gh says it is, or as it said within
// RepoTTL before now. Concurrent callers for one repository share one
// read (a failed one too: each retries on its own attempt's ladder).
func (c *repoCache) get(ctx context.Context, gh GitHub, installation int64, owner, name string, now time.Time) (ghapp.Repository, error) {
	k := repoKey{installation, strings.ToLower(owner + "/" + name)}
	c.mu.Lock()
	if e, ok := c.m[k]; ok && now.Sub(e.at) < RepoTTL && !now.Before(e.at) {
		c.mu.Unlock()
		return e.r, nil
	}
	if rd, ok := c.reading[k]; ok {
		c.mu.Unlock()
		select {
		case <-rd.done:
			return rd.r, rd.err
		case <-ctx.Done():
			return ghapp.Repository{}, ctx.Err()
		}
	}
	rd := &repoRead{done: make(chan struct{})}
	if c.reading == nil {
		c.reading = map[repoKey]*repoRead{}
	}
	c.reading[k] = rd
	c.mu.Unlock()

	rd.r, rd.err = gh.Repository(ctx, installation, owner, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reading, k)
	close(rd.done)
	if rd.err != nil {
		return rd.r, rd.err
	}
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
	c.m[k] = repoEntry{r: rd.r, at: now}
	return rd.r, nil
}
