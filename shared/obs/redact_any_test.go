package obs_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/redact"
)

// TestLoggerRedactsInsideAnyValues: the logger's promise (every string it
// writes passes through shared/redact) holds for strings inside a slice,
// a map or a struct logged with slog.Any, and the line stays JSON with the
// value's shape; a value with nothing to mask is written as it was.
func TestLoggerRedactsInsideAnyValues(t *testing.T) {
	t.Run("a mask through a closing quote", func(t *testing.T) {
		t.Parallel()
		// A PEM block with no end marker: the mask runs to the end of the
		// JSON text and eats its closing quote and bracket.
		pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx"
		var buf bytes.Buffer
		obs.NewLogger(&buf, "info").Info("upstream answer", slog.Any("detail", []string{pem}))
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil || strings.Contains(buf.String(), "MIIEow") {
			t.Fatalf("line %s (%v): want JSON with the key masked", buf.String(), err)
		}
		if d, _ := got["detail"].(string); d == "" || strings.Contains(buf.String(), "!ERROR") {
			t.Errorf("detail %v: want the redacted text as a string, not lost", got["detail"])
		}
	})
	t.Parallel()
	const tok = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
	for name, v := range map[string]any{
		"slice":  []string{"Authorization: token " + tok},
		"map":    map[string]string{"authorization": "token " + tok},
		"struct": struct{ Msg string }{"token " + tok},
	} {
		var buf bytes.Buffer
		obs.NewLogger(&buf, "info").Info("upstream answer", slog.Any("detail", v), slog.Any("plain", []int{1, 2}))
		line := buf.String()
		if strings.Contains(line, tok) {
			t.Errorf("%s: the token reached the log: %s", name, line)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("%s: the line is no longer JSON: %v: %s", name, err, line)
		}
		if _, ok := got["detail"].(string); ok || !strings.Contains(line, redact.Mask) {
			t.Errorf("%s: detail %v: want the value's own shape with the token masked", name, got["detail"])
		}
		if p, _ := got["plain"].([]any); len(p) != 2 {
			t.Errorf("%s: plain %v, want [1 2] as it was", name, got["plain"])
		}
	}
}
