// Package ec2api is ghclaim's client of the Amazon EC2 API: the calls the
// functions make (CreateFleet, DescribeInstances, TerminateInstances) and
// the operator CLI's DescribeLaunchTemplates, over EC2's Query protocol
// (a form-encoded POST, an XML answer).
//
// Decision: not the AWS SDK's EC2 client. Its package holds every one of
// EC2's ~750 operations and compiles for about 110 CPU-seconds on one
// core, a third of all the compiling `make test` does from an empty build
// cache, and on the critical path of every package that launches a
// machine; ghclaim uses four of them. shared/awsrpc sends the requests as
// the SDK would (credentials, SigV4, the retryer, the HTTP client, the
// endpoint rules, the error chain), with EC2's error document read by the
// SDK's own aws/protocol/ec2query. The request keys and the response
// elements are those of EC2's published model (botocore's service-2.json,
// which the SDK is generated from as well); model_test.go checks every one
// of them against it, and the adapters' tests run against moto's EC2.
//
// It never logs, and its errors carry no credential and no request body.
package ec2api

import (
	"bytes"
	"context"
	"encoding/xml"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/ec2query"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
)

// APIVersion is the EC2 API version every request names.
const APIVersion = "2016-11-15"

// ServiceID names EC2 in errors, as the SDK does.
const ServiceID = "EC2"

// Service is EC2 to shared/awsrpc: its names, and its error document.
var Service = awsrpc.Service{
	ID: ServiceID, SigningName: "ec2", EndpointPrefix: "ec2",
	ContentType: "application/x-www-form-urlencoded",
	// As the SDK's EC2 client reads it: an empty body has no code
	// (UnknownError); one that is not XML is no error document.
	Error: func(_ http.Header, body []byte) (code, message, requestID string, err error) {
		comp, err := ec2query.GetErrorResponseComponents(bytes.NewReader(body))
		if err != nil {
			return "", "", "", err
		}
		return comp.Code, comp.Message, comp.RequestID, nil
	},
}

// Client calls EC2. It is safe for concurrent use.
type Client struct{ rpc *awsrpc.Client }

// Options are New's optional settings (the clock, the sleep between
// attempts, the HTTP client).
type Options = awsrpc.Options

// New returns a client for cfg's region, credentials, endpoint, HTTP
// client and retryer.
func New(cfg aws.Config, opts ...func(*Options)) *Client {
	return &Client{rpc: awsrpc.New(Service, cfg, opts...)}
}

// Region is the client's region: the one its instances live in.
func (c *Client) Region() string { return c.rpc.Region() }

// Call sends action with params (Query protocol keys, lists already
// numbered: "InstanceId.1") and decodes the answer's XML into out (nil
// discards it). Retries and errors are shared/awsrpc's: the SDK's chain,
// *smithy.OperationError around an *awshttp.ResponseError around a
// smithy.APIError carrying EC2's code.
func (c *Client) Call(ctx context.Context, action string, params url.Values, out any) error {
	form := url.Values{}
	for k, v := range params {
		form[k] = v
	}
	form.Set("Action", action)
	form.Set("Version", APIVersion)
	var decode func(int, []byte) error
	if out != nil {
		decode = func(_ int, data []byte) error { return xml.Unmarshal(data, out) }
	}
	return c.rpc.Call(ctx, action, nil, []byte(form.Encode()), decode)
}

// Endpoint returns the EC2 endpoint cfg resolves to, as the SDK's EC2
// client would resolve it, without a trailing slash. With no region and
// no configured endpoint it returns "" (a call then asks for AWS_REGION).
func Endpoint(cfg aws.Config) (string, error) { return Service.Endpoint(cfg) }
