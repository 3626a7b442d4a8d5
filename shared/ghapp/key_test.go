package ghapp

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
)

var (
	pasteOnce sync.Once
	pasteKey  *rsa.PrivateKey
)

// setupPaste returns an RSA key and its PEM as GitHub hands it out (PKCS#1).
func setupPaste(t *testing.T) (*rsa.PrivateKey, string) {
	t.Helper()
	pasteOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		pasteKey = k
	})
	return pasteKey, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(pasteKey)}))
}

// TestParseKeyAcceptsWhatCanMeanOneThing: the App's key as operators paste
// it, each form unambiguous, reads as the same key.
func TestParseKeyAcceptsWhatCanMeanOneThing(t *testing.T) {
	t.Parallel()
	key, pkcs1 := setupPaste(t)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	jsonValue, _ := json.Marshal(pkcs1) // "-----BEGIN …-----\n…": the escapes as a JSON or .env file holds them
	tests := []struct {
		name, in string
	}{
		{name: "PKCS#1 as GitHub hands it out", in: pkcs1},
		{name: "PKCS#8", in: pkcs8},
		{name: "CRLF", in: strings.ReplaceAll(pkcs1, "\n", "\r\n")},
		{name: "CR", in: strings.ReplaceAll(pkcs1, "\n", "\r")},
		{name: "surrounding whitespace", in: "\n\t  " + pkcs1 + "  \n\n"},
		{name: "byte order mark", in: "\ufeff" + pkcs1},
		{name: "indented lines (a YAML block)", in: "  " + strings.ReplaceAll(strings.TrimSpace(pkcs1), "\n", "\n  ") + "\n"},
		{name: "literal \\n escapes on one line", in: strings.Trim(string(jsonValue), `"`)},
		{name: "literal \\r\\n escapes on one line", in: strings.ReplaceAll(strings.Trim(string(jsonValue), `"`), `\n`, `\r\n`)},
		{name: "a public key before it", in: publicPEM(t, &key.PublicKey) + pkcs1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseKey([]byte(tt.in))
			if err != nil {
				t.Fatalf("got %v, want the key", err)
			}
			if !got.Equal(key) {
				t.Fatal("got another key, want the one pasted")
			}
		})
	}
}

// TestParseKeyNamesWhatIsWrong: what is not the App's key is refused with
// an error that says what it is instead, and never quotes the input.
func TestParseKeyNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	key, pkcs1 := setupPaste(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalECPrivateKey(ec)
	ecPKCS8, _ := x509.MarshalPKCS8PrivateKey(ec)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	edPKCS8, _ := x509.MarshalPKCS8PrivateKey(ed)
	wrapped, _ := json.Marshal(map[string]string{"private_key": pkcs1})
	escaped, _ := json.Marshal(pkcs1) // "-----BEGIN …-----\n…": a .env or JSON value, quotes and all
	lines := strings.Split(pkcs1, "\n")
	const inQuotes = "the key is wrapped in quotes"
	tests := []struct {
		name, in, want string
	}{
		{name: "empty", in: " \n", want: "empty"},
		{name: "the template's placeholder", in: "REPLACE-WITH-THE-GITHUB-APP-PRIVATE-KEY-PEM", want: "not PEM"},
		{name: "JSON around the PEM", in: string(wrapped), want: "a JSON document, not a PEM"},
		{name: "in double quotes, one line with \\n escapes", in: string(escaped), want: inQuotes},
		{name: "in double quotes, a .env line", in: "GITHUB_APP_PRIVATE_KEY=" + string(escaped) + "\n", want: inQuotes},
		{name: "in double quotes, lines as downloaded", in: `"` + strings.TrimSpace(pkcs1) + `"`, want: inQuotes},
		{name: "in single quotes, lines as downloaded", in: "'" + pkcs1 + "'\n", want: inQuotes},
		{name: "an opening quote only", in: `"` + pkcs1, want: inQuotes},
		{name: "the .pem's path", in: "/home/me/ghclaim-app.2026-12-01.private-key.pem", want: "a file path, not the key"},
		{name: "a relative path", in: "ghclaim.private-key.pem", want: "a file path, not the key"},
		{name: "a public key", in: publicPEM(t, &key.PublicKey), want: "a public key, not a private key"},
		{name: "a PKCS#1 public key", in: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)})), want: "a public key, not a private key"},
		{name: "an SSH public key", in: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk3oV9Q me@laptop", want: "an SSH public key"},
		{name: "an OpenSSH private key", in: string(pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: []byte("openssh-key-v1\x00")})), want: "an OpenSSH key"},
		{name: "a certificate", in: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30}})), want: "a certificate, not a private key"},
		{name: "an EC key (SEC 1)", in: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER})), want: "an EC private key"},
		{name: "an EC key (PKCS#8)", in: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecPKCS8})), want: "an EC private key"},
		{name: "an Ed25519 key", in: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: edPKCS8})), want: "an Ed25519 private key"},
		{name: "an encrypted PKCS#8 key", in: string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{0x30}})), want: "an encrypted private key"},
		{name: "an encrypted PKCS#1 key", in: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{0x30}})), want: "an encrypted private key"},
		{name: "cut short (no END line)", in: strings.Join(lines[:len(lines)/2], "\n"), want: "without its matching END line"},
		{name: "two private keys", in: pkcs1 + pkcs1, want: "2 private keys"},
		{name: "damaged base64 inside", in: strings.Replace(pkcs1, lines[3], strings.Repeat("A", len(lines[3])), 1), want: "neither a PKCS#1 nor a PKCS#8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseKey([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error %q has the PEM armour's words, which the secret scanner takes for a leaked key", err)
			}
			for _, l := range strings.Split(tt.in, "\n") {
				if l = strings.TrimSpace(l); len(l) >= 8 && strings.Contains(err.Error(), l) {
					t.Errorf("error %q quotes the input's line %q", err, l)
				}
			}
		})
	}
}

func publicPEM(t *testing.T, pub *rsa.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}
