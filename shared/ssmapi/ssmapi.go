// Package ssmapi is ghclaim's client of AWS Systems Manager Parameter
// Store: the five calls the functions make (GetParameter for
// RUNNER_POOLS_PARAMETER; PutParameter and DeleteParameter for the JIT
// configs; DescribeParameters and ListTagsForResource for the janitor's
// listing of leftovers) over SSM's JSON 1.1 protocol.
//
// Decision: not the AWS SDK's SSM client. Its package holds SSM's ~150
// operations and builds the schemas of all of them in its initialiser,
// at every cold start of every function (every function can read its
// pools from a parameter): 5–6 ms per start on a 2-CPU AMD EPYC VM, a
// third of a function's package initialisation, and about 1 MB of each
// bootstrap. shared/awsrpc sends the requests as the SDK would
// (credentials, SigV4, the retryer, the HTTP client, the endpoint rules,
// the error chain, and awsJson's errors as the SDK's awsjson protocol
// reads them). The members sent and read are those of
// SSM's published model (botocore's service-2.json, which the SDK is
// generated from as well); model_test.go checks every one against it, and
// the adapters' tests run against moto's SSM.
//
// Errors are checked by code (awsrpc.Code, or IsCode), not by the SDK's
// typed errors: the code is what SSM sends.
//
// It never logs, and its errors carry no credential, no request body and
// no parameter value.
package ssmapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	smithytime "github.com/aws/smithy-go/time"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
)

// ServiceID names SSM in errors, as the SDK does.
const ServiceID = "SSM"

// Error codes ghclaim acts on.
const (
	CodeParameterNotFound      = "ParameterNotFound"
	CodeParameterAlreadyExists = "ParameterAlreadyExists"
	CodeInvalidResourceID      = "InvalidResourceId"
)

// Parameter types, tiers and the tagged resource type ghclaim uses.
const (
	TypeString             = "String"
	TypeSecureString       = "SecureString"
	TierStandard           = "Standard"
	TierAdvanced           = "Advanced"
	TierIntelligentTiering = "Intelligent-Tiering"
	ResourceTypeParameter  = "Parameter"
)

// The awsJson 1.1 request's content type, and its X-Amz-Target's prefix.
const (
	contentType  = "application/x-amz-json-1.1"
	targetPrefix = "AmazonSSM."
)

// Service is SSM to shared/awsrpc: its names, and its awsJson errors.
var Service = awsrpc.Service{
	ID: ServiceID, SigningName: "ssm", EndpointPrefix: "ssm",
	ContentType: contentType, Error: awsrpc.JSONError,
}

// Client calls SSM. It is safe for concurrent use.
type Client struct{ rpc *awsrpc.Client }

// Options are New's optional settings (the clock, the sleep between
// attempts, the HTTP client).
type Options = awsrpc.Options

// New returns a client for cfg's region, credentials, endpoint, HTTP
// client and retryer.
func New(cfg aws.Config, opts ...func(*Options)) *Client {
	return &Client{rpc: awsrpc.New(Service, cfg, opts...)}
}

// IsCode reports whether err carries SSM's error code.
func IsCode(err error, code string) bool { return err != nil && awsrpc.Code(err) == code }

// call sends operation op with in as its JSON body and decodes the answer
// into out.
func (c *Client) call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	header := http.Header{"X-Amz-Target": {targetPrefix + op}}
	return c.rpc.Call(ctx, op, header, body, func(_ int, data []byte) error {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		return json.Unmarshal(data, out)
	})
}

// Tag is a resource tag.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// Timestamp is a time in SSM's JSON: epoch seconds, with a fraction.
type Timestamp struct{ time.Time }

// UnmarshalJSON reads epoch seconds as the SDK does (to the millisecond).
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var sec float64
	if err := json.Unmarshal(b, &sec); err != nil {
		return err
	}
	t.Time = smithytime.ParseEpochSeconds(sec)
	return nil
}

// Parameter is a parameter with its value.
type Parameter struct {
	Name             string    `json:"Name"`
	Type             string    `json:"Type"`
	Value            string    `json:"Value"`
	Version          int64     `json:"Version"`
	LastModifiedDate Timestamp `json:"LastModifiedDate"`
	ARN              string    `json:"ARN"`
	DataType         string    `json:"DataType"`
}

// GetParameterInput names the parameter to read.
type GetParameterInput struct {
	Name           string `json:"Name"`
	WithDecryption bool   `json:"WithDecryption,omitempty"`
}

