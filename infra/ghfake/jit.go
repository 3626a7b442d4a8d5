package ghfake

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"sync"
)

// jitKeyBits is the size of the runner key in a JIT config: GitHub's
// runners hold a 2048-bit RSA key, and its parameters are most of the
// config's size.
const jitKeyBits = 2048

// encodeJIT builds a config shaped and sized like GitHub's encoded_jit_config:
// base64 of a JSON object whose values are the base64 of the runner's
// files .runner, .credentials and .credentials_rsaparams (the full private
// key's parameters, as the runner stores them). A real one is about
// 4.1–4.3 KB, over SSM's 4,096-character Standard tier, and code that stores
// or sends it must be tested with that size, not with a short stand-in.
//
// GitHub generates a key per runner. The fake generates one per process, on
// the first config any Server hands out, and reuses it for every runner of
// every Server: a 2048-bit key costs ~0.2 s of CPU, one per Server cost a
// test package seconds (most of shared/claim's own CPU), and only the size
// and the shape matter here.
func (s *Server) encodeJIT(rn *Runner) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.StdEncoding.EncodeToString(b)
	}
	// A stable per-runner id stands in for the service's tenant and client ids.
	tenant := fmt.Sprintf("%054d", rn.ID)
	client := fmt.Sprintf("%08x-0000-4000-8000-%012x", rn.Installation, rn.ID)
	server := "https://pipelinesghubeus22.actions.githubusercontent.com/" + tenant + "/"
	token := "https://vstoken.actions.githubusercontent.com/_apis/oauth2/token/" + client
	gitHubURL := "https://github.com/" + rn.Owner
	if rn.Repo != "" {
		gitHubURL += "/" + rn.Repo
	}
	return enc(map[string]string{
		".runner": enc(map[string]string{
			"AgentId": strconv.FormatInt(rn.ID, 10), "AgentName": rn.Name,
			"DisableUpdate": "True", "Ephemeral": "True",
			"PoolId": strconv.FormatInt(rn.RunnerGroupID, 10), "PoolName": "Default",
			"ServerUrl": server, "GitHubUrl": gitHubURL, "WorkFolder": rn.WorkFolder,
			"UseV2Flow": "True", "ServerUrlV2": "https://broker.actions.githubusercontent.com/",
		}),
		".credentials": enc(map[string]any{
			"Scheme": "OAuth",
			"Data": map[string]string{
				"ClientId":                client,
				"AuthorizationUrl":        token,
				"OAuthEndpointUrl":        token,
				"RequireFipsCryptography": "True",
			},
		}),
		".credentials_rsaparams": enc(rsaParams(runnerKey())),
	})
}

// runnerKey is the runner key of every JIT config, generated once.
var runnerKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, jitKeyBits)
	if err != nil {
		panic(fmt.Sprintf("ghfake: generate the runner key: %v", err)) // crypto/rand does not fail
	}
	return k
})

// rsaParams is the runner's RSAParametersSerializable: every parameter as
// the base64 of its big-endian bytes, at the fixed widths .NET exports
// (the modulus' for d, half of it for the primes and CRT values), so every
// config has the same size.
func rsaParams(k *rsa.PrivateKey) map[string]string {
	full := (k.N.BitLen() + 7) / 8
	b64 := func(n *big.Int, width int) string {
		return base64.StdEncoding.EncodeToString(n.FillBytes(make([]byte, width)))
	}
	return map[string]string{
		"d": b64(k.D, full), "dp": b64(k.Precomputed.Dp, full/2), "dq": b64(k.Precomputed.Dq, full/2),
		"exponent": base64.StdEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
		"inverseQ": b64(k.Precomputed.Qinv, full/2),
		"modulus":  b64(k.N, full), "p": b64(k.Primes[0], full/2), "q": b64(k.Primes[1], full/2),
	}
}
