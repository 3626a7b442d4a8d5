package chaos

import (
	"encoding/base64"
	"io"
	"math/rand/v2"
	"testing"
)

// TestPiecesFindAnyPartOfAConfig: a JIT config quoted whole, from its
// middle, or cut to its end in a log line is counted; lines holding none
// of it, or less than 36 bytes of it, are not.
func TestPiecesFindAnyPartOfAConfig(t *testing.T) {
	t.Parallel()
	raw := make([]byte, 360)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(rnd.Uint32())
	}
	config := base64.StdEncoding.EncodeToString(raw) // 480 bytes, as a JIT config's alphabet
	tests := []struct {
		name string
		line string
		want bool
	}{
		{name: "whole", line: `{"msg":"x","cfg":"` + config + `"}`, want: true},
		{name: "from its middle", line: `{"err":"ValidationException: value ` + config[201:260] + `..."}`, want: true},
		{name: "its end", line: `{"tail":"` + config[len(config)-40:] + `"}`, want: true},
		{name: "none of it", line: `{"msg":"claim ok","job_id":7}`},
		{name: "a short bit", line: `{"msg":"` + config[100:130] + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLogSink(io.Discard)
			_, _ = l.Write([]byte(tt.line + "\n"))
			if got := l.pieces([]string{config}); (got > 0) != tt.want {
				t.Errorf("pieces = %d, want found %v", got, tt.want)
			}
		})
	}
}
