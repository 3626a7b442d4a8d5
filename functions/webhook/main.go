// Command webhook is the webhook Lambda function. It only wires, through
// shared/wire/webhook (which its tests use too), once per cold start, and
// starts the handler; everything it does is in shared/webhook (STYLE.md
// rule 1).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/webhook"
)

func main() {
	lambda.Start(wire.Process("webhook", webhook.New).Handle)
}
