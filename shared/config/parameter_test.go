package config

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// fakeSSM holds parameters by name; reading one without decryption is refused, as a
// SecureString read that way would hand back ciphertext.
type fakeSSM struct {
	values map[string]string
	calls  int
}

func (f *fakeSSM) GetParameter(_ context.Context, in *ssmapi.GetParameterInput) (*ssmapi.GetParameterOutput, error) {
	f.calls++
	if !in.WithDecryption {
		return nil, errors.New("read without decryption")
	}
	v, ok := f.values[in.Name]
	if !ok {
		// moto's words; AWS's AccessDeniedException quotes the name too.
		return nil, provisiontest.ClientError("SSM", "GetParameter", ssmapi.CodeParameterNotFound, "Parameter "+in.Name+" not found.")
	}
	return &ssmapi.GetParameterOutput{Parameter: &ssmapi.Parameter{Name: in.Name, Value: v}}, nil
}

const twoPools = `[{"name":"a","labels":["self-hosted","a"],"provisioner":{"type":"ec2","launch_template":"lt-1"}},` +
	`{"name":"b","labels":["self-hosted","b"],"provisioner":{"type":"ec2","launch_template":"lt-2"}}]`

func TestPoolsFromParameter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		parameter string
		stored    map[string]string
		wantPools int
		wantCalls int
		wantErr   string // the error names this
		wantVar   string
	}{
		{name: "unset: the environment's pools, no SSM call", wantPools: 1},
		{name: "the parameter wins over the environment", parameter: "/ghclaim/pools", stored: map[string]string{"/ghclaim/pools": twoPools}, wantPools: 2, wantCalls: 1},
		{name: "missing parameter", parameter: "/ghclaim/nope", stored: map[string]string{}, wantCalls: 1, wantErr: "/ghclaim/nope", wantVar: PoolsParameterVar},
		{name: "blank parameter", parameter: "/ghclaim/blank", stored: map[string]string{"/ghclaim/blank": "  "}, wantCalls: 1, wantErr: "/ghclaim/blank", wantVar: PoolsParameterVar},
		{name: "bad pools in the parameter", parameter: "/ghclaim/bad", stored: map[string]string{"/ghclaim/bad": `[]`}, wantCalls: 1, wantErr: "/ghclaim/bad", wantVar: "RUNNER_POOLS (SSM parameter /ghclaim/bad)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			m[PoolsParameterVar] = tt.parameter
			fake := &fakeSSM{values: tt.stored}
			get, err := WithPoolsParameter(context.Background(), fake, env(m))
			var c Claimer
			if err == nil {
				c, err = LoadClaimer(get)
			}
			if fake.calls != tt.wantCalls {
				t.Errorf("got %d SSM calls, want %d", fake.calls, tt.wantCalls)
			}
			if tt.wantErr == "" {
				if err != nil || len(c.Pools) != tt.wantPools {
					t.Fatalf("got %d pools, %v, want %d pools", len(c.Pools), err, tt.wantPools)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Var != tt.wantVar || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one on %s naming %s", err, tt.wantVar, tt.wantErr)
			}
		})
	}
}

// TestPoolsParameterNameIsNotQuotedRaw: a secret pasted into
// RUNNER_POOLS_PARAMETER (the wrong variable, as the start-up tests paste
// one into LOG_LEVEL) is not quoted by the start-up error, which
// wire.Process prints on stderr: neither by the text naming the
// parameter, nor by SSM's error quoting the name, nor by the error of the
// pools the parameter holds. A leading "/" passes the template's pattern.
func TestPoolsParameterNameIsNotQuotedRaw(t *testing.T) {
	t.Parallel()
	const hookHex = "5ec5ca9e0f1b2c3d4e5f60718293a4b5c6d7e8f9" // a webhook secret as GitHub generates them
	for _, v := range []string{hookHex, "/" + hookHex} {
		m := base()
		m[PoolsParameterVar] = v
		_, err := WithPoolsParameter(context.Background(), &fakeSSM{values: map[string]string{}}, env(m))
		if err == nil || strings.Contains(err.Error(), hookHex) || !ssmapi.IsCode(err, ssmapi.CodeParameterNotFound) {
			t.Errorf("parameter %q not found: %v; want SSM's error, the name masked", v, err)
		}
		get, err := WithPoolsParameter(context.Background(), &fakeSSM{values: map[string]string{v: "[]"}}, env(m))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := LoadClaimer(get); err == nil || strings.Contains(err.Error(), hookHex) || !strings.Contains(err.Error(), "RUNNER_POOLS (SSM parameter") {
			t.Errorf("parameter %q holding no pools: %v; want the pools error, the name masked", v, err)
		}
	}
	m := base()
	m[PoolsParameterVar] = "/ghclaim/prod/pools"
	_, err := WithPoolsParameter(context.Background(), &fakeSSM{values: map[string]string{}}, env(m))
	if err == nil || !strings.Contains(err.Error(), "SSM parameter /ghclaim/prod/pools: ") ||
		!strings.Contains(err.Error(), "ParameterNotFound: Parameter /ghclaim/prod/pools not found") {
		t.Errorf("a parameter name: %v, want it named as it is", err)
	}
}
