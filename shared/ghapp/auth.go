package ghapp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/failure"
)

const (
	// jwtBackdate is how far in the past a JWT's iat is set, as GitHub
	// recommends, so a clock slightly ahead of GitHub's is not refused.
	jwtBackdate = 60 * time.Second
	// jwtLifetime is exp − iat. GitHub refuses an exp more than 10 minutes
	// ahead; with iat backdated, exp lands 9 minutes from now.
	jwtLifetime = 10 * time.Minute
	// refreshBefore is how long before expires_at a cached installation
	// token is replaced, so a token never expires under an attempt that
	// fetched it (several calls, each up to DefaultTimeout).
	refreshBefore = 5 * time.Minute
	// maxErrorBody caps what is kept of a failed exchange's answer.
	maxErrorBody = 64 << 10

	acceptJSON = "application/vnd.github+json"
	apiVersion = "2022-11-28"
	userAgent  = "ghclaim"
)

// appJWT returns the App's RS256 JSON Web Token for now: iat backdated by
// jwtBackdate, exp = iat + jwtLifetime, iss the App id as a string.
func appJWT(key *rsa.PrivateKey, appID int64, now time.Time) (string, error) {
	iat := now.Add(-jwtBackdate).Unix()
	claims, err := json.Marshal(struct {
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
		Iss string `json:"iss"`
	}{Iat: iat, Exp: iat + int64(jwtLifetime/time.Second), Iss: strconv.FormatInt(appID, 10)})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign app jwt: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// exchangeError is a token exchange GitHub refused: its answer, kept whole
// so that every caller can be handed its own copy of the response.
type exchangeError struct {
	installationID int64
	req            *http.Request // the access_tokens request, without its JWT
	status         string
	statusCode     int
	header         http.Header
	body           []byte
}

func (e *exchangeError) Error() string {
	return fmt.Sprintf("installation %d access token: github %s", e.installationID, e.status)
}

// refusal reports whether GitHub refused the exchange for the App's
// credentials or its installation (401: a key GitHub no longer has; 404:
// no such installation; 403 without a rate-limit signal: the
// installation suspended), which asking again moments later will not
// change: the refusals installation.cached holds for refusalHold. A rate
// limit is held for the whole App (limitHold, Client.holdLimit); a 5xx or
// any other answer may pass at once and is not held.
func (e *exchangeError) refusal() bool {
	switch e.statusCode {
	case http.StatusUnauthorized, http.StatusNotFound:
		return true
	case http.StatusForbidden:
		body := bytes.ToLower(e.body)
		return e.header.Get("Retry-After") == "" && strings.TrimSpace(e.header.Get("X-RateLimit-Remaining")) != "0" &&
			!bytes.Contains(body, []byte("rate limit")) && !bytes.Contains(body, []byte("rate-limit"))
	}
	return false
}

// limitHold reports whether e is a rate limit on the token exchange (a
// 429, or a 403 that is not a refusal: a Retry-After, a budget at 0, or
// GitHub's message saying so), and until when every exchange of the App
// waits for it, whatever the installation: the Retry-After, else the
// reset of a budget at 0, else a minute (GitHub's least wait for a
// secondary limit), at most an hour from now.
func (e *exchangeError) limitHold(now time.Time) (time.Time, bool) {
	if e.statusCode != http.StatusTooManyRequests && (e.statusCode != http.StatusForbidden || e.refusal()) {
		return time.Time{}, false
	}
	wait := time.Minute
	if v := strings.TrimSpace(e.header.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs > 0 {
			wait = time.Duration(min(secs, int64(time.Hour/time.Second))) * time.Second
		} else if at, err := http.ParseTime(v); err == nil && at.After(now) {
			wait = at.Sub(now)
		}
	} else if strings.TrimSpace(e.header.Get("X-RateLimit-Remaining")) == "0" {
		if v, err := strconv.ParseInt(strings.TrimSpace(e.header.Get("X-RateLimit-Reset")), 10, 64); err == nil && time.Unix(v, 0).After(now) {
			wait = time.Unix(v, 0).Sub(now)
		}
	}
	return now.Add(min(wait, time.Hour)), true
}

// heldRefusal is a refusal handed from memory (refusalHold) until until:
// no request reached GitHub, which tokenErrors marks on its copy of the
// answer (failure.HeldUntilHeader) so that a claim it fails is no attempt.
type heldRefusal struct {
	*exchangeError
	until time.Time
}

func (h heldRefusal) Unwrap() error { return h.exchangeError }

// response rebuilds GitHub's answer with a fresh body.
func (e *exchangeError) response() *http.Response {
	return &http.Response{
		Status: e.status, StatusCode: e.statusCode, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: e.header.Clone(), Body: io.NopCloser(bytes.NewReader(e.body)),
		ContentLength: int64(len(e.body)), Request: e.req,
	}
}

// flight is one token exchange in progress; callers that arrive while it
// runs wait for its result instead of starting their own. The caller that
// started it gets a refusal as GitHub's own answer; those that joined get
// it marked held (heldRefusal), as the callers after it do.
type flight struct {
	done   chan struct{}
	token  string
	minted time.Time
	err    error
	// limitedUntil: GitHub answered with a rate limit, held for the App
	// until then (exchangeError.limitHold); zero otherwise.
	limitedUntil time.Time
	// left: the caller that started the exchange gave up before its
	// result (its context ended); owned: a caller that joined took the
	// result as its own instead (installation.mu guards both). A refusal
	// that reached GitHub is then still one caller's own answer: one
	// attempt, one app_refused, not none.
	left, owned bool
}

// installation holds one installation's access token.
type installation struct {
	c  *Client
	id int64

	mu        sync.Mutex
	token     string
	minted    time.Time // when token was received
	refreshAt time.Time
	pending   *flight
	rescoped  time.Time // when a refused call last dropped a token (mayRescope)
	// refused is the last exchange's answer when GitHub refused it
	// (exchangeError.refusal), handed to every caller until refusedUntil
	// instead of a new exchange.
	refused      *exchangeError
	refusedUntil time.Time
}

// limit returns the rate limit GitHub last answered a token exchange of
// the App with, while it holds at now (holdLimit).
func (c *Client) limit(now time.Time) (*exchangeError, time.Time, bool) {
	c.limitMu.Lock()
	defer c.limitMu.Unlock()
	if c.limited == nil || !now.Before(c.limitedUntil) {
		return nil, time.Time{}, false
	}
	return c.limited, c.limitedUntil, true
}

// holdLimit keeps ee, a rate limit GitHub answered a token exchange with,
// for every exchange of the App until until. The exchange's budget is the
// App's, not the installation's, and go-github's memory of a limit is one
// installation client's and holds no 429: without this, every call of
// every installation started a fresh exchange inside GitHub's Retry-After
// (a backlog of N jobs: N exchanges a minute into a secondary limit).
func (c *Client) holdLimit(ee *exchangeError, until time.Time) {
	c.limitMu.Lock()
	defer c.limitMu.Unlock()
	if until.After(c.limitedUntil) {
		c.limited, c.limitedUntil = ee, until
	}
}

// refusalHold is how long a token exchange GitHub refused (the App's key,
// its installation gone or suspended) is answered from memory: callers of
// the installation within it get GitHub's refusal at once, no exchange.
// Without it every attempt of every queued job of the installation asks
// again (twice with check_queued, plus the reclaimer's and the janitor's
// calls): hundreds of exchanges a minute during a key rotation, all
// refused. Held, it is one exchange per installation and process per
// 20 s. A held copy is marked (failure.HeldUntilHeader: Remembered,
// ResetAt the hold's end), so a claim that met only it, no request, is no
// attempt: the claimer defers it past the hold like a remembered rate
// limit, and an operator's fix on GitHub's side (the key, the suspension)
// reaches the claims at most 20 s (plus the deferral's jitter) after it,
// whatever RETRY_LADDER. 20 s is also under the default ladder's shortest
// retry (30 s − 20 % jitter = 24 s), so a job retried after GitHub's own
// refusal meets a fresh answer. A new private key needs no wait at all:
// Keyed builds a new Client for it, which holds nothing.
const refusalHold = 20 * time.Second

// rescopeEvery bounds how often a call refused with 404, or with 403
// "Resource not accessible by integration", drops the installation's
// cached token for a fresh one (installTransport.RoundTrip): once a minute
// per installation, so a lasting refusal (a pool at a scope the App cannot
// reach) costs at most one token exchange a minute, not one per call.
const rescopeEvery = time.Minute

// mayRescope reports whether a call refused with tok may be asked again
// with a fresh token now, and if so drops tok. A tok that is no longer the
// cached token (another call refused at the same time dropped it first, a
// refresh replaced it) is asked again with its successor whatever the
// bound: that costs no exchange of its own, and refused, a matrix of jobs
// of a repository just added to the installation failed for good but the
// first, their calls all out with the old token together.
func (in *installation) mayRescope(tok string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.token != tok {
		return true
	}
	now := in.c.now()
	if !in.rescoped.IsZero() && now.Sub(in.rescoped) < rescopeEvery {
		return false
	}
	in.rescoped = now
	in.token, in.refreshAt = "", time.Time{}
	return true
}

// cached returns a valid token: the cached one until refreshBefore its
// expiry, else GitHub's refusal of the exchange while it is held
// (refusalHold), else the result of the one exchange in flight for the
// installation; with when the token was received and whether it came from
// the cache (rather than from an exchange this call waited for). The
// exchange runs apart from the caller's context (bounded by the client's
// timeout), so a caller that gives up does not fail the others that wait
// for it.
func (in *installation) cached(ctx context.Context) (string, time.Time, bool, error) {
	in.mu.Lock()
	now := in.c.now()
	if in.token != "" && now.Before(in.refreshAt) {
		tok, minted := in.token, in.minted
		in.mu.Unlock()
		return tok, minted, true, nil
	}
	if in.refused != nil && now.Before(in.refusedUntil) {
		// GitHub's own answer, as the exchange got it: classified as
		// then (AppRefused), each caller its own copy (tokenErrors),
		// marked as held: no request reached GitHub.
		err := heldRefusal{in.refused, in.refusedUntil}
		in.mu.Unlock()
		return "", time.Time{}, false, err
	}
	if ee, until, ok := in.c.limit(now); ok {
		// The App's exchanges are rate-limited (any installation's met
		// it): GitHub's answer, held the same way.
		in.mu.Unlock()
		return "", time.Time{}, false, heldRefusal{ee, until}
	}
	f := in.pending
	started := f == nil
	if started {
		f = &flight{done: make(chan struct{})}
		in.pending = f
		go in.exchange(context.WithoutCancel(ctx), f)
	}
	in.mu.Unlock()
	select {
	case <-f.done:
		var ee *exchangeError
		if !started && errors.As(f.err, &ee) && (ee.refusal() || !f.limitedUntil.IsZero()) {
			in.mu.Lock()
			own := f.left && !f.owned
			f.owned = f.owned || own
			in.mu.Unlock()
			if !own {
				// Joined the exchange another caller started: GitHub's
				// refusal reached this caller as it reaches the callers
				// after it, without a request of its own, so it is marked
				// held alike (one refused exchange is one attempt, one
				// app_refused, however many claims waited for it).
				until := f.limitedUntil
				if until.IsZero() {
					until = f.minted.Add(refusalHold)
				}
				return "", time.Time{}, false, heldRefusal{ee, until}
			}
		}
		return f.token, f.minted, false, f.err
	case <-ctx.Done():
		if started {
			in.mu.Lock()
			f.left = true
			in.mu.Unlock()
		}
		return "", time.Time{}, false, ctx.Err()
	}
}

// drop forgets tok if it is still the cached token: GitHub refused it.
func (in *installation) drop(tok string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.token == tok {
		in.token, in.refreshAt = "", time.Time{}
	}
}

// exchange runs one token exchange and publishes its result to f. A
// refusal (exchangeError.refusal) is held for refusalHold; any other
// failure is not kept: the next caller after it tries again.
func (in *installation) exchange(ctx context.Context, f *flight) {
	ctx, cancel := context.WithTimeout(ctx, in.c.timeout)
	defer cancel()
	tok, expires, err := in.c.accessToken(ctx, in.id)
	minted := in.c.now()
	in.mu.Lock()
	f.token, f.minted, f.err = tok, minted, err
	if err == nil {
		in.token, in.minted, in.refreshAt = tok, minted, expires.Add(-refreshBefore)
	}
	in.refused = nil
	var ee *exchangeError
	if errors.As(err, &ee) && ee.refusal() {
		in.refused, in.refusedUntil = ee, minted.Add(refusalHold)
	}
	if errors.As(err, &ee) {
		if until, ok := ee.limitHold(minted); ok {
			f.limitedUntil = until
			in.c.holdLimit(ee, until)
		}
	}
	in.pending = nil
	in.mu.Unlock()
	close(f.done)
}

// accessToken asks GitHub for an installation access token
// (POST /app/installations/{id}/access_tokens), authenticated by a fresh
// App JWT. A refusal comes back as an *exchangeError.
func (c *Client) accessToken(ctx context.Context, installationID int64) (string, time.Time, error) {
	jwt, err := appJWT(c.key, c.appID, c.now())
	if err != nil {
		return "", time.Time{}, fmt.Errorf("installation %d access token: %w", installationID, err)
	}
	u := c.apiRoot + "/app/installations/" + strconv.FormatInt(installationID, 10) + "/access_tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("installation %d access token: %w", installationID, err)
	}
	req.Header.Set("Accept", acceptJSON)
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := c.tr.RoundTrip(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("installation %d access token: %w", installationID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		shown := req.Clone(context.WithoutCancel(ctx))
		shown.Header.Del("Authorization")
		return "", time.Time{}, &exchangeError{installationID: installationID, req: shown,
			status: resp.Status, statusCode: resp.StatusCode, header: resp.Header, body: body}
	}
	var answer struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return "", time.Time{}, fmt.Errorf("installation %d access token: decode answer: %w", installationID, err)
	}
	if answer.Token == "" || answer.ExpiresAt.IsZero() {
		return "", time.Time{}, fmt.Errorf("installation %d access token: answer without token or expires_at", installationID)
	}
	return answer.Token, answer.ExpiresAt, nil
}

