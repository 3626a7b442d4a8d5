package provisiontest

import (
	"context"

	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// Parameters is the SSM a test's setup puts parameters with.
type Parameters interface {
	PutParameter(ctx context.Context, in *ssmapi.PutParameterInput) (*ssmapi.PutParameterOutput, error)
	GetParameter(ctx context.Context, in *ssmapi.GetParameterInput) (*ssmapi.GetParameterOutput, error)
}

// PutParameter creates the parameter in (a name of the test's own) for a test's setup, once.
// The client retries a put whose answer was lost (see emulator.SQSOnce),
// and the retry of a put without Overwrite (tags and Overwrite do not go together) finds what
// its first try stored: ParameterAlreadyExists. A parameter at version 1 with in's value is
// taken for that first try's; any other stays the error.
func PutParameter(ctx context.Context, api Parameters, in *ssmapi.PutParameterInput) error {
	_, err := api.PutParameter(ctx, in)
	if !ssmapi.IsCode(err, ssmapi.CodeParameterAlreadyExists) {
		return err
	}
	got, gerr := api.GetParameter(ctx, &ssmapi.GetParameterInput{Name: in.Name, WithDecryption: true})
	if gerr != nil || got.Parameter.Version != 1 || got.Parameter.Value != in.Value {
		return err
	}
	return nil
}
