package job

import (
	"errors"
	"time"
)

// The redeliverer's bookkeeping (shared/redeliver), kept in the same table
// as the job records under keys of its own: the position in GitHub's
// webhook delivery log already read (redeliver#cursor) and the
// redeliveries asked per delivery GUID (redeliver#<guid>).

// ErrAttemptsSpent: a delivery GUID already had its bounded number of
// redeliveries; CountRedelivery changed nothing.
var ErrAttemptsSpent = errors.New("job: redelivery attempts spent")

// RedeliveryTTL keeps a GUID's attempt count past GitHub's 3-day retention
// of the delivery log, so a GUID never gets a fresh budget while GitHub
// still lists it.
const RedeliveryTTL = 4 * 24 * time.Hour

// DeliveryMark is the newest entry of the delivery log a completed pass
// has read: the next pass stops there.
type DeliveryMark struct {
	ID          int64
	DeliveredAt time.Time
}

// Zero reports whether no pass has completed yet.
func (m DeliveryMark) Zero() bool { return m.ID == 0 }

// RedeliveryPrefix begins the partition key of every redeliverer item, so
// an IAM dynamodb:LeadingKeys condition can confine the redeliverer to them.
const RedeliveryPrefix = "redeliver#"

// MarkKey is the partition key of the delivery log mark.
const MarkKey = RedeliveryPrefix + "cursor"

// RedeliveryKey is the partition key of a delivery GUID's attempt count.
func RedeliveryKey(guid string) string { return RedeliveryPrefix + guid }