// installTransport authenticates each request with the installation's
// token. A failed exchange is returned as an error, not a response, so a
// Config.Wrap transport never reads the token endpoint's headers.
type installTransport struct {
	in   *installation
	next http.RoundTripper
}

// replicationWaits are the waits before a request refused (401) with a
// token received less than replicationWindow ago is sent again with the
// same token: GitHub may refuse a new installation token for a few seconds
// until it has replicated (octokit's auth-app retries such a 401 while the
// token is younger than 5 s, waiting 1, 2, 3 s: its last try about 6 s
// after the token's creation). Without them the first call of every cold
// start or token refresh could fail a claim for good (a 401 is
// non_retryable).
var replicationWaits = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}

const replicationWindow = 5 * time.Second

// RoundTrip sends req with the installation's token. A 401 on a token
// received moments ago is waited out (replicationWaits). A cached token
// GitHub refuses after that (401: revoked, the installation suspended and
// back, a clock behind GitHub's keeping it past its expiry) is dropped and
// the request sent once more with a fresh one: left cached, every call of
// the installation would fail until the token's refresh time, up to 55
// minutes, and a 401 fails a claim for good. A 401 on a fresh token then
// stands. Likewise a cached token refused with 404 or 403 "Resource not
// accessible by integration" (not on a DELETE), at most once a minute per
// installation (rescopeEvery): it may predate a repository or permission
// the installation was given since. The response's Request is req, without
// the token, so no error built from it carries the credential.
func (t installTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tok, minted, cached, err := t.in.cached(ctx)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.send(req, tok, false)
	resp, err = t.waitOut(req, tok, minted, resp, err)
	if err != nil || !cached {
		return resp, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		t.in.drop(tok)
	case req.Method != http.MethodDelete && resendable(req) && outOfScope(resp) && t.in.mayRescope(tok):
		// An installation token keeps the repositories and permissions
		// its installation had when it was created: a repository added
		// to the installation since (a job of it arrives at once) answers
		// 404, a permission granted since 403, and either fails the claim
		// for good. Asked once more with a fresh token. Not a DELETE,
		// whose 404 is the usual "already gone".
	default:
		return resp, nil
	}
	if !resendable(req) {
		return resp, nil // the body cannot be sent again
	}
	if tok, minted, _, err = t.in.cached(ctx); err != nil {
		// The exchange's own error (a 5xx, a timeout: retryable) is the
		// answer, not the stale token's 401 (which would fail a claim
		// for good). This request reached GitHub (its refused first
		// send): a refusal held since is handed unmarked, GitHub's
		// answer to an attempt, never a claim that made no request.
		var held heldRefusal
		if errors.As(err, &held) {
			err = held.exchangeError
		}
		drain(resp)
		return nil, err
	}
	drain(resp)
	resp, err = t.send(req, tok, true)
	return t.waitOut(req, tok, minted, resp, err)
}

