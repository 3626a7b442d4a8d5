package ghapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
)

// Keyed is a Client whose private key is read when it is needed, through
// key (a cache with a TTL over Secrets Manager in production), so a
// function started before the key exists (the stack was deployed before
// `make app`) runs instead of failing at init, and a rotated key is used
// without a cold start. It builds a Client for each new key and reuses it
// while the key stays the same (tokens cached by the old Client are
// dropped with it). Errors from key are returned wrapped, with their
// NotSet() intact, so the caller can hold work back until setup is done.
type Keyed struct {
	cfg Config
	key func(ctx context.Context) ([]byte, error)

	mu     sync.Mutex
	pem    []byte
	client *Client
}

// NewKeyed returns a Keyed client; cfg.PrivateKey is ignored.
func NewKeyed(cfg Config, key func(ctx context.Context) ([]byte, error)) (*Keyed, error) {
	if key == nil {
		return nil, errors.New("ghapp: a private key source is required")
	}
	if cfg.AppID <= 0 {
		return nil, errors.New("ghapp: AppID is required")
	}
	return &Keyed{cfg: cfg, key: key}, nil
}

// Ready reports why there is no usable key, or nil.
func (k *Keyed) Ready(ctx context.Context) error {
	_, err := k.current(ctx)
	return err
}

// current returns the Client for the current key.
func (k *Keyed) current(ctx context.Context) (*Client, error) {
	pem, err := k.key(ctx)
	if err != nil {
		return nil, fmt.Errorf("github app private key: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil && bytes.Equal(pem, k.pem) {
		return k.client, nil
	}
	cfg := k.cfg
	cfg.PrivateKey = pem
	c, err := New(cfg)
	if err != nil {
		return nil, err // New never puts the key into its error
	}
	k.pem, k.client = pem, c
	return c, nil
}

// with runs f on the Client of the current key.
func with[T any](ctx context.Context, k *Keyed, f func(*Client) (T, error)) (T, error) {
	c, err := k.current(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(c)
}

// The Client's calls, each with the current key.

// GenerateJIT is Client.GenerateJIT with the current key.
func (k *Keyed) GenerateJIT(ctx context.Context, installationID int64, req JITRequest) (JIT, error) {
	return with(ctx, k, func(c *Client) (JIT, error) { return c.GenerateJIT(ctx, installationID, req) })
}

// FindRunner is Client.FindRunner with the current key.
func (k *Keyed) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (Runner, error) {
	return with(ctx, k, func(c *Client) (Runner, error) { return c.FindRunner(ctx, installationID, scope, owner, repo, name) })
}

// DeleteRunner is Client.DeleteRunner with the current key.
func (k *Keyed) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error {
	_, err := with(ctx, k, func(c *Client) (struct{}, error) {
		return struct{}{}, c.DeleteRunner(ctx, installationID, scope, owner, repo, runnerID)
	})
	return err
}

// JobStatus is Client.JobStatus with the current key.
func (k *Keyed) JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error) {
	return with(ctx, k, func(c *Client) (string, error) { return c.JobStatus(ctx, installationID, owner, repo, jobID) })
}

// Repository is Client.Repository with the current key.
func (k *Keyed) Repository(ctx context.Context, installationID int64, owner, repo string) (Repository, error) {
	return with(ctx, k, func(c *Client) (Repository, error) { return c.Repository(ctx, installationID, owner, repo) })
}

// Installations is Client.Installations with the current key.
func (k *Keyed) Installations(ctx context.Context) ([]Installation, error) {
	return with(ctx, k, func(c *Client) ([]Installation, error) { return c.Installations(ctx) })
}

// Repositories is Client.Repositories with the current key.
func (k *Keyed) Repositories(ctx context.Context, installationID int64) ([]string, error) {
	return with(ctx, k, func(c *Client) ([]string, error) { return c.Repositories(ctx, installationID) })
}

// ListRunners is Client.ListRunners with the current key.
func (k *Keyed) ListRunners(ctx context.Context, installationID int64, scope, owner, repo string) ([]Runner, error) {
	return with(ctx, k, func(c *Client) ([]Runner, error) { return c.ListRunners(ctx, installationID, scope, owner, repo) })
}

// ListHookDeliveries is Client.ListHookDeliveries with the current key.
func (k *Keyed) ListHookDeliveries(ctx context.Context, cursor string, perPage int) (DeliveryPage, error) {
	return with(ctx, k, func(c *Client) (DeliveryPage, error) { return c.ListHookDeliveries(ctx, cursor, perPage) })
}

// RedeliverHookDelivery is Client.RedeliverHookDelivery with the current key.
func (k *Keyed) RedeliverHookDelivery(ctx context.Context, deliveryID int64) error {
	_, err := with(ctx, k, func(c *Client) (struct{}, error) { return struct{}{}, c.RedeliverHookDelivery(ctx, deliveryID) })
	return err
}
