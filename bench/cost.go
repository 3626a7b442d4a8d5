package bench

import (
	"math"
	"time"
)

// Source is where a price was read.
type Source struct {
	What string `json:"what"`
	URL  string `json:"url"`
	Read string `json:"read"` // the date it was read, YYYY-MM-DD
}

// Prices are on-demand list prices in USD per unit, without free tiers
// (a fleet large enough to compare runner modules is past them).
type Prices struct {
	Region string `json:"region"`
	// LambdaGBSecond is the arm64 duration price (first tier);
	// LambdaRequest the price of one invocation.
	LambdaGBSecond float64 `json:"lambda_arm64_gb_second"`
	LambdaRequest  float64 `json:"lambda_request"`
	// SQSRequest is one standard-queue request (up to 64 KB).
	SQSRequest float64 `json:"sqs_request"`
	// DynamoWRU and DynamoRRU are one on-demand write / read request unit.
	DynamoWRU float64  `json:"dynamodb_wru"`
	DynamoRRU float64  `json:"dynamodb_rru"`
	Sources   []Source `json:"sources"`
}

// ListPrices are the us-east-1 list prices the report uses. AWS's own
// pricing pages render their rate tables client-side, so the figures were
// read from pages that quote them, each named with the date it was read.
var ListPrices = Prices{
	Region:         "us-east-1",
	LambdaGBSecond: 0.0000133334,
	LambdaRequest:  0.20 / 1e6,
	SQSRequest:     0.40 / 1e6,
	DynamoWRU:      0.625 / 1e6,
	DynamoRRU:      0.125 / 1e6,
	Sources: []Source{
		{What: "Lambda: $0.20 per 1M requests; arm64 duration $0.0000133334 per GB-second (first 6 B GB-s/month); billed per 1 ms, init included",
			URL: "https://aws.amazon.com/lambda/pricing/ (rates quoted by https://git.mcrn.ar/mariano/lambda_local_runner/src/commit/957e45b8adae23ce50b966346229585b5df18b4d/docs/lambdas-md/lambda-13-cost.md and https://app.unpkg.com/artillery@2.0.28/files/lib/platform/aws-lambda/prices.js)", Read: "2026-11-30"},
		{What: "SQS standard queue: $0.40 per 1M requests (first 100 B/month), each 64 KB chunk a request",
			URL: "https://aws.amazon.com/sqs/pricing/ (rates quoted by https://cloudburn.io/blog/amazon-sqs-pricing, March 2026, and https://unanswered.io/guide/aws-sqs-pricing-and-cost-optimization)", Read: "2026-11-30"},
		{What: "DynamoDB on-demand (Standard table class): $0.625 per 1M write request units, $0.125 per 1M read request units (after the November 2024 reduction)",
			URL: "https://aws.amazon.com/dynamodb/pricing/on-demand/ (rates quoted by https://airbyte.com/data-engineering-resources/dynamodb-pricing; units per https://docs.aws.amazon.com/whitepapers/latest/how-aws-pricing-works/dynamodb.html)", Read: "2026-11-30"},
	},
}

// Usage is what some work consumes from AWS.
type Usage struct {
	Invocations float64 `json:"invocations"`
	GBSeconds   float64 `json:"gb_seconds"`
	SQSRequests float64 `json:"sqs_requests"`
	// WRU includes the index's writes; RRU are read units.
	WRU float64 `json:"wru"`
	RRU float64 `json:"rru"`
}

// Invocation is one Lambda invocation of memoryMB that ran for d, billed
// per started millisecond.
func Invocation(memoryMB int, d time.Duration) Usage {
	billed := math.Ceil(float64(d) / float64(time.Millisecond))
	return Usage{Invocations: 1, GBSeconds: float64(memoryMB) / 1024 * billed / 1000}
}

// Plus adds v to u.
func (u Usage) Plus(v Usage) Usage {
	return Usage{
		Invocations: u.Invocations + v.Invocations,
		GBSeconds:   u.GBSeconds + v.GBSeconds,
		SQSRequests: u.SQSRequests + v.SQSRequests,
		WRU:         u.WRU + v.WRU,
		RRU:         u.RRU + v.RRU,
	}
}

// Times scales u by k.
func (u Usage) Times(k float64) Usage {
	return Usage{u.Invocations * k, u.GBSeconds * k, u.SQSRequests * k, u.WRU * k, u.RRU * k}
}

// FromSnapshot is the SQS requests and DynamoDB units a Counter saw.
func FromSnapshot(s Snapshot) Usage {
	return Usage{
		SQSRequests: float64(s.Service("SQS")),
		WRU:         s.Units.WRU + s.Units.GSIWRU,
		RRU:         s.Units.RRU,
	}
}

// Bill is a Usage priced, in USD.
type Bill struct {
	LambdaRequests float64 `json:"lambda_requests"`
	LambdaDuration float64 `json:"lambda_duration"`
	SQS            float64 `json:"sqs"`
	DynamoDB       float64 `json:"dynamodb"`
	Total          float64 `json:"total"`
}

// Price prices u.
func (p Prices) Price(u Usage) Bill {
	b := Bill{
		LambdaRequests: u.Invocations * p.LambdaRequest,
		LambdaDuration: u.GBSeconds * p.LambdaGBSecond,
		SQS:            u.SQSRequests * p.SQSRequest,
		DynamoDB:       u.WRU*p.DynamoWRU + u.RRU*p.DynamoRRU,
	}
	b.Total = b.LambdaRequests + b.LambdaDuration + b.SQS + b.DynamoDB
	return b
}
