// Command janitor is the scheduled Lambda function that removes runners,
// machines and JIT configs that outlived their job (see shared/janitor).
// It only wires, through shared/wire/janitor (which its tests use too),
// once per cold start.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/janitor"
)

func main() {
	h, err := janitor.New(context.Background(), wire.Env{Getenv: os.Getenv, Out: os.Stdout, Now: time.Now})
	if err != nil {
		fmt.Fprintln(os.Stderr, "janitor:", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
