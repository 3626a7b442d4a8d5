// Command claimer is the claimer Lambda function (SQS event source with
// ReportBatchItemFailures). It only wires, through shared/wire/claimer
// (which its tests use too), once per cold start, so warm invocations
// reuse every client; everything it does is in shared/claim (STYLE.md
// rule 1).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/claimer"
)

func main() {
	lambda.Start(wire.Process("claimer", claimer.New))
}
