package webhook

import (
	"errors"
	"strings"
	"testing"
)

// GitHub's published test vector (docs: "Validating webhook deliveries").
const (
	vectorSecret  = "It's a Secret to Everybody"
	vectorPayload = "Hello, World!"
	vectorHeader  = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestVerifyGitHubTestVector(t *testing.T) {
	t.Parallel()
	if err := Verify([]byte(vectorPayload), vectorHeader, [][]byte{[]byte(vectorSecret)}); err != nil {
		t.Fatalf("Verify(GitHub's vector) = %v, want nil", err)
	}
	if got := SignatureValue([]byte(vectorPayload), []byte(vectorSecret)); got != vectorHeader {
		t.Fatalf("SignatureValue = %s, want %s", got, vectorHeader)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"action":"queued"}`)
	oldS, newS := []byte("old-secret"), []byte("new-secret")
	sigOld, sigNew := SignatureValue(body, oldS), SignatureValue(body, newS)
	digestNew := strings.TrimPrefix(sigNew, "sha256=")
	tests := []struct {
		name    string
		body    []byte
		header  string
		secrets [][]byte
		want    error // nil: accepted
	}{
		{name: "new secret", body: body, header: sigNew, secrets: [][]byte{newS}},
		{name: "rotation accepts new", body: body, header: sigNew, secrets: [][]byte{newS, oldS}},
		{name: "rotation accepts old", body: body, header: sigOld, secrets: [][]byte{newS, oldS}},
		{name: "uppercase hex digest", body: body, header: "sha256=" + strings.ToUpper(digestNew), secrets: [][]byte{newS}},
		{name: "old secret retired", body: body, header: sigOld, secrets: [][]byte{newS}, want: ErrSignatureMismatch},
		{name: "tampered body", body: []byte(`{"action":"queuee"}`), header: sigNew, secrets: [][]byte{newS}, want: ErrSignatureMismatch},
		{name: "empty body signed for another", body: nil, header: sigNew, secrets: [][]byte{newS}, want: ErrSignatureMismatch},
		{name: "no secrets", body: body, header: sigNew, secrets: nil, want: ErrSignatureMismatch},
		{name: "empty secret never signs", body: body, header: SignatureValue(body, nil), secrets: [][]byte{{}}, want: ErrSignatureMismatch},
		{name: "missing", body: body, header: "", secrets: [][]byte{newS}, want: ErrSignatureMissing},
		{name: "sha1 only", body: body, header: "sha1=" + strings.Repeat("ab", 20), secrets: [][]byte{newS}, want: ErrSignatureSHA1},
		{name: "SHA1 prefix any case", body: body, header: "SHA1=" + strings.Repeat("ab", 20), secrets: [][]byte{newS}, want: ErrSignatureSHA1},
		{name: "wrong prefix", body: body, header: "sha512=" + digestNew, secrets: [][]byte{newS}, want: ErrSignatureMalformed},
		{name: "uppercase prefix", body: body, header: "SHA256=" + digestNew, secrets: [][]byte{newS}, want: ErrSignatureMalformed},
		{name: "no prefix", body: body, header: digestNew, secrets: [][]byte{newS}, want: ErrSignatureMalformed},
		{name: "odd length", body: body, header: sigNew[:len(sigNew)-1], secrets: [][]byte{newS}, want: ErrSignatureMalformed},
		{name: "too long", body: body, header: sigNew + "00", secrets: [][]byte{newS}, want: ErrSignatureMalformed},
		{name: "non-hex", body: body, header: "sha256=" + strings.Repeat("zz", 32), secrets: [][]byte{newS}, want: ErrSignatureMalformed},
		{name: "trailing space", body: body, header: sigNew + " ", secrets: [][]byte{newS}, want: ErrSignatureMalformed},
		{name: "prefix only", body: body, header: "sha256=", secrets: [][]byte{newS}, want: ErrSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(tt.body, tt.header, tt.secrets)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Verify = %v, want %v (an ErrBadSignature)", err, tt.want)
			}
			for _, s := range tt.secrets {
				if len(s) > 0 && strings.Contains(err.Error(), string(s)) {
					t.Fatalf("error %q contains the secret", err)
				}
			}
		})
	}
}
