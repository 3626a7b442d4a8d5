package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SignatureHeader is the header GitHub signs deliveries with (HMAC-SHA256).
const SignatureHeader = "X-Hub-Signature-256"

// ErrBadSignature is the class of every signature failure: the delivery is
// answered 401 and nothing is written. The errors below wrap it and say why.
var ErrBadSignature = errors.New("bad signature")

// Reasons a signature is refused; each wraps ErrBadSignature.
var (
	// ErrSignatureMissing: no X-Hub-Signature-256 header at all.
	ErrSignatureMissing = fmt.Errorf("%w: missing %s header", ErrBadSignature, SignatureHeader)
	// ErrSignatureSHA1: only a SHA-1 signature was offered. SHA-1 signatures
	// (X-Hub-Signature) are legacy and never accepted.
	ErrSignatureSHA1 = fmt.Errorf("%w: only a sha1 signature was sent; want %s: sha256=<64 hex digits>", ErrBadSignature, SignatureHeader)
	// ErrSignatureMalformed: the header is not "sha256=" followed by 64 hex digits.
	ErrSignatureMalformed = fmt.Errorf("%w: malformed %s: want sha256=<64 hex digits>", ErrBadSignature, SignatureHeader)
	// ErrSignatureMismatch: well formed, but no configured secret produced it.
	ErrSignatureMismatch = fmt.Errorf("%w: signature does not match", ErrBadSignature)
)

const sigPrefix = "sha256="

// Verify checks header (the value of X-Hub-Signature-256) against the
// HMAC-SHA256 of the raw body under each of secrets, so a secret can be
// rotated without downtime: while both the old and the new secret are
// configured, deliveries signed with either pass. Comparison is constant-time
// (hmac.Equal). Empty secrets are skipped: an empty HMAC key is something
// anybody can sign with. The error, when not nil, wraps ErrBadSignature and
// is one of the ErrSignature* reasons; it never contains a secret.
func Verify(body []byte, header string, secrets [][]byte) error {
	if header == "" {
		return ErrSignatureMissing
	}
	if strings.HasPrefix(strings.ToLower(header), "sha1=") {
		return ErrSignatureSHA1
	}
	if !strings.HasPrefix(header, sigPrefix) {
		return ErrSignatureMalformed
	}
	hexed := header[len(sigPrefix):]
	if len(hexed) != 2*sha256.Size {
		return ErrSignatureMalformed
	}
	got, err := hex.DecodeString(hexed)
	if err != nil {
		return ErrSignatureMalformed
	}
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		if hmac.Equal(got, Sign(body, s)) {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// Sign returns the HMAC-SHA256 of body under secret (the raw digest).
func Sign(body, secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return m.Sum(nil)
}

// SignatureValue returns the X-Hub-Signature-256 value GitHub would send for
// body signed with secret ("sha256=<hex>"). Tests and fixtures use it.
func SignatureValue(body, secret []byte) string {
	return sigPrefix + hex.EncodeToString(Sign(body, secret))
}
