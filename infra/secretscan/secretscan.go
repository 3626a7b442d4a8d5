// Package secretscan finds secrets in output: the test kit behind the
// promise that no function and no command of the CLI ever writes a webhook
// secret, the App's private key, a token or a JIT config (STYLE.md rule 7).
// Its test drives every path of every function, wired as the functions'
// main.go wire them, with recognisable secrets, and scans everything they
// wrote (log lines, metrics, answers, returned errors) and the CLI's
// stdout and stderr.
//
// Decisions:
//   - A secret is found whole or in part: a Set keeps every Window-character
//     piece of it that starts at a multiple of Stride, so any excerpt of at
//     least Window+Stride-1 characters (a truncated error text, a JIT config
//     cut to a column width) contains a whole piece. Shorter secrets are
//     matched whole. Pieces are looked up in a map at every offset of the
//     output, so thousands of JIT-config pieces cost one pass.
//   - Derived forms are secrets of their own, because a leak need not look
//     like the value that was configured: the App key's DER (base64 and
//     hex) and private exponent (KeyForms), a JIT config's inner base64
//     files and the runner key's parameters (JITForms).
//   - Markers catch what has no recorded value: "ghs_" (an installation
//     token), "eyJhbGciOi" (the header of a JWT), "PRIVATE KEY".
//   - A hit names the secret, the stream and the line, never the value.
package secretscan

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"
)

// Piece geometry (see the package doc).
const (
	Window = 24
	Stride = 12
)

// Set is the secrets looked for. The zero value is empty and usable.
type Set struct {
	pieces  map[string]string // piece → secret name
	whole   map[string]string // short secret or marker → name
	markers map[string]string
}

// Add looks for value (named name) whole and in pieces.
func (s *Set) Add(name, value string) {
	if value == "" {
		return
	}
	if s.pieces == nil {
		s.pieces, s.whole = map[string]string{}, map[string]string{}
	}
	if len(value) < Window+Stride {
		s.whole[value] = name
		return
	}
	for i := 0; i+Window <= len(value); i += Stride {
		s.pieces[value[i:i+Window]] = name
	}
}

// Marker looks for m, a fragment every secret of a kind carries.
func (s *Set) Marker(name, m string) {
	if s.markers == nil {
		s.markers = map[string]string{}
	}
	s.markers[m] = name
}

// Len is the number of pieces, whole values and markers looked for.
func (s *Set) Len() int { return len(s.pieces) + len(s.whole) + len(s.markers) }

// Hit is one secret found in one line of a stream.
type Hit struct {
	Stream string
	Line   int // 1-based
	Secret string
}

func (h Hit) String() string { return fmt.Sprintf("%s line %d: %s", h.Stream, h.Line, h.Secret) }

// Find returns the secrets in out, the output named stream, one Hit per
// secret and line.
func (s *Set) Find(stream string, out []byte) []Hit {
	var hits []Hit
	for n, line := range bytes.Split(out, []byte("\n")) {
		found := map[string]bool{}
		for i := 0; i+Window <= len(line); i++ {
			if name, ok := s.pieces[string(line[i:i+Window])]; ok {
				found[name] = true
			}
		}
		for v, name := range s.whole {
			if bytes.Contains(line, []byte(v)) {
				found[name] = true
			}
		}
		for m, name := range s.markers {
			if bytes.Contains(line, []byte(m)) {
				found[name] = true
			}
		}
		names := make([]string, 0, len(found))
		for name := range found {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			hits = append(hits, Hit{Stream: stream, Line: n + 1, Secret: name})
		}
	}
	return hits
}

// KeyForms are the forms of a PEM RSA private key worth looking for: the
// PEM itself, its DER in base64 (every PEM body line is a piece of it) and
// hex, and the private exponent in decimal, hex and base64.
func KeyForms(pemKey []byte) (map[string]string, error) {
	b, _ := pem.Decode(pemKey)
	if b == nil {
		return nil, fmt.Errorf("secretscan: no PEM block")
	}
	var k *rsa.PrivateKey
	if pk, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		k = pk
	} else if any, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
		k, _ = any.(*rsa.PrivateKey)
	}
	if k == nil {
		return nil, fmt.Errorf("secretscan: not an RSA private key")
	}
	return map[string]string{
		"app key PEM":            string(pemKey),
		"app key DER base64":     base64.StdEncoding.EncodeToString(b.Bytes),
		"app key DER hex":        hex.EncodeToString(b.Bytes),
		"app key d decimal":      k.D.String(),
		"app key d hex":          k.D.Text(16),
		"app key d base64":       base64.StdEncoding.EncodeToString(k.D.Bytes()),
		"app key d base64url":    base64.RawURLEncoding.EncodeToString(k.D.Bytes()),
		"app key prime p base64": base64.StdEncoding.EncodeToString(k.Primes[0].Bytes()),
	}, nil
}

// JITForms are the forms of an encoded JIT config worth looking for: the
// config, each runner file it holds (base64), and each value
// of those files that is a credential (the runner key's parameters, the
// OAuth client id).
func JITForms(encoded string) (map[string]string, error) {
	outer, err := decodeObject(encoded)
	if err != nil {
		return nil, fmt.Errorf("secretscan: JIT config: %w", err)
	}
	forms := map[string]string{"JIT config": encoded}
	for file, v := range outer {
		inner, ok := v.(string)
		if !ok {
			continue
		}
		forms["JIT config "+file] = inner
		raw, err := base64.StdEncoding.DecodeString(inner)
		if err != nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(raw, &fields) != nil {
			continue
		}
		if file == ".credentials_rsaparams" {
			for p, pv := range fields {
				if s, ok := pv.(string); ok && p != "exponent" {
					forms["runner key "+p] = s
				}
			}
		}
		if data, ok := fields["Data"].(map[string]any); ok {
			if id, ok := data["ClientId"].(string); ok {
				forms["runner OAuth client id"] = id
			}
		}
	}
	return forms, nil
}

func decodeObject(b64 string) (map[string]any, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}
