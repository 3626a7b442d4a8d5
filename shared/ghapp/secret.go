package ghapp

import (
	"fmt"
	"log/slog"
)

const redacted = "[REDACTED]"

// Secret holds a credential, such as a JIT runner configuration, that must
// never reach a log, an error message, a metric or a JSON document by
// accident. Every way of printing or encoding it (fmt verbs including %#v
// and %x, slog, encoding/json, encoding.TextMarshaler) yields "[REDACTED]";
// only Reveal returns the value, so every use of the secret is a visible,
// greppable call.
//
// The value sits behind a pointer in an unexported field on purpose: fmt
// does not call methods on values reached through unexported struct fields,
// and prints a pointer there as an address, never the text it points to.
// A `type Secret string` would leak in exactly that case.
type Secret struct {
	v *string
}

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{v: &s} }

// Reveal returns the secret. Call it only where the value leaves the process
// for its one legitimate destination (e.g. the runner's user data).
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.Reveal() == "" }

// String redacts.
func (s Secret) String() string { return redacted }

// GoString redacts (%#v).
func (s Secret) GoString() string { return redacted }

// Format redacts under every verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue redacts in log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON redacts in encoding/json.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText redacts wherever a text encoding is used (map keys, YAML, …).
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
