package ghapp

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// parseKey reads the App's RSA private key as an operator may have stored
// it, and never echoes the input: an error says what the input is (a
// public key, a file path, JSON…), never a byte of it, nor the PEM
// armour's upper-case words, which the secret scanner (infra/secretscan)
// takes for a leaked key.
//
// Accepted, because each can mean only one thing: PKCS#1 ("BEGIN RSA
// PRIVATE KEY", what GitHub hands out) or PKCS#8 ("BEGIN PRIVATE KEY",
// after openssl pkcs8); a byte order mark; CRLF or CR line endings;
// spaces around the whole or around each line (a paste, a YAML block);
// and a PEM flattened to one line with literal \n escapes (a JSON or .env
// file's value): base64 and the PEM armour never hold a backslash, so the
// escapes can only be line breaks. Other text around the PEM block is
// ignored, as encoding/pem does (openssl's "Bag Attributes" lines), except
// a JSON document, which is refused: which of its fields is the key is a
// guess, and the secret is documented as the PEM itself. A PEM still in
// the quotes of the .env or JSON value it was copied from is refused too,
// with an error that says so (README: "without its quotes"): the PEM
// armour's dashes are where pem.Decode looks, and a quote before or after
// them hid the block, so the error was "not PEM".
func parseKey(b []byte) (*rsa.PrivateKey, error) {
	s := strings.TrimSpace(strings.TrimPrefix(string(b), "\ufeff"))
	switch {
	case s == "":
		return nil, errors.New("empty")
	case strings.HasPrefix(s, "{"):
		return nil, errors.New(`a JSON document, not a PEM: store the .pem file's content itself (--secret-string file://app.pem), not {"key": "…"}`)
	case quoted(s):
		return nil, errors.New("the key is wrapped in quotes (a .env or JSON value's): store it without them")
	case strings.HasPrefix(s, "-----BEGIN ") && !strings.ContainsAny(s, "\r\n") && strings.Contains(s, `\n`):
		s = strings.ReplaceAll(strings.ReplaceAll(s, `\r\n`, "\n"), `\n`, "\n")
	}
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	rest := []byte(strings.Join(lines, "\n") + "\n")

	var first *pem.Block
	var keys []*pem.Block
	for {
		block, r := pem.Decode(rest)
		if block == nil {
			break
		}
		if first == nil {
			first = block
		}
		switch block.Type {
		case "RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY":
			keys = append(keys, block)
		}
		rest = r
	}
	switch {
	case first == nil:
		return nil, notPEM(s)
	case len(keys) == 0:
		return nil, notPrivate(first.Type)
	case len(keys) > 1:
		return nil, fmt.Errorf("%d private keys in one PEM: store only the GitHub App's", len(keys))
	}
	block := keys[0]
	if strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, errors.New("an encrypted private key: store it decrypted (openssl rsa -in KEY -out app.pem)")
	}
	if block.Type == "EC PRIVATE KEY" {
		return nil, errors.New("an EC private key: a GitHub App's key is RSA")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("a private key block that is neither a PKCS#1 nor a PKCS#8 RSA private key (damaged or cut short?)")
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return nil, errors.New("an EC private key: a GitHub App's key is RSA")
	case ed25519.PrivateKey:
		return nil, errors.New("an Ed25519 private key: a GitHub App's key is RSA")
	default:
		return nil, errors.New("a private key that is not RSA: a GitHub App's key is RSA")
	}
}

// quoted reports whether s, trimmed, is a PEM block with a quote (" or ')
// before its first line or after its last, as a .env or JSON value holds
// it. Base64 and the PEM armour never hold a quote.
func quoted(s string) bool {
	isQuote := func(c byte) bool { return c == '"' || c == '\'' }
	opens := isQuote(s[0]) && strings.HasPrefix(strings.TrimSpace(s[1:]), "-----BEGIN ")
	// Before a closing quote: the armour's dashes, perhaps with a
	// trailing line break, literal (\n) or not.
	last := strings.TrimRight(s[:len(s)-1], " \t\r\n\\rn")
	closes := isQuote(s[len(s)-1]) && strings.Contains(s, "-----BEGIN ") && strings.HasSuffix(last, "-----")
	return opens || closes
}

// notPEM says what s, holding no PEM block, looks like.
func notPEM(s string) error {
	switch {
	case strings.HasPrefix(s, "ssh-") || strings.HasPrefix(s, "ecdsa-sha2-"):
		return errors.New("an SSH public key, not a PEM private key: store the private key the GitHub App's settings downloaded (.pem)")
	case !strings.ContainsAny(s, " \t\r\n") && (strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") ||
		strings.HasPrefix(s, "./") || strings.HasPrefix(s, "file://") || strings.HasSuffix(s, ".pem")):
		return errors.New("a file path, not the key: store the file's content (--secret-string file://PATH)")
	case strings.Contains(s, "-----BEGIN "):
		return errors.New("not PEM: a PEM header line without its matching END line, or its base64 damaged")
	}
	return errors.New("not PEM (no private key block)")
}

// notPrivate says why a PEM block of type typ is not the App's key. Only
// types named here are quoted; any other is not (the header is input).
func notPrivate(typ string) error {
	switch typ {
	case "PUBLIC KEY", "RSA PUBLIC KEY":
		return errors.New("a public key, not a private key: store the private key the GitHub App's settings downloaded (.pem)")
	case "OPENSSH PRIVATE KEY":
		return errors.New("an OpenSSH key (ssh-keygen), not a GitHub App's private key: generate one in the App's settings")
	case "ENCRYPTED PRIVATE KEY":
		return errors.New("an encrypted private key: store it decrypted (openssl pkey -in KEY -out app.pem)")
	case "CERTIFICATE":
		return errors.New("a certificate, not a private key")
	}
	return errors.New("a PEM block that is not a private key")
}