// GetParameterOutput is GetParameter's answer.
type GetParameterOutput struct {
	Parameter *Parameter `json:"Parameter"`
}

// GetParameter reads a parameter (a SecureString decrypted when
// WithDecryption).
func (c *Client) GetParameter(ctx context.Context, in *GetParameterInput) (*GetParameterOutput, error) {
	out := &GetParameterOutput{}
	return out, c.call(ctx, "GetParameter", in, out)
}

// PutParameterInput is the part of PutParameter ghclaim sends. SSM
// refuses Tags together with Overwrite.
type PutParameterInput struct {
	Name        string `json:"Name"`
	Description string `json:"Description,omitempty"`
	Value       string `json:"Value"`
	Type        string `json:"Type,omitempty"`
	Overwrite   bool   `json:"Overwrite,omitempty"`
	Tags        []Tag  `json:"Tags,omitempty"`
	Tier        string `json:"Tier,omitempty"`
	DataType    string `json:"DataType,omitempty"`
}

// PutParameterOutput is PutParameter's answer.
type PutParameterOutput struct {
	Version int64  `json:"Version"`
	Tier    string `json:"Tier"`
}

// PutParameter writes a parameter.
func (c *Client) PutParameter(ctx context.Context, in *PutParameterInput) (*PutParameterOutput, error) {
	out := &PutParameterOutput{}
	return out, c.call(ctx, "PutParameter", in, out)
}

// DeleteParameterInput names the parameter to delete.
type DeleteParameterInput struct {
	Name string `json:"Name"`
}

// DeleteParameterOutput is DeleteParameter's (empty) answer.
type DeleteParameterOutput struct{}

// DeleteParameter deletes a parameter; one that does not exist is
// CodeParameterNotFound.
func (c *Client) DeleteParameter(ctx context.Context, in *DeleteParameterInput) (*DeleteParameterOutput, error) {
	out := &DeleteParameterOutput{}
	return out, c.call(ctx, "DeleteParameter", in, out)
}

// ParameterStringFilter narrows DescribeParameters: Key ("Path", "Name",
// "tag:…"), Option ("OneLevel", "Recursive", "Equals", "BeginsWith"),
// Values.
type ParameterStringFilter struct {
	Key    string   `json:"Key"`
	Option string   `json:"Option,omitempty"`
	Values []string `json:"Values,omitempty"`
}

// DescribeParametersInput is the part of DescribeParameters ghclaim sends.
type DescribeParametersInput struct {
	ParameterFilters []ParameterStringFilter `json:"ParameterFilters,omitempty"`
	MaxResults       int32                   `json:"MaxResults,omitempty"`
	NextToken        string                  `json:"NextToken,omitempty"`
}

// ParameterMetadata is a parameter as DescribeParameters lists it,
// without its value.
type ParameterMetadata struct {
	Name             string    `json:"Name"`
	ARN              string    `json:"ARN"`
	Type             string    `json:"Type"`
	LastModifiedDate Timestamp `json:"LastModifiedDate"`
	Description      string    `json:"Description"`
	Version          int64     `json:"Version"`
	Tier             string    `json:"Tier"`
	DataType         string    `json:"DataType"`
}

// DescribeParametersOutput is one page of DescribeParameters.
type DescribeParametersOutput struct {
	Parameters []ParameterMetadata `json:"Parameters"`
	NextToken  string              `json:"NextToken"`
}

// DescribeParameters lists parameters, a page at a time: a page may hold
// fewer than MaxResults, even none, with a NextToken.
func (c *Client) DescribeParameters(ctx context.Context, in *DescribeParametersInput) (*DescribeParametersOutput, error) {
	out := &DescribeParametersOutput{}
	return out, c.call(ctx, "DescribeParameters", in, out)
}

// ListTagsForResourceInput names the resource whose tags to list.
type ListTagsForResourceInput struct {
	ResourceType string `json:"ResourceType"`
	ResourceID   string `json:"ResourceId"`
}

// ListTagsForResourceOutput is ListTagsForResource's answer.
type ListTagsForResourceOutput struct {
	TagList []Tag `json:"TagList"`
}

// ListTagsForResource lists a resource's tags; a parameter that does not
// exist is CodeInvalidResourceID.
func (c *Client) ListTagsForResource(ctx context.Context, in *ListTagsForResourceInput) (*ListTagsForResourceOutput, error) {
	out := &ListTagsForResourceOutput{}
	return out, c.call(ctx, "ListTagsForResource", in, out)
}
