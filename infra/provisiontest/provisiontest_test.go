package provisiontest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
)

// TestSSMValueLimits is the contract of both stand-ins: the transport in
// front of moto (through the real SDK client) and the in-memory check
// accept and refuse the same puts, with the same code, status and message.
func TestSSMValueLimits(t *testing.T) {
	t.Parallel()
	client := ssm.NewFromConfig(emulator.ForTest(t).ConfigForTest(t), provisiontest.StrictSSM)
	tests := []struct {
		name   string
		tier   ssmtypes.ParameterTier
		length int
		want   string // "" when AWS accepts; else a part of its message
	}{
		{name: "standard at its limit", tier: ssmtypes.ParameterTierStandard, length: 4096},
		{name: "standard over its limit", tier: ssmtypes.ParameterTierStandard, length: 4097, want: "Standard tier parameters support a maximum parameter value of 4096 characters"},
		{name: "default tier is standard", length: 4300, want: "maximum parameter value of 4096 characters"},
		{name: "advanced holds a jit config", tier: ssmtypes.ParameterTierAdvanced, length: 4300},
		{name: "advanced at its limit", tier: ssmtypes.ParameterTierAdvanced, length: 8192},
		{name: "advanced over its limit", tier: ssmtypes.ParameterTierAdvanced, length: 8193, want: "8192 characters"},
		{name: "intelligent tiering takes advanced", tier: ssmtypes.ParameterTierIntelligentTiering, length: 4300},
		{name: "intelligent tiering over advanced", tier: ssmtypes.ParameterTierIntelligentTiering, length: 8193, want: "8192 characters"},
		{name: "unknown tier", tier: "Premium", length: 10, want: "at 'tier' failed to satisfy constraint"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := &ssm.PutParameterInput{
				Name:  aws.String(fmt.Sprintf("/provisiontest/limits-%d", i)),
				Value: aws.String(strings.Repeat("x", tt.length)),
				Type:  ssmtypes.ParameterTypeSecureString, Tier: tt.tier, Overwrite: aws.Bool(true),
			}
			_, wire := client.PutParameter(context.Background(), in)
			local := provisiontest.CheckPutParameter(in)
			for _, got := range []struct {
				name string
				err  error
			}{{"moto through StrictSSM", wire}, {"CheckPutParameter", local}} {
				if tt.want == "" {
					if got.err != nil {
						t.Errorf("%s: got %v, want the put accepted", got.name, got.err)
					}
					continue
				}
				var api smithy.APIError
				var status interface{ HTTPStatusCode() int }
				switch {
				case !errors.As(got.err, &api) || api.ErrorCode() != "ValidationException":
					t.Errorf("%s: got %v, want a ValidationException", got.name, got.err)
				case !strings.Contains(api.ErrorMessage(), tt.want):
					t.Errorf("%s: message %q, want it to say %q", got.name, api.ErrorMessage(), tt.want)
				case !errors.As(got.err, &status) || status.HTTPStatusCode() != 400:
					t.Errorf("%s: got %v, want HTTP 400", got.name, got.err)
				}
			}
			if tt.want != "" && wire != nil && local != nil {
				var a, b smithy.APIError
				if errors.As(wire, &a) && errors.As(local, &b) && a.ErrorMessage() != b.ErrorMessage() {
					t.Errorf("messages differ:\nwire  %q\nlocal %q", a.ErrorMessage(), b.ErrorMessage())
				}
			}
			if tt.want != "" && wire != nil {
				// Refused means nothing stored, as on AWS.
				if _, err := client.GetParameter(context.Background(), &ssm.GetParameterInput{Name: in.Name}); err == nil {
					t.Errorf("parameter %s exists after a refused put", aws.ToString(in.Name))
				}
			}
		})
	}
}