// outOfScope reports whether resp is GitHub's answer to a token that does
// not reach the resource: 404, or 403 "Resource not accessible by
// integration" (a 403 of a rate limit says otherwise). It leaves resp's
// body readable.
func outOfScope(resp *http.Response) bool {
	if resp.StatusCode == http.StatusNotFound {
		return true
	}
	if resp.StatusCode != http.StatusForbidden {
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return bytes.Contains(body, []byte("Resource not accessible by integration"))
}

// waitOut sends req again with tok after each of replicationWaits while
// the answer is a 401 and tok was received less than replicationWindow
// ago (resp and err: the answer so far).
func (t installTransport) waitOut(req *http.Request, tok string, minted time.Time, resp *http.Response, err error) (*http.Response, error) {
	for _, wait := range replicationWaits {
		if err != nil || resp.StatusCode != http.StatusUnauthorized || t.in.c.now().Sub(minted) >= replicationWindow || !resendable(req) {
			break
		}
		drain(resp)
		if err := t.in.c.sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		resp, err = t.send(req, tok, true)
	}
	return resp, err
}

// send sends a copy of req with tok; again: not the first time, so with
// its body anew (resendable).
func (t installTransport) send(req *http.Request, tok string, again bool) (*http.Response, error) {
	out := req.Clone(req.Context())
	if again && req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		out.Body = body
	}
	out.Header.Set("Authorization", "token "+tok)
	resp, err := t.next.RoundTrip(out)
	if resp != nil {
		resp.Request = req
	}
	return resp, err
}

