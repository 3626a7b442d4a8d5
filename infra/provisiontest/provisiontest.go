// Package provisiontest makes the AWS APIs behind shared/provision as strict
// in tests as they are in the field, where the emulator (moto) is kinder.
//
// SSM: a parameter in the Standard tier holds at most 4,096 characters; AWS
// answers a longer value with HTTP 400 ValidationException, and a claim
// whose JIT config (over 4 KB at GitHub) is refused that way fails for good.
// moto stores any length in any tier, so a test of the EC2 path against moto
// alone cannot see it. StrictSSM wraps the SSM client's HTTP transport
// (shared/ssmapi's) and answers an oversized PutParameter the way AWS
// does, so the client's own error reading builds the error the claimer
// would classify;
// CheckPutParameter gives the same answer as a Go error to in-memory
// doubles. One rule feeds both, and the package's contract test runs them
// side by side.
//
// It must never be wired into a function's binary: it exists for tests and
// the local chaos run only.
package provisiontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// SSM's parameter value limits by tier, in characters.
const (
	StandardValueLimit = 4096
	AdvancedValueLimit = 8192
)

// requestID is what the stand-in answers in x-amzn-RequestId.
const requestID = "00000000-0000-4000-8000-provisiontst"

// rejectPut returns AWS's ValidationException message for a PutParameter
// of value in tier, or "" when AWS accepts it. An empty tier is the
// account's default tier, Standard unless changed (ghclaim never changes
// it); Intelligent-Tiering takes the Advanced tier for a value over 4 KB.
// The Standard message is AWS's own; the others follow AWS's shape.
func rejectPut(tier string, value string) string {
	n := utf8.RuneCountInString(value)
	switch tier {
	case "", ssmapi.TierStandard:
		if n > StandardValueLimit {
			return "Standard tier parameters support a maximum parameter value of 4096 characters. " +
				"To create a larger parameter value, upgrade the parameter to use the advanced-parameter tier. " +
				"For more information, see https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html"
		}
	case ssmapi.TierAdvanced, ssmapi.TierIntelligentTiering:
		if n > AdvancedValueLimit {
			return "Advanced tier parameters support a maximum parameter value of 8192 characters."
		}
	default:
		return fmt.Sprintf("1 validation error detected: Value '%s' at 'tier' failed to satisfy constraint: "+
			"Member must satisfy enum value set: [Standard, Advanced, Intelligent-Tiering]", tier)
	}
	return ""
}

// CheckPutParameter returns the error AWS answers in with when its value
// does not fit its tier, shaped as the SDK returns it (operation error →
// HTTP 400 response error → ValidationException), or nil when AWS accepts it.
func CheckPutParameter(in *ssmapi.PutParameterInput) error {
	msg := rejectPut(in.Tier, in.Value)
	if msg == "" {
		return nil
	}
	return ClientError("SSM", "PutParameter", "ValidationException", msg)
}

// ClientError is an AWS client error (HTTP 400) with code and message, in
// the chain the SDK returns: *smithy.OperationError → *awshttp.ResponseError
// (with its HTTP status) → smithy.APIError. In-memory doubles answer with it.
func ClientError(serviceID, operation, code, message string) error {
	h := http.Header{}
	h.Set("X-Amzn-Requestid", requestID)
	return &smithy.OperationError{
		ServiceID: serviceID, OperationName: operation,
		Err: &awshttp.ResponseError{
			RequestID: requestID,
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusBadRequest, Header: h}},
				Err:      &smithy.GenericAPIError{Code: code, Message: message, Fault: smithy.FaultClient},
			},
		},
	}
}

// StrictSSM is an ssmapi.Options function that enforces SSM's value limits
// in front of the emulator: ssmapi.New(cfg, provisiontest.StrictSSM).
func StrictSSM(o *ssmapi.Options) {
	next := o.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	o.HTTPClient = strictSSM{next: next}
}

// strictSSM answers an oversized PutParameter itself, with AWS's HTTP 400
// JSON error, and passes every other request on unchanged.
type strictSSM struct{ next aws.HTTPClient }

func (s strictSSM) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") != "AmazonSSM.PutParameter" || req.Body == nil {
		return s.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	var in struct {
		Value string
		Tier  string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return s.next.Do(req) // let the emulator answer what it cannot read
	}
	msg := rejectPut(in.Tier, in.Value)
	if msg == "" {
		return s.next.Do(req)
	}
	out, _ := json.Marshal(map[string]string{"__type": "ValidationException", "message": msg})
	return &http.Response{
		Status: "400 Bad Request", StatusCode: http.StatusBadRequest,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":     {"application/x-amz-json-1.1"},
			"Content-Length":   {strconv.Itoa(len(out))},
			"X-Amzn-Requestid": {requestID},
		},
		Body: io.NopCloser(strings.NewReader(string(out))), ContentLength: int64(len(out)),
		Request: req,
	}, nil
}
