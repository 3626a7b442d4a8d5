package rig

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Sign is GitHub's X-Hub-Signature-256 of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Deliver posts body to the webhook as GitHub does: X-GitHub-Event, X-GitHub-Delivery and a
// valid X-Hub-Signature-256. It returns the status and body of the answer.
func (r *Rig) Deliver(ctx context.Context, event, delivery string, body []byte) (int, string, error) {
	return Post(ctx, r.WebhookURL, r.WebhookSecret, event, delivery, body)
}

// Post delivers a signed webhook to url.
func Post(ctx context.Context, url, secret, event, delivery string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/local")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("deliver %s %s: %w", event, delivery, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// PrefixWriter prefixes every line written to it with "[name] " and passes on whole lines
// only, so the output of several functions can share one destination without interleaving
// inside a line. The destination must be safe for concurrent use (see SyncWriter).
type PrefixWriter struct {
	dst    io.Writer
	prefix []byte
	mu     sync.Mutex
	buf    []byte
}

// NewPrefixWriter returns a writer that prefixes lines with "[name] ".
func NewPrefixWriter(dst io.Writer, name string) *PrefixWriter {
	return &PrefixWriter{dst: dst, prefix: []byte("[" + name + "] ")}
}

func (p *PrefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := append(append([]byte{}, p.prefix...), p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
		if _, err := p.dst.Write(line); err != nil {
			return len(b), err
		}
	}
}

// SyncWriter serialises writes to W.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (s *SyncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(b)
}