// resendable reports whether req's body can be sent again.
func resendable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// drain reads what is left of a response that is not returned, and
// closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
}

// rateTrim keeps go-github from holding, as the client's own, a limit that
// is not: it takes away the rate headers go-github must not remember
// (trimRate) before go-github reads them. The rate transport beneath has
// read the answer already, by its own rules.
//
// Given a 403 or 429 that names no Retry-After while budget remains,
// go-github reads X-RateLimit-Reset as the wait and then refuses every call
// of the installation's client itself until then, up to an hour; GitHub's
// documented wait is a minute, which ghclaim shares with every process as
// a block (shared/ratelimit). So that header is dropped from such an
// answer; the classifier reads the reset only when remaining is 0, which
// this leaves alone, and a Retry-After GitHub names is kept, and go-github
// honours it.
//
// Given a 401, go-github keeps its X-RateLimit-* as the client's budget;
// but GitHub could not tie that request to the App or an installation, and
// has sent the unauthenticated budget of the caller's address (limit 60,
// https://github.com/maxlath/backup-github-repo/issues/10): at remaining 0,
// go-github refused every later call of the client, with no request, until
// that budget's reset, up to an hour after the key or token was put right.
// So a 401 reaches go-github without them.
type rateTrim struct{ next http.RoundTripper }

