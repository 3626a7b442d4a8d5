// Command webhook is the webhook Lambda function. It only wires, through
// shared/wire/webhook (which its tests use too), once per cold start, and
// starts the handler; everything it does is in shared/webhook (STYLE.md
// rule 1).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/webhook"
)

func main() {
	h, err := webhook.New(context.Background(), wire.Env{Getenv: os.Getenv, Out: os.Stdout, Now: time.Now})
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhook:", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
