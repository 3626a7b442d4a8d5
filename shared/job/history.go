package job

import "time"

// Actors of a transition: who moved the record.
const (
	ActorWebhook   = "webhook"
	ActorClaimer   = "claimer"
	ActorReclaimer = "reclaimer"
	ActorOperator  = "operator"
)

// MaxHistory bounds Record.History: the newest entries are kept, so a job
// retried for days can never grow its item toward DynamoDB's 400 KB.
const MaxHistory = 20

// Transition is one entry of a record's history: what moved it, from which
// state to which, at which attempt, and why.
type Transition struct {
	At      int64  `json:"at"` // ms
	From    State  `json:"from"`
	To      State  `json:"to"`
	Attempt int    `json:"attempt"`
	Class   string `json:"class,omitempty"`
	Error   string `json:"error,omitempty"`
	Actor   string `json:"actor"`
}

// AppendHistory returns h with t appended, keeping the newest MaxHistory
// entries. It never changes h's backing array.
func AppendHistory(h []Transition, t Transition) []Transition {
	out := make([]Transition, 0, min(len(h)+1, MaxHistory))
	if over := len(h) + 1 - MaxHistory; over > 0 {
		h = h[over:]
	}
	out = append(out, h...)
	return append(out, t)
}

// Requeue is an operator's retry of a failed or abandoned job: back to
// queued at a new version with the ladder reset (attempt 0, no first
// failure), recorded as the operator's act.
type Requeue struct {
	// Read is the record as the operator read it: the write succeeds only
	// while its state and version are still the record's, and the history
	// written is Read's with the operator's entry appended.
	Read Record
	// By names the operator ("retried by operator <By>").
	By string
	// Due is when the new message becomes visible.
	Due time.Time
}

// RequeueNote is the last_error an operator's retry records.
func RequeueNote(by string) string { return "retried by operator " + by }

// Retryable reports whether an operator may requeue a record in state s.
func (s State) Retryable() bool { return s == Failed || s == Abandoned }
