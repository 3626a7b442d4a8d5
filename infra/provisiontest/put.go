package provisiontest

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// Parameters is the SSM a test's setup puts parameters with.
type Parameters interface {
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// PutParameter creates the parameter in (a name of the test's own) for a test's setup, once.
// The SDK retries a put whose answer was lost (see emulator.SQSOnce),
// and the retry of a put without Overwrite (tags and Overwrite do not go together) finds what
// its first try stored: ParameterAlreadyExists. A parameter at version 1 with in's value is
// taken for that first try's; any other stays the error.
func PutParameter(ctx context.Context, api Parameters, in *ssm.PutParameterInput) error {
	_, err := api.PutParameter(ctx, in)
	var exists *ssmtypes.ParameterAlreadyExists
	if !errors.As(err, &exists) {
		return err
	}
	got, gerr := api.GetParameter(ctx, &ssm.GetParameterInput{Name: in.Name, WithDecryption: aws.Bool(true)})
	if gerr != nil || got.Parameter.Version != 1 || aws.ToString(got.Parameter.Value) != aws.ToString(in.Value) {
		return err
	}
	return nil
}
