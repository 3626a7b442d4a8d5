// Command reclaimer is the scheduled Lambda function that re-enqueues job
// records nobody is moving any more, and removes the runner and machine
// of an attempt it abandons (see shared/reclaim). It only wires, through
// shared/wire/reclaimer (which its tests use too), once per cold start.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/reclaimer"
)

func main() {
	lambda.Start(wire.Process("reclaimer", reclaimer.New).Handle)
}
