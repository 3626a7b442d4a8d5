package store

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// Cursor is where a Stale page ends and the next begins (Page.Next, the
// start argument of Stale). It is an alias so callers can name the type in
// their narrow ports without importing an AWS service package; they must
// treat it as opaque.
type Cursor = map[string]types.AttributeValue
