// Package secretsapi is ghclaim's client of AWS Secrets Manager: the one
// call the functions make, GetSecretValue (the webhook secret and the
// GitHub App's private key), over Secrets Manager's JSON 1.1 protocol.
//
// Decision: not the AWS SDK's Secrets Manager client, for the reason
// shared/ssmapi gives: the SDK's package builds the schemas of all its
// operations and its endpoint tables at every cold start of every
// function (about 1 ms on a 2-CPU AMD EPYC VM) for one call.
// shared/awsrpc sends the request as the SDK would (credentials, SigV4,
// the retryer, the HTTP client, the error chain, awsJson's errors), and
// Regional is Secrets Manager's own endpoint rule, checked against the
// SDK's resolver for every partition. The members sent and read are those
// of the published model (model_test.go), and shared/secret's tests read
// secrets in every state from moto's Secrets Manager through it.
//
// It never logs, and its errors carry no credential and no secret value.
package secretsapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
)

// ServiceID names Secrets Manager in errors, as the SDK does.
const ServiceID = "Secrets Manager"

// Error codes shared/secret acts on.
const (
	CodeResourceNotFound = "ResourceNotFoundException"
	CodeInvalidRequest   = "InvalidRequestException"
)

// Service is Secrets Manager to shared/awsrpc: its names, its awsJson
// errors and its endpoint rule.
var Service = awsrpc.Service{
	ID: ServiceID, SigningName: "secretsmanager", EndpointPrefix: "secretsmanager",
	ContentType: "application/x-amz-json-1.1", Error: awsrpc.JSONError, Regional: Regional,
}

// Regional is Secrets Manager's regional endpoint: the standard names,
// except that its regular names answer dual-stack in the aws and
// aws-us-gov partitions, and in aws-cn unless FIPS is on too; and that
// GovCloud has FIPS names of its own.
func Regional(region string, fips, dual bool) string {
	p := awsrpc.Partition(region)
	host := "https://secretsmanager."
	if fips {
		host = "https://secretsmanager-fips."
	}
	suffix := awsrpc.DNSSuffix(p)
	if dual && p != "aws" && p != "aws-us-gov" && (p != "aws-cn" || fips) {
		suffix = awsrpc.DualStackDNSSuffix(p)
	}
	return host + region + "." + suffix
}

// Client calls Secrets Manager. It is safe for concurrent use.
type Client struct{ rpc *awsrpc.Client }

// Options are New's optional settings (the clock, the sleep between
// attempts, the HTTP client).
type Options = awsrpc.Options

// New returns a client for cfg's region, credentials, endpoint, HTTP
// client and retryer.
func New(cfg aws.Config, opts ...func(*Options)) *Client {
	return &Client{rpc: awsrpc.New(Service, cfg, opts...)}
}

// IsCode reports whether err carries Secrets Manager's error code.
func IsCode(err error, code string) bool { return err != nil && awsrpc.Code(err) == code }

// GetSecretValueInput names the secret (its ARN or name) and, optionally,
// the version stage to read (AWSCURRENT when empty).
type GetSecretValueInput struct {
	SecretID     string `json:"SecretId"`
	VersionStage string `json:"VersionStage,omitempty"`
}

// GetSecretValueOutput is the secret's value: SecretString, or
// SecretBinary when the secret was stored as bytes (nil SecretString).
type GetSecretValueOutput struct {
	ARN           string   `json:"ARN"`
	Name          string   `json:"Name"`
	VersionID     string   `json:"VersionId"`
	SecretString  *string  `json:"SecretString"`
	SecretBinary  []byte   `json:"SecretBinary"`
	VersionStages []string `json:"VersionStages"`
}

// GetSecretValue reads a secret's value.
func (c *Client) GetSecretValue(ctx context.Context, in *GetSecretValueInput) (*GetSecretValueOutput, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	out := &GetSecretValueOutput{}
	header := http.Header{"X-Amz-Target": {"secretsmanager.GetSecretValue"}}
	err = c.rpc.Call(ctx, "GetSecretValue", header, body, func(_ int, data []byte) error {
		return json.Unmarshal(data, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
