package awsrpc_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
)

func TestPartition(t *testing.T) {
	t.Parallel()
	for region, want := range map[string]string{
		"us-east-1": "aws", "eu-central-2": "aws", "cn-north-1": "aws-cn", "cn-northwest-1": "aws-cn",
		"us-gov-west-1": "aws-us-gov", "us-iso-east-1": "aws-iso", "us-isob-east-1": "aws-iso-b",
		"eu-isoe-west-1": "aws-iso-e", "us-isof-south-1": "aws-iso-f", "eusc-de-east-1": "aws-eusc",
	} {
		if got := awsrpc.Partition(region); got != want {
			t.Errorf("Partition(%q): got %q, want %q", region, got, want)
		}
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	api := &smithy.GenericAPIError{Code: "ParameterNotFound", Message: "not found"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "wrapped API error", err: fmt.Errorf("delete: %w", &smithy.OperationError{ServiceID: "SSM", OperationName: "DeleteParameter", Err: api}), want: "ParameterNotFound"},
		{name: "no API error", err: errors.New("connection reset"), want: ""},
		{name: "nil", err: nil, want: ""},
	}
	for _, tt := range tests {
		if got := awsrpc.Code(tt.err); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
