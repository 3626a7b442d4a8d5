// Package awsenv builds the functions' aws.Config from the environment
// Lambda gives every function: AWS_REGION, the execution role's
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, and the
// SDK's own AWS_ENDPOINT_URL (LocalStack, moto, sam local).
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
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

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
	cfg := aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(id, key, getenv("AWS_SESSION_TOKEN"))),
	}
	if ep := getenv("AWS_ENDPOINT_URL"); ep != "" {
		cfg.BaseEndpoint = aws.String(ep)
	}
	return cfg, nil
}
