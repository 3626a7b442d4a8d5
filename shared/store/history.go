package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// The job history (job.Record.History) rides on the writes that move the
// record: every state-changing write appends its entry in the same
// conditional UpdateItem (no extra request), and the list stays bounded
// at job.MaxHistory, newest kept, without a read:
//
//   - A writer that does not know the list (the lease, a take-back of a
//     record read from the sweep index, done) appends blind:
//     history = list_append(if_not_exists(history, :h0), :h), guarded by
//     size(history) < :hcap. It cannot trim, so it refuses to overfill.
//   - A writer that knows the whole list (the claimer's release and
//     outcome, from the lease write's ALL_NEW; the operator's retry and a
//     take-back of a record read whole) and finds it full writes the list
//     itself, oldest dropped: history = :h, guarded by size(history) = :hn.
//     Its own condition (state, version, lease) already pins the record,
//     so the list it read is the list it replaces. (Not REMOVE history[0]
//     with SET history[n]: the order of a list's REMOVE and SET inside
//     one expression is not something to rely on.)
//   - A write refused while the rest of its condition held (the record it
//     returns, ALL_OLD, still matches) was refused by the guard: it is sent
//     once more in the second form with the list the refusal returned.
//     That second request happens only to a blind writer of a full
//     history: a lease of a job already retried about five times.
//
// Entries are strings, "at|from|to|attempt|class|error|by", one list
// element each, with from and attempt left empty where the chain gives
// them (see job.Transition): from is stored only on the first entry,
// attempt only by a write that sets it. A string rather than a map: the
// webhook's conditional put carries the first entry, and every attribute
// value in an item is work for DynamoDB (and the emulator) on the hot path;
// a map of four fields is five values, a string one. A '|' in the error
// text becomes '¦'. Entries stored as maps (a at, f from, t to, n attempt,
// c class, e error, b by: before this encoding) are still read. Error text keeps its
// last job.MaxHistoryError bytes. A full history at its largest (every
// entry with the longest state, class, actor and error) adds 791 bytes to
// the item, under one write unit (TestHistorySizeIsBounded).

// transitionItem is one entry of a record's history list (L of S).
type transitionItem struct {
	At      int64  `dynamodbav:"a"`
	From    string `dynamodbav:"f,omitempty"`
	To      string `dynamodbav:"t"`
	Attempt *int   `dynamodbav:"n,omitempty"` // nil: the previous entry's
	Class   string `dynamodbav:"c,omitempty"`
	Error   string `dynamodbav:"e,omitempty"`
	Actor   string `dynamodbav:"b"`
	// Put is the creation entry's token: a random value only that put
	// wrote (see CreateJob), stored as an eighth field; readers ignore it.
	Put string `dynamodbav:"-"`
}

// historySep separates an entry's fields; errSep replaces it in error text.
const (
	historySep = "|"
	errSep     = "¦"
)

// MarshalDynamoDBAttributeValue encodes the entry as one string.
func (it transitionItem) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	attempt := ""
	if it.Attempt != nil {
		attempt = strconv.Itoa(*it.Attempt)
	}
	f := []string{
		strconv.FormatInt(it.At, 10), it.From, it.To, attempt, it.Class,
		strings.ReplaceAll(it.Error, historySep, errSep), it.Actor,
	}
	if it.Put != "" {
		f = append(f, it.Put)
	}
	return str(strings.Join(f, historySep)), nil
}

// UnmarshalDynamoDBAttributeValue decodes an entry: the string form, or
// the map form written before it.
func (it *transitionItem) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	switch v := av.(type) {
	case *types.AttributeValueMemberM:
		type legacy transitionItem // no methods: the map decoder
		var l legacy
		if err := attributevalue.UnmarshalMap(v.Value, &l); err != nil {
			return err
		}
		*it = transitionItem(l)
		return nil
	case *types.AttributeValueMemberS:
		f := strings.Split(v.Value, historySep)
		if len(f) != 7 && len(f) != 8 {
			return fmt.Errorf("history entry %q: %d fields, want 7 (8 with a put's token)", v.Value, len(f))
		}
		at, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return fmt.Errorf("history entry %q: time: %w", v.Value, err)
		}
		*it = transitionItem{At: at, From: f[1], To: f[2], Class: f[4], Error: f[5], Actor: f[6]}
		if f[3] != "" {
			n, err := strconv.Atoi(f[3])
			if err != nil {
				return fmt.Errorf("history entry %q: attempt: %w", v.Value, err)
			}
			it.Attempt = &n
		}
		return nil
	default:
		return fmt.Errorf("history entry: %T, want a string", av)
	}
}

