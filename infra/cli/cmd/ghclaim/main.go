// Command ghclaim is the operator's CLI (see infra/cli):
//
//	go run ./infra/cli/cmd/ghclaim jobs --stack ghclaim --state failed
//
// It uses the default AWS configuration: profiles, AWS_REGION, and
// AWS_ENDPOINT_URL for moto or LocalStack.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/cli"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg, err := cli.AWSConfig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ghclaim:", err)
		os.Exit(cli.ExitFail)
	}
	code := cli.New(cli.Config{
		DynamoDB:       dynamodb.NewFromConfig(cfg),
		SQS:            sqs.NewFromConfig(cfg),
		SecretsManager: secretsapi.New(cfg),
		CloudFormation: cloudformation.NewFromConfig(cfg),
		EC2:            ec2api.New(cfg),
		Stdout:         os.Stdout,
		Stderr:         os.Stderr,
	}).Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
