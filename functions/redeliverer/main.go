// Command redeliverer is the scheduled Lambda function that asks GitHub to
// redeliver the workflow_job webhook deliveries that never reached us (see
// shared/redeliver). It only wires, through shared/wire/redeliverer (which
// its tests use too), once per cold start.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/redeliverer"
)

func main() {
	h, err := redeliverer.New(context.Background(), wire.Env{Getenv: os.Getenv, Out: os.Stdout, Now: time.Now})
	if err != nil {
		fmt.Fprintln(os.Stderr, "redeliverer:", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