func (t rateTrim) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		trimRate(resp)
	}
	return resp, err
}

// rateHeaders are what go-github reads a budget from.
var rateHeaders = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "X-RateLimit-Resource"}

// trimRate drops from resp the rate headers go-github must not hold
// (rateTrim): all of a 401's, and X-RateLimit-Reset of a 403 or 429 that
// names no Retry-After while budget remains.
func trimRate(resp *http.Response) {
	if resp == nil {
		return
	}
	h := resp.Header
	switch {
	case resp.StatusCode == http.StatusUnauthorized && h.Get("X-RateLimit-Limit")+h.Get("X-RateLimit-Remaining")+h.Get("X-RateLimit-Reset") != "":
		resp.Header = h.Clone()
		for _, k := range rateHeaders {
			resp.Header.Del(k)
		}
	case resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests:
	case h.Get("Retry-After") == "" && h.Get("X-RateLimit-Reset") != "" && strings.TrimSpace(h.Get("X-RateLimit-Remaining")) != "0":
		resp.Header = h.Clone()
		resp.Header.Del("X-RateLimit-Reset")
	}
}

// tokenErrors hands a failed token exchange's answer to go-github as the
// response, so that go-github types it like any other GitHub error.
type tokenErrors struct {
	next http.RoundTripper
	now  clock.Func
}

func (t tokenErrors) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	var ee *exchangeError
	if err != nil && errors.As(err, &ee) {
		// The exchange's answer is go-github's to type (a rate limit of
		// it is held for the App by Client.holdLimit; the reset of a
		// secondary limit is dropped so that go-github does not hold it
		// to the App window's reset).
		r := ee.response()
		trimRate(r)
		var held heldRefusal
		if errors.As(err, &held) {
			r.Header.Set(failure.HeldUntilHeader, held.until.UTC().Format(time.RFC3339Nano))
			if r.Header.Get("Retry-After") != "" {
				// GitHub's Retry-After counts from its answer, which may be
				// most of a wait ago: go-github would hold this
				// installation's client that long again from now, past the
				// hold's end. It is the seconds left of the hold instead.
				left := held.until.Sub(t.now())
				r.Header.Set("Retry-After", strconv.FormatInt(max(1, int64((left+time.Second-1)/time.Second)), 10))
			}
		}
		return r, nil
	}
	return resp, err
}
