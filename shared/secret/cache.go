package secret

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/clock"
)

// Defaults of CacheOptions.
const (
	// DefaultTTL is how long a value read from Secrets Manager is used
	// before it is read again: a rotation, or the first write by
	// `make app`, reaches warm functions within it.
	DefaultTTL = 5 * time.Minute
	// DefaultRetry is how long a failed read ("not set yet" included) is
	// remembered, so a function waiting for its secret asks Secrets
	// Manager at most once per DefaultRetry, not once per request.
	DefaultRetry = 15 * time.Second
)

// Placeholders are values template.yaml creates its secrets with: they
// count as "not set yet", never as a secret.
var Placeholders = []string{"REPLACE-WITH-THE-GITHUB-APP-PRIVATE-KEY-PEM"}

// ErrNotSet means the secret does not exist yet, is empty or still holds
// its placeholder: nothing is wrong but the setup (`make app`) is not
// done. It has NotSet() true, so consumers that must not import this
// package (they would import Secrets Manager's types with it) recognise it
// through errors.As on interface{ NotSet() bool }.
var ErrNotSet error = notSetError{}

// Reasons a secret holds nothing usable, as an error wrapping ErrNotSet
// reports them through NotSetReason() string (errors.As, like NotSet()):
// stable words a consumer that must not import this package chooses its
// own answer by, since the advice differs (`make app` sets a secret; it
// does not restore a deleted one). They never carry an ARN or a value.
// ErrNotSet itself, with no reason known, reports "".
const (
	// ReasonNeverSet: no AWSCURRENT value (created but never set, or no
	// such secret).
	ReasonNeverSet = "never_set"
	// ReasonDeleted: scheduled for deletion (restore-secret undoes it).
	ReasonDeleted = "deleted"
	// ReasonEmpty: a value of nothing but spaces.
	ReasonEmpty = "empty"
	// ReasonPlaceholder: still the template's placeholder.
	ReasonPlaceholder = "placeholder"
)

type notSetError struct{ reason string }

func (notSetError) Error() string          { return "secret not set yet" }
func (notSetError) NotSet() bool           { return true }
func (e notSetError) NotSetReason() string { return e.reason }
func (notSetError) Is(target error) bool {
	// An empty value is one way of not being set; a reasoned error is
	// ErrNotSet all the same.
	return target == ErrEmpty || target == ErrNotSet
}

// notSetBecause is ErrNotSet carrying why.
func notSetBecause(reason string) error { return notSetError{reason: reason} }

// CacheOptions tunes a Cache; zero values take the defaults.
type CacheOptions struct {
	TTL   time.Duration
	Retry time.Duration
	Now   clock.Func
}

// Cache returns a secret read from Secrets Manager by ARN, re-read at most
// once per TTL, or a plain value (local runs) that never changes. It is
// safe for concurrent use; one caller reads while the others wait.
//
// A read that fails for a passing reason after a good one (throttling, a
// 5xx, a network error) keeps the last good value for another Retry, for
// at most one TTL past that value's own (Secrets Manager throttling must
// not turn into 401s for GitHub, and a value that cannot be checked is not
// trusted for ever). A secret that was deleted (scheduled for deletion:
// InvalidRequestException), emptied, or that the function may no longer
// read or decrypt (an operator revoking a leaked secret or its key) is
// not served again: not set, or the error, at once.
type Cache struct {
	sm         SecretsManager
	arn, plain string
	o          CacheOptions

	mu    sync.Mutex
	value string
	err   error
	until time.Time
	read  bool
	// fetched is when value was read; it is served through passing
	// failures until fetched + 2 × TTL.
	fetched time.Time
}

// NewCache returns a cache over the secret named by arn, or over plain when
// arn is empty (sm may then be nil).
func NewCache(sm SecretsManager, arn, plain string, o CacheOptions) *Cache {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	o.Now = clock.Or(o.Now)
	return &Cache{sm: sm, arn: arn, plain: plain, o: o}
}

// Get returns the current value, or an error wrapping ErrNotSet when there
// is none yet. An error never carries the value.
func (c *Cache) Get(ctx context.Context) (string, error) {
	if c.arn == "" {
		if strings.TrimSpace(c.plain) == "" {
			return "", ErrNotSet
		}
		return c.plain, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Now()
	if c.read && now.Before(c.until) {
		return c.value, c.err
	}
	v, err := c.fetch(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller gave up (its deadline, a cancelled delivery): its
		// own failure, not the secret's. Cached, it would be every later
		// caller's answer until Retry, a cold webhook refusing every
		// delivery meanwhile. The last good value is the answer while a
		// passing failure could still keep it (a Secrets Manager that
		// stalls past every caller's deadline must not make an old value,
		// perhaps revoked, good for ever).
		if c.value != "" && now.Before(c.fetched.Add(2*c.o.TTL)) {
			return c.value, nil
		}
		return "", err
	case err == nil:
		c.value, c.err, c.until, c.fetched = v, nil, now.Add(c.o.TTL), now
	case c.value != "" && passing(err) && now.Before(c.fetched.Add(2*c.o.TTL)):
		c.until = now.Add(c.o.Retry) // keep the last good value through a blip
	default:
		c.value, c.err, c.until = "", err, now.Add(c.o.Retry)
	}
	c.read = true
	return c.value, c.err
}

// Name is the secret as errors name it: its ARN (an id that is not an ARN
// through redact.Input), or "" for a plain value.
func (c *Cache) Name() string {
	if c.arn == "" {
		return ""
	}
	return shown(c.arn)
}

// Bytes is Get as bytes (a PEM private key).
func (c *Cache) Bytes(ctx context.Context) ([]byte, error) {
	v, err := c.Get(ctx)
	if err != nil {
		return nil, err
	}
	return []byte(v), nil
}

// Rotation returns Get's value split as a rotation list (see Split): the
// webhook secrets accepted at once. A value with spaces or a line break
// around it is accepted both trimmed and as stored: GitHub signs with the
// secret as it has it, which is the value without the newline `echo` or an
// editor added (the App's settings take it in a one-line field), but may
// be one with a space typed into that field, or anything set through the
// API (PATCH /app/hook/config). Neither form can be told from the other
// here, and a second candidate key costs one HMAC, so both are tried.
func (c *Cache) Rotation(ctx context.Context) ([][]byte, error) {
	v, err := c.Get(ctx)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, raw := range strings.Split(v, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		out = append(out, []byte(s))
		if raw != s {
			out = append(out, []byte(raw))
		}
	}
	return out, nil
}

func (c *Cache) fetch(ctx context.Context) (string, error) { return read(ctx, c.sm, c.arn) }

// passing reports whether err, a failed read, may pass on its own
// (throttling, a 5xx, the network), so that the last good value may be
// served meanwhile. Not set (fetch reads ResourceNotFoundException and
// InvalidRequestException so), and Secrets Manager's refusals that stay
// until someone acts (access denied, the key disabled: DecryptionFailure,
// an invalid parameter), are not.
func passing(err error) bool {
	if errors.Is(err, ErrNotSet) {
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException", "DecryptionFailure", "InvalidParameterException",
			"UnrecognizedClientException", "InvalidSignatureException":
			return false
		}
	}
	return true
}

func isPlaceholder(v string) bool {
	for _, p := range Placeholders {
		if strings.TrimSpace(v) == p {
			return true
		}
	}
	return false
}
