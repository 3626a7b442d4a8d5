// Package awsenv builds the functions' aws.Config from the environment
// Lambda gives every function: AWS_REGION, the execution role's
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, and the
// SDK's own endpoint settings: AWS_ENDPOINT_URL (LocalStack, moto), or
// GHCLAIM_ENDPOINT_URL when it is unset (EndpointVar: sam local),
// AWS_ENDPOINT_URL_<SERVICE> (AWS_ENDPOINT_URL_SQS, …),
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS, AWS_USE_FIPS_ENDPOINT and
// AWS_USE_DUALSTACK_ENDPOINT, read as config.LoadDefaultConfig reads them
// from the environment, so every client of a function (and ghclaim's own
// EC2 client) honours them as the tools' clients do.
//
// Decision: the functions do not call config.LoadDefaultConfig. On Lambda
// the credentials are always in the environment, and the default chain
// links the SSO, SSO-OIDC, sign-in and STS clients, shared-config file
// parsing and IMDS into every bootstrap: about 1.8 MB of the claimer's
// binary, and work at each cold start, for sources a function never uses.
// The local tools and tests keep the default chain. A missing variable is
// an error that names it, at start-up.
//
// It must never log or return a credential in an error.
package awsenv

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/ghclaim/ghclaim/shared/redact"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// EndpointVar is ghclaim's own name for the base endpoint, used when
// AWS_ENDPOINT_URL is unset. The template declares it, empty, so that
// `sam local invoke --env-vars` can set it: SAM CLI overrides only the
// variables a template declares, and declaring AWS_ENDPOINT_URL itself
// would blank the one LocalStack gives every function it runs (a
// function's own environment wins over LocalStack's).
const EndpointVar = "GHCLAIM_ENDPOINT_URL"

// baseEndpoint is the base endpoint the environment names, and the
// variable that named it.
func baseEndpoint(getenv func(string) string) (name, url string) {
	for _, n := range []string{"AWS_ENDPOINT_URL", EndpointVar} {
		if v := getenv(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// AttemptBound is an HTTP client for the SDK's clients under which every
// attempt must start answering within d: a stalled attempt is cut and the
// SDK's retryer sends the next one. The SDK's own client waits for an
// answer without limit, so one stalled request used up a webhook
// delivery's whole budget (GitHub never sends it again) or a cold start's.
// For calls that answer in milliseconds (DynamoDB, SQS, SSM, Secrets
// Manager), never for EC2's instant fleets.
func AttemptBound(d time.Duration) aws.HTTPClient {
	return OwnBodies(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = d
	}))
}

// Load returns the aws.Config the environment describes.
func Load(getenv func(string) string) (aws.Config, error) {
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		return aws.Config{}, fmt.Errorf("AWS_REGION is not set (Lambda sets it; locally, export it)")
	}
	id, key := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	switch {
	case id == "":
		return aws.Config{}, fmt.Errorf("AWS_ACCESS_KEY_ID is not set (Lambda sets it from the execution role)")
	case key == "":
		return aws.Config{}, fmt.Errorf("AWS_SECRET_ACCESS_KEY is not set (Lambda sets it from the execution role)")
	}
	src, err := endpointsFrom(getenv)
	if err != nil {
		return aws.Config{}, err
	}
	cfg := aws.Config{
		Region:        region,
		Credentials:   aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, key, getenv("AWS_SESSION_TOKEN"))),
		ConfigSources: []any{src},
	}
	if name, ep := baseEndpoint(getenv); ep != "" && !src.ignore {
		// Every client would refuse each request ("FIPS and custom
		// endpoint are not supported"): refuse once, at start.
		switch {
		case src.fips == aws.FIPSEndpointStateEnabled:
			return aws.Config{}, fmt.Errorf("AWS_USE_FIPS_ENDPOINT=true with %s set: AWS SDK clients take no FIPS endpoint with a custom one; unset one of them", name)
		case src.dualStack == aws.DualStackEndpointStateEnabled:
			return aws.Config{}, fmt.Errorf("AWS_USE_DUALSTACK_ENDPOINT=true with %s set: AWS SDK clients take no dual-stack endpoint with a custom one; unset one of them", name)
		}
		cfg.BaseEndpoint = aws.String(ep)
	}
	return cfg, nil
}

// Endpoints is the environment's endpoint settings as a configuration
// source: the SDK's clients look for these methods (the ones
// config.EnvConfig has) among aws.Config.ConfigSources.
type Endpoints struct {
	getenv    func(string) string
	fips      aws.FIPSEndpointState
	dualStack aws.DualStackEndpointState
	// ignore is AWS_IGNORE_CONFIGURED_ENDPOINT_URLS; ignoreSet whether it
	// was set at all (to false, it overrides a shared config's true).
	ignore, ignoreSet bool
}

func endpointsFrom(getenv func(string) string) (Endpoints, error) {
	e := Endpoints{getenv: getenv}
	var err error
	if e.fips, err = state(getenv, "AWS_USE_FIPS_ENDPOINT", aws.FIPSEndpointStateEnabled, aws.FIPSEndpointStateDisabled); err != nil {
		return e, err
	}
	if e.dualStack, err = state(getenv, "AWS_USE_DUALSTACK_ENDPOINT", aws.DualStackEndpointStateEnabled, aws.DualStackEndpointStateDisabled); err != nil {
		return e, err
	}
	e.ignore, e.ignoreSet, err = flag(getenv, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
	return e, err
}

// state maps a boolean variable onto one of the SDK's endpoint states:
// unset (the zero value) when empty, else on or off.
func state[S any](getenv func(string) string, name string, on, off S) (S, error) {
	var unset S
	switch v, set, err := flag(getenv, name); {
	case err != nil || !set:
		return unset, err
	case v:
		return on, nil
	default:
		return off, nil
	}
}

// flag reads a boolean variable as the SDK does: "true" or "false" in any
// case (set is false when it is empty); anything else is an error that
// names the variable.
func flag(getenv func(string) string, name string) (on, set bool, err error) {
	switch v := getenv(name); {
	case v == "":
		return false, false, nil
	case strings.EqualFold(v, "true"):
		return true, true, nil
	case strings.EqualFold(v, "false"):
		return false, true, nil
	default:
		return false, false, fmt.Errorf("%s=%q: want true or false", name, redact.Input(v))
	}
}

// GetUseFIPSEndpoint is AWS_USE_FIPS_ENDPOINT.
func (e Endpoints) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	return e.fips, e.fips != aws.FIPSEndpointStateUnset, nil
}

// GetUseDualStackEndpoint is AWS_USE_DUALSTACK_ENDPOINT.
func (e Endpoints) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	return e.dualStack, e.dualStack != aws.DualStackEndpointStateUnset, nil
}

// GetIgnoreConfiguredEndpoints is AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
func (e Endpoints) GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error) {
	return e.ignore, e.ignoreSet, nil
}

// GetServiceBaseEndpoint is AWS_ENDPOINT_URL_<SERVICE> for a client's SDK
// ID ("SQS", "DynamoDB", "Secrets Manager" → SECRETS_MANAGER).
func (e Endpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v := e.getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return v, v != "", nil
}
