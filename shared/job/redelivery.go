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

// RedeliveryCount is what a delivery GUID's attempt count says: the
// redeliveries asked, when the last was counted, and the log id of the
// delivery it was asked for (zero when none; AskedID zero also for a count
// written before it was kept). A redelivery's outcome is a new log entry,
// so an entry of the GUID at or below AskedID is not the last ask's
// outcome.
type RedeliveryCount struct {
	Attempts int
	AskedAt  time.Time
	AskedID  int64
}

// RedeliveryTTL keeps a GUID's attempt count past GitHub's 3-day retention
// of the delivery log, so a GUID never gets a fresh budget while GitHub
// still lists it.
const RedeliveryTTL = 4 * 24 * time.Hour

// DeliveryMark is the newest entry of the delivery log a completed read
// has reached (every entry at or below ID was read): a read stops there.
// Resume, when set, is a read that stopped part-way (a failed page, a rate
// limit, the time budget): the next pass goes on with it instead of
// starting again from the newest entry.
type DeliveryMark struct {
	ID          int64
	DeliveredAt time.Time
	Resume      DeliveryResume
	// Retry holds failed deliveries already read whose redelivery a pass
	// could not ask (a failed count write, a refusal, a stop): the next
	// pass asks them without reading them again.
	Retry []DeliveryRef
}

// DeliveryRef is one entry of the delivery log, by id.
type DeliveryRef struct {
	ID          int64
	GUID        string
	Action      string
	DeliveredAt time.Time
}

// DeliveryResume is a read of the delivery log under way.
type DeliveryResume struct {
	// Cursor is GitHub's cursor of the next page to read ("": none).
	Cursor string
	// Top is the mark the read saves when it ends: its newest entry, or
	// just below the oldest failed delivery it could not have redelivered.
	Top   int64
	TopAt time.Time
	// Redelivered holds the GUIDs whose redelivery entries the read has
	// passed: an older entry of one of them is not its latest.
	Redelivered []string
}

// Resuming reports whether a read is under way.
func (m DeliveryMark) Resuming() bool { return m.Resume.Cursor != "" }

// Zero reports whether no pass has completed yet.
func (m DeliveryMark) Zero() bool { return m.ID == 0 }

// RedeliveryPrefix begins the partition key of every redeliverer item, so
// an IAM dynamodb:LeadingKeys condition can confine the redeliverer to them.
const RedeliveryPrefix = "redeliver#"

// MarkKey is the partition key of the delivery log mark.
const MarkKey = RedeliveryPrefix + "cursor"

// RedeliveryKey is the partition key of a delivery GUID's attempt count.
func RedeliveryKey(guid string) string { return RedeliveryPrefix + guid }