// historyItems encodes a whole history, leaving out what the chain gives.
func historyItems(h []job.Transition) []transitionItem {
	if len(h) == 0 {
		return nil
	}
	out := make([]transitionItem, len(h))
	prev := 0
	for i, t := range h {
		it := transitionItem{At: t.At, To: string(t.To), Class: t.Class, Error: t.Error, Actor: t.Actor}
		if i == 0 {
			it.From = string(t.From)
		}
		if t.Attempt != prev {
			n := t.Attempt
			it.Attempt = &n
		}
		prev = t.Attempt
		out[i] = it
	}
	return out
}

// historyOf decodes a history, filling what the chain gives.
func historyOf(items []transitionItem) []job.Transition {
	if len(items) == 0 {
		return nil
	}
	out := make([]job.Transition, len(items))
	for i, it := range items {
		t := job.Transition{At: it.At, From: job.State(it.From), To: job.State(it.To), Class: it.Class, Error: it.Error, Actor: it.Actor}
		if i > 0 {
			if t.From == "" {
				t.From = out[i-1].To
			}
			t.Attempt = out[i-1].Attempt
		}
		if it.Attempt != nil {
			t.Attempt = *it.Attempt
		}
		out[i] = t
	}
	return out
}

// entry is the history entry one write appends.
type entry struct {
	t           job.Transition // From is the chain's
	setsAttempt bool           // the write sets the attempt to t.Attempt
	// known is the record's whole history as the writer knows it (nil:
	// unknown, the write appends blind).
	known []job.Transition
	// put, when set, is a random token of this write, stored with the
	// entry (transitionItem.Put) so that writeOf can tell the SDK's retry
	// of this write, refused by its own entry, from another writer's.
	put string
	// last, when set, is the stored last entry of known (appending's
	// retry, from a refusal's record): the whole-list form is then also
	// guarded on it. A writer whose own condition pins the record leaves
	// it nil; one whose condition does not (MarkDone takes any live
	// state) would otherwise overwrite an entry written between its two
	// requests that left the list as long (every write of a full list
	// does, and the claimer's Finish keeps the version).
	last types.AttributeValue
}

