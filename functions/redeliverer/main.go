// Command redeliverer is the scheduled Lambda function that asks GitHub to
// redeliver the workflow_job webhook deliveries that never reached us (see
// shared/redeliver). It only wires, through shared/wire/redeliverer (which
// its tests use too), once per cold start.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/redeliverer"
)

func main() {
	lambda.Start(wire.Process("redeliverer", redeliverer.New).Handle)
}
