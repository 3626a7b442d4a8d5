package ghfake_test

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"
)

// decodeJIT opens an encoded_jit_config the way the runner does: base64 of
// a JSON map of file name → base64 of the file.
func decodeJIT(t *testing.T, encoded string) map[string][]byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatalf("encoded_jit_config is not base64: %v", err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		t.Fatalf("encoded_jit_config is not a JSON map: %v", err)
	}
	out := map[string][]byte{}
	for name, v := range files {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("%s is not base64: %v", name, err)
		}
		out[name] = b
	}
	return out
}

// TestJITConfigIsRealSized: GitHub's encoded_jit_config carries the runner's
// whole 2048-bit RSA key and is over 4 KB, more than SSM's Standard tier
// holds. A stand-in that hands out short configs hid exactly that from every
// test of the EC2 path.
func TestJITConfigIsRealSized(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	var configs []string
	for _, name := range []string{"a", "linux-1234567890"} {
		cfg, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq(name))
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, cfg.GetEncodedJITConfig())
	}
	for i, enc := range configs {
		if n := len(enc); n < 4200 || n > 8192 {
			t.Errorf("config %d: %d characters, want GitHub's 4.2-4.3 KB (over SSM Standard's 4096, under Advanced's 8192)", i, n)
		}
		t.Logf("config %d: %d characters", i, len(enc))
		files := decodeJIT(t, enc)
		var runner struct{ AgentId, AgentName, PoolId, ServerUrl string }
		if err := json.Unmarshal(files[".runner"], &runner); err != nil || runner.AgentId == "" || runner.ServerUrl == "" {
			t.Errorf("config %d: .runner = %s, want AgentId and ServerUrl", i, files[".runner"])
		}
		var creds struct {
			Scheme string
			Data   map[string]string
		}
		if err := json.Unmarshal(files[".credentials"], &creds); err != nil || creds.Scheme != "OAuth" || creds.Data["ClientId"] == "" {
			t.Errorf("config %d: .credentials = %s, want an OAuth client", i, files[".credentials"])
		}
		var params map[string]string
		if err := json.Unmarshal(files[".credentials_rsaparams"], &params); err != nil {
			t.Fatalf("config %d: .credentials_rsaparams: %v", i, err)
		}
		n := func(k string) *big.Int {
			b, err := base64.StdEncoding.DecodeString(params[k])
			if err != nil || len(b) == 0 {
				t.Fatalf("config %d: rsaparams %s = %q, want base64 bytes", i, k, params[k])
			}
			return new(big.Int).SetBytes(b)
		}
		key := &rsa.PrivateKey{
			PublicKey: rsa.PublicKey{N: n("modulus"), E: int(n("exponent").Int64())},
			D:         n("d"), Primes: []*big.Int{n("p"), n("q")},
		}
		if err := key.Validate(); err != nil || key.N.BitLen() != 2048 {
			t.Errorf("config %d: rsaparams hold a %d-bit key (%v), want a valid 2048-bit RSA key", i, key.N.BitLen(), err)
		}
		for _, k := range []string{"dp", "dq", "inverseQ"} {
			n(k)
		}
	}
}

// TestJITKeyIsGeneratedOncePerProcess: every Server's configs carry one
// runner key, generated once per process. A 2048-bit key per Server made
// RSA key generation most of the CPU of a test package that starts a
// stand-in per test (shared/claim: ~4 of the ~5 CPU-seconds its tests
// spent outside the emulator).
func TestJITKeyIsGeneratedOncePerProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var moduli []string
	for range 2 {
		f := setup(t)
		cfg, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq("a"))
		if err != nil {
			t.Fatal(err)
		}
		var params map[string]string
		if err := json.Unmarshal(decodeJIT(t, cfg.GetEncodedJITConfig())[".credentials_rsaparams"], &params); err != nil {
			t.Fatal(err)
		}
		moduli = append(moduli, params["modulus"])
	}
	if moduli[0] == "" || moduli[0] != moduli[1] {
		t.Errorf("two Servers handed out different runner keys: each generated its own")
	}
}