// newPut returns a random token for entry.put.
func newPut() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("history token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// writeOf reports whether item's newest history entry carries token put:
// the write that put it there is the caller's own.
func writeOf(item map[string]types.AttributeValue, put string) bool {
	l, ok := item["history"].(*types.AttributeValueMemberL)
	if put == "" || !ok || len(l.Value) == 0 {
		return false
	}
	last, ok := l.Value[len(l.Value)-1].(*types.AttributeValueMemberS)
	if !ok {
		return false
	}
	f := strings.Split(last.Value, historySep)
	return len(f) == 8 && f[7] == put
}

// full reports whether e writes the whole list (it knows a full one).
func (e entry) full() bool { return e.known != nil && len(e.known) >= job.MaxHistory }

// into adds e to a write: update ("SET …" with an optional " REMOVE …")
// gets the history action, cond the guard, vals their values.
func (e entry) into(update, cond string, vals map[string]types.AttributeValue) (string, string, error) {
	for _, k := range []string{":h", ":h0", ":hcap", ":hn", ":hl"} {
		delete(vals, k) // a retry switches forms; DynamoDB refuses unused values
	}
	var set, guard string
	var h any
	if e.full() {
		items := historyItems(job.AppendHistory(e.known, job.Chained(e.known, e.t, e.setsAttempt)))
		items[len(items)-1].Put = e.put
		h = items
		vals[":hn"] = n(int64(len(e.known)))
		set, guard = "history = :h", "size(history) = :hn"
		if e.last != nil && len(e.known) > 0 {
			vals[":hl"] = e.last
			guard += fmt.Sprintf(" AND history[%d] = :hl", len(e.known)-1)
		}
	} else {
		t := e.t.Compact()
		it := transitionItem{At: t.At, To: string(t.To), Class: t.Class, Error: t.Error, Actor: t.Actor, Put: e.put}
		if e.setsAttempt {
			it.Attempt = &t.Attempt
		}
		h = []transitionItem{it}
		vals[":h0"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
		vals[":hcap"] = n(job.MaxHistory)
		set, guard = "history = list_append(if_not_exists(history, :h0), :h)", "(attribute_not_exists(history) OR size(history) < :hcap)"
	}
	av, err := attributevalue.Marshal(h)
	if err != nil {
		return "", "", fmt.Errorf("encode history entry: %w", err)
	}
	vals[":h"] = av
	if i := strings.Index(update, " REMOVE "); i >= 0 {
		update = update[:i] + ", " + set + update[i:]
	} else {
		update += ", " + set
	}
	if cond == "" {
		return update, guard, nil
	}
	return update, "(" + cond + ") AND " + guard, nil
}

// appending runs send with e, and again with the list a refusal returned
// (guarded on that list's last entry, entry.last) while that record still
// satisfies the rest of the write's condition (pinned) and its list is one
// the guard refuses: at most appendTries sends, since a retry is refused
// only when another write came between.
func appending(e entry, pinned func(job.Record) bool, send func(entry) error) error {
	err := send(e)
	for try := 1; try < appendTries; try++ {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) || len(ccf.Item) == 0 {
			return err
		}
		cur, derr := unmarshal(ccf.Item)
		if derr != nil || !pinned(cur) {
			return err
		}
		last := lastEntry(ccf.Item)
		n := len(cur.History)
		if e.full() && n == len(e.known) && (e.last == nil || equalAV(e.last, last)) || !e.full() && n < job.MaxHistory {
			return err // the guard held: something else refused
		}
		e.known, e.last = cur.History, last
		if e.known == nil {
			e.known = []job.Transition{}
		}
		err = send(e)
	}
	return err
}

// appendTries bounds appending's sends of one write.
const appendTries = 3

// lastEntry is the last stored entry of item's history, nil when it has
// none.
func lastEntry(item map[string]types.AttributeValue) types.AttributeValue {
	l, ok := item["history"].(*types.AttributeValueMemberL)
	if !ok || len(l.Value) == 0 {
		return nil
	}
	return l.Value[len(l.Value)-1]
}

// equalAV reports whether a and b are the same stored string entry.
func equalAV(a, b types.AttributeValue) bool {
	x, ok1 := a.(*types.AttributeValueMemberS)
	y, ok2 := b.(*types.AttributeValueMemberS)
	return ok1 && ok2 && x.Value == y.Value
}

// update is one conditional UpdateItem of job id's record, with e's
// history entry when e is not nil (and appending's second try; pinned
// tells whether a refused record met the rest of cond). A refusal returns
// the record as it was (ALL_OLD) in the *types.ConditionalCheckFailedException.
func (s *Store) update(ctx context.Context, id int64, update, cond string, names map[string]string,
	vals map[string]types.AttributeValue, ret types.ReturnValue, e *entry, pinned func(job.Record) bool) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	send := func(e *entry) error {
		u, c := update, cond
		if e != nil {
			var err error
			if u, c, err = e.into(update, cond, vals); err != nil {
				return err
			}
		}
		var err error
		out, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           &s.table,
			Key:                                 key(job.Key(id)),
			UpdateExpression:                    aws.String(u),
			ConditionExpression:                 aws.String(c),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           vals,
			ReturnValues:                        ret,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	if e == nil {
		return out, send(nil)
	}
	return out, appending(*e, pinned, func(e entry) error { return send(&e) })
}
