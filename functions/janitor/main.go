// Command janitor is the scheduled Lambda function that removes runners,
// machines and JIT configs that outlived their job (see shared/janitor).
// It only wires, through shared/wire/janitor (which its tests use too),
// once per cold start.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/janitor"
)

func main() {
	lambda.Start(wire.Process("janitor", janitor.New).Handle)
}
