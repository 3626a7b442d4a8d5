package rig

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// Deliver posts body to the webhook as GitHub does, with every header GitHub sends
// (ghfake.DeliveryHeader: both signatures among them). It returns the status and body of
// the answer.
func (r *Rig) Deliver(ctx context.Context, event, delivery string, body []byte) (int, string, error) {
	return Post(ctx, r.WebhookURL, r.WebhookSecret, event, delivery, body)
}

// deliveries carries Post's requests on a transport of its own.
var deliveries = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

// Post delivers a signed webhook of the local App (AppID) to url.
func Post(ctx context.Context, url, secret, event, delivery string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header = ghfake.DeliveryHeader(event, delivery, AppID, body, secret)
	resp, err := deliveries.Do(req)
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
