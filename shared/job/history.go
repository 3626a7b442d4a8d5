package job

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Actors of a transition: who moved the record.
const (
	ActorWebhook   = "webhook"
	ActorClaimer   = "claimer"
	ActorReclaimer = "reclaimer"
	ActorOperator  = "operator"
)

// ReasonLeaseExpired is the reason a history entry gives for taking over
// a lease whose claimer died (its expiry passed with the record still
// claiming): the claimer's takeover and the reclaimer's take-back alike.
const ReasonLeaseExpired = "lease_expired"

// MaxHistory bounds Record.History: the newest entries are kept. Ten cover
// a job's last few attempts (each is a lease and a release or an outcome)
// and keep a full history, at its largest, well under 1 KB of item (one
// write unit): every write of the record pays for its whole size.
const MaxHistory = 10

// MaxHistoryError bounds an entry's error text: its tail is kept (a wrapped
// Go error ends with its cause: "… 502 Bad Gateway"). The whole newest
// error is the record's LastError.
const MaxHistoryError = 20

// Transition is one entry of a record's history: what moved it, from which
// state to which, at which attempt, and why.
//
// Every state-changing write appends one, so the entries form a chain:
// an entry's From is the To of the entry before it, and a write that does
// not set the attempt (a lease, a take-back, done) carries the attempt of
// the entry before it. Writers that append without reading (DynamoDB's
// list_append) therefore leave both out and Chained fills them in.
type Transition struct {
	At      int64  `json:"at"` // ms
	From    State  `json:"from"`
	To      State  `json:"to"`
	Attempt int    `json:"attempt"`
	Class   string `json:"class,omitempty"`
	Error   string `json:"error,omitempty"`
	Actor   string `json:"actor"`
}

// Compact returns t with its error text cut to its last MaxHistoryError
// bytes (on a rune boundary, marked with a leading "…").
func (t Transition) Compact() Transition {
	// Valid UTF-8, as DynamoDB stores strings (the SDK would replace a
	// stray byte, and the in-memory store would keep it).
	t.Error = strings.ToValidUTF8(t.Error, "\uFFFD")
	if len(t.Error) <= MaxHistoryError {
		return t
	}
	const mark = "…"
	cut := len(t.Error) - (MaxHistoryError - len(mark))
	for cut < len(t.Error) && !utf8.RuneStart(t.Error[cut]) {
		cut++
	}
	t.Error = mark + t.Error[cut:]
	return t
}

// Chained returns t as the next entry after h: From is the last entry's To
// and, unless the write sets the attempt, Attempt is the last entry's
// (the empty state and 0 with no entry before).
func Chained(h []Transition, t Transition, setsAttempt bool) Transition {
	t.From = ""
	if !setsAttempt {
		t.Attempt = 0
	}
	if n := len(h); n > 0 {
		t.From = h[n-1].To
		if !setsAttempt {
			t.Attempt = h[n-1].Attempt
		}
	}
	return t
}

// AppendHistory returns h with t (compacted) appended, keeping the newest
// MaxHistory entries. It never changes h's backing array.
func AppendHistory(h []Transition, t Transition) []Transition {
	out := make([]Transition, 0, min(len(h)+1, MaxHistory))
	if over := len(h) + 1 - MaxHistory; over > 0 {
		h = h[over:]
	}
	out = append(out, h...)
	return append(out, t.Compact())
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

// StateBeforeDone is the state a done record had when it became done, read
// from its history (every state change writes an entry, and nothing
// follows done): "" when it was created done or r is not done.
func StateBeforeDone(r Record) State {
	n := len(r.History)
	if r.State != Done || n < 2 || r.History[n-1].To != Done {
		return ""
	}
	return r.History[n-2].To
}
