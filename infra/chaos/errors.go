package chaos

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrUnrecognised is the cause of an Unknown fault: an error no classifier
// knows, which must still be retried.
var ErrUnrecognised = errors.New("chaos: unrecognised failure")

// service names the AWS service behind a target, as the SDK's operation
// errors do.
func service(t Target) string {
	switch t {
	case TargetDynamoDB:
		return "DynamoDB"
	case TargetSQS:
		return "SQS"
	case TargetProvision:
		return "EC2"
	}
	return string(t)
}

// apiError is the service's own error for a kind, with the HTTP status it
// comes with.
func apiError(t Target, k Kind) (error, int) {
	switch t {
	case TargetDynamoDB:
		switch k {
		case Throttle:
			return &ddbtypes.ProvisionedThroughputExceededException{Message: aws.String("The level of configured provisioned throughput for the table was exceeded.")}, http.StatusBadRequest
		case Server:
			return &ddbtypes.InternalServerError{Message: aws.String("Internal server error")}, http.StatusInternalServerError
		case Fatal:
			return &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User is not authorized to perform: dynamodb:UpdateItem", Fault: smithy.FaultClient}, http.StatusBadRequest
		}
	case TargetSQS:
		switch k {
		case Throttle:
			return &smithy.GenericAPIError{Code: "RequestThrottled", Message: "Request is throttled.", Fault: smithy.FaultClient}, http.StatusBadRequest
		case Server:
			return &smithy.GenericAPIError{Code: "InternalFailure", Message: "The request processing has failed because of an unknown error.", Fault: smithy.FaultServer}, http.StatusInternalServerError
		case Fatal:
			return &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access to the resource is denied.", Fault: smithy.FaultClient}, http.StatusForbidden
		}
	case TargetProvision:
		switch k {
		case Throttle:
			return &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", Fault: smithy.FaultClient}, http.StatusServiceUnavailable
		case Server:
			return &smithy.GenericAPIError{Code: "InsufficientInstanceCapacity", Message: "We currently do not have sufficient capacity in the Availability Zone you requested.", Fault: smithy.FaultServer}, http.StatusInternalServerError
		case Fatal:
			return &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation.", Fault: smithy.FaultClient}, http.StatusForbidden
		}
	}
	return &smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}, http.StatusInternalServerError
}

// errorFor builds the error a caller of op on t sees for a fault of kind k,
// wrapped the way the AWS SDK wraps it (operation error → response error →
// API error, or operation error → request send error → net error).
func errorFor(t Target, k Kind, op string) error {
	wrap := func(err error) error {
		return &smithy.OperationError{ServiceID: service(t), OperationName: op, Err: err}
	}
	switch k {
	case Network:
		return wrap(&smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Net: "tcp",
			Err: os.NewSyscallError("read", syscall.ECONNRESET)}})
	case AfterEffect:
		// The answer never came back in time; the call had already taken effect.
		return wrap(&smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}})
	case Unknown:
		return wrap(fmt.Errorf("decode response: %w", ErrUnrecognised))
	}
	api, status := apiError(t, k)
	return wrap(&awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
			Err:      api,
		},
		RequestID: "chaos-injected",
	})
}
