// Package redeliver owns the redeliverer: a scheduled pass that reads the
// GitHub App's webhook delivery log and asks GitHub to deliver again the
// workflow_job deliveries that never reached us (our endpoint down during a
// deploy, throttled, answering 5xx), because GitHub never redelivers by
// itself and a lost `queued` is a job that waits 24 h and fails.
//
// It must never import an AWS package (its ports speak shared/job and
// shared/ghapp types; shared/store and *ghapp.Client implement them), never
// ask for a delivery older than its window (GitHub keeps the log 3 days and
// refuses older ones), and never ask more than MaxAttempts times per GUID.
//
// Design decisions:
//   - A read goes through the log newest first (per_page 100, GitHub's
//     cap) down to the first entry an earlier read reached (the
//     job.DeliveryMark, item redeliver#cursor) or the first entry older
//     than Window (default 3 h, at most 72 h): a pass every 5 minutes reads
//     about one page. A read that stops part-way (any error on a page, a
//     rate limit, the rate floor, the time budget) keeps what it read: the
//     failed deliveries found so far are redelivered (unless GitHub's
//     budget is the reason), and the cursor of the page not read is saved
//     beside the mark, with the read's own top and the GUIDs of the
//     redelivery entries it passed; the next pass goes on from that cursor
//     and, when the read reaches the mark, saves the read's top as the new
//     mark (the pass after starts a new read from the newest entry). So
//     progress is monotone under faults: before, with no mark yet and 7+
//     pages to read, one failed page of any of them threw the whole pass
//     away, and at 20 % faults almost no pass ended (found by make chaos).
//     The read asks for every entry, not `status=failure`: GitHub's filter
//     goes by status_code 400-599 and never lists a delivery that got no
//     answer (status_code 0), the one an endpoint down leaves.
//     GitHub's cursors are positions in the log (ids), valid as long as
//     the log; a stored cursor GitHub refuses (4xx) starts the read again
//     from the newest entry.
//   - A failed GUID whose redelivery was not asked (its count write
//     failed, GitHub refused the redelivery for another reason than a rate
//     limit, the pass stopped first) is carried beside the mark (id, GUID,
//     time; at most 1000) and asked by the next pass, oldest first with
//     what that pass reads, unless the pass read a newer entry of its GUID
//     (that one decides). A mark moved past it without carrying it would
//     never read it again, and the job would wait 24 h; a mark held below
//     it (the first fix) made every later pass read every page above it
//     again and move only up to the next failed count write, which at
//     20 % faults left a backlog of hundreds asked minutes late (both
//     found by make chaos). Past the bound, the read's top holds below
//     the delivery instead.
//   - Reading newest first, the first entry of a GUID is its latest
//     delivery: when that one succeeded (a redelivery has the same GUID,
//     Redelivery true), the GUID is done; when it failed (status_code not
//     2xx, or status not "OK"), the GUID is a candidate. A read carried
//     over passes carries the GUIDs of the redelivery entries it passed
//     (at most 2000), since their older entries are not their latest. Candidates are
//     redelivered oldest first, the order GitHub first sent them, so a
//     job's `queued` goes before its `completed`.
//   - Attempts are counted per GUID (redeliver#<guid>, TTL past GitHub's 3
//     days) with a conditional write BEFORE the redelivery is asked: a
//     crash between the two costs an attempt, never an unbounded loop. A
//     GUID that spent MaxAttempts (default 3) is left, logged, counted.
//     An ask GitHub did not act on (a rate limit, a server error, a
//     failed connection, a 401 or 403 while the App's key or permission
//     is wrong) gives its attempt back (a refund conditional on the count
//     it made): a GitHub outage or a key rotated out of step must not
//     spend the attempts. Only GitHub's refusal of the delivery itself
//     (refusedForGood) keeps it. An ask that did redeliver after all
//     costs one duplicate, which the webhook refuses.
//   - Attempts are spaced: after the k-th, the next is asked no sooner
//     than Spacing × 2^(k-1) (default 10 min, then 20 min) after it, read
//     from the count's asked_at (one table read per failed GUID and pass).
//     A delivery fails again when our endpoint is still down; asked every
//     pass, three attempts were spent in 15 minutes and an outage longer
//     than that (a deploy gone wrong) lost every job that arrived in it.
//     Spaced, the default three cover about half an hour, and
//     REDELIVERY_MAX_ATTEMPTS more (a fourth at +70 min, a fifth at
//     +150 min, inside the default 3 h window). A waiting GUID is carried
//     to the next pass like any other not asked. GitHub redelivers after
//     its 202, so a pass that reads a GUID's entry again (its mark not
//     saved) may find the last allowed attempt's outcome not logged yet:
//     an entry at or below the one that attempt was asked for (the count
//     keeps its log id) is not its outcome, and the GUID waits (at most
//     Spacing) for it instead of being judged spent.
//   - No check that the job is already recorded: the log entry carries no
//     job id, and learning it costs GET /app/hook/deliveries/{id} per
//     candidate (one App call, plus a table read) to save one App call (the
//     redelivery). Instead a redelivery of a job already recorded reaches
//     the webhook, whose conditional put answers 200 "duplicate" and sends
//     nothing (DESIGN.md: one message per job): the cost is one webhook
//     invocation and one refused conditional write per such GUID, at most
//     MaxAttempts, and only for deliveries that failed in the first place.
//   - Rate-aware: the App's JWT has its own budget. Every answer's
//     X-RateLimit-* (read by a ratelimit.Transport in front of the App
//     client, handed here through Config.Rate) is checked before the next
//     call: below MinRemaining the pass stops. A rate limit (403 with
//     remaining 0, 429, secondary limit) stops the pass too; any other
//     failure of one redelivery is logged and the pass goes on.
package redeliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/redact"
)

// Defaults of Config.
const (
	DefaultWindow       = 3 * time.Hour
	DefaultMaxAttempts  = 3
	DefaultSpacing      = 10 * time.Minute
	DefaultMinRemaining = 50
	DefaultBudget       = 40 * time.Second
	// MaxWindow is GitHub's retention of the delivery log.
	MaxWindow = 72 * time.Hour
	// EventWorkflowJob is the only event redelivered.
	EventWorkflowJob = "workflow_job"
)

// GitHub is the App-level part of the GitHub client; *ghapp.Client
// implements it.
type GitHub interface {
	ListHookDeliveries(ctx context.Context, cursor string, perPage int) (ghapp.DeliveryPage, error)
	RedeliverHookDelivery(ctx context.Context, deliveryID int64) error
}

var (
	_ GitHub = (*ghapp.Client)(nil)
	_ GitHub = (*ghapp.Keyed)(nil) // what functions/redeliverer wires
)

// Store is the redeliverer's bookkeeping; shared/store implements it over
// DynamoDB, infra/mem in memory.
type Store interface {
	// LoadMark returns the mark of the last completed pass, or an error
	// wrapping job.ErrNotFound when no pass has completed.
	LoadMark(ctx context.Context) (job.DeliveryMark, error)
	// SaveMark stores m unless the stored mark is newer (higher ID): that
	// refusal is not an error.
	SaveMark(ctx context.Context, m job.DeliveryMark, now time.Time) error
	// CountRedelivery adds one to guid's attempt count, asked for the log
	// entry id, and returns the new count, or an error wrapping
	// job.ErrAttemptsSpent (nothing changed) when the count is already max.
	CountRedelivery(ctx context.Context, guid string, id int64, max int, now time.Time) (int, error)
	// Redeliveries returns guid's count, when it was last counted and for
	// which log entry (the zero count when none).
	Redeliveries(ctx context.Context, guid string, now time.Time) (job.RedeliveryCount, error)
	// RefundRedelivery takes back the attempt that made guid's count
	// count, unless it moved on since (not an error).
	RefundRedelivery(ctx context.Context, guid string, count int) error
}

// Metrics counts outcomes (CloudWatch EMF); *obs.Metrics implements it.
type Metrics interface {
	Add(name string, v float64)
	Flush()
}

// Config is what New needs. GitHub and Store are required.
type Config struct {
	GitHub GitHub
	Store  Store
	// Rate returns the App budget's latest reading (ok false: none yet).
	Rate func() (ratelimit.Reading, bool)
	// Window: deliveries older than this are never asked (≤ MaxWindow).
	Window time.Duration
	// MaxAttempts bounds the redeliveries asked per GUID.
	MaxAttempts int
	// Spacing: after a GUID's k-th attempt the next waits Spacing ×
	// 2^(k-1) (default DefaultSpacing).
	Spacing time.Duration
	// MinRemaining: the pass stops when the App budget falls below it (0:
	// it never stops for the budget's sake; shared/config's default is
	// DefaultMinRemaining).
	MinRemaining int
	// Budget bounds one pass, so it ends well inside the invocation.
	Budget time.Duration
	// PerPage is the page size asked (default and cap: 100).
	PerPage int
	Now     clock.Func
	Log     *slog.Logger
	Metrics Metrics
}

// Redeliverer runs passes. It is safe for sequential use by one invocation
// at a time (Lambda's model).
type Redeliverer struct{ c Config }

// New validates cfg and fills its defaults.
func New(cfg Config) (*Redeliverer, error) {
	switch {
	case cfg.GitHub == nil || cfg.Store == nil:
		return nil, errors.New("redeliver: GitHub and Store are required")
	case cfg.Window > MaxWindow:
		return nil, fmt.Errorf("redeliver: window %s is longer than GitHub's %s retention", cfg.Window, MaxWindow)
	case cfg.Window < 0 || cfg.MaxAttempts < 0 || cfg.MinRemaining < 0:
		return nil, errors.New("redeliver: window, max attempts and min remaining must not be negative")
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Spacing <= 0 {
		cfg.Spacing = DefaultSpacing
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.PerPage <= 0 || cfg.PerPage > ghapp.MaxDeliveriesPage {
		cfg.PerPage = ghapp.MaxDeliveriesPage
	}
	if cfg.Rate == nil {
		cfg.Rate = func() (ratelimit.Reading, bool) { return ratelimit.Reading{}, false }
	}
	cfg.Now = clock.Or(cfg.Now)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	return &Redeliverer{c: cfg}, nil
}

type nopMetrics struct{}

func (nopMetrics) Add(string, float64) {}
func (nopMetrics) Flush()              {}

// Why a pass stopped before it was done.
const (
	StopRateFloor = "rate_floor" // the App budget fell below MinRemaining
	StopRateLimit = "rate_limit" // GitHub refused with a rate limit, or a secondary limit's block runs
	StopBudget    = "budget"     // the pass ran out of time
	// StopReadError: a page of the log could not be read. Unlike the
	// others it does not stop the redeliveries of what was read.
	StopReadError = "read_error"
	// StopAskRefused: GitHub refused an ask for the App's own reasons (a
	// 401 or 403: its key, its permission), or maxUnreached asks in a row
	// found no GitHub, or one failing (5xx); every other ask of the pass would meet the same,
	// and each gives its attempt back (refusedForGood), so asking them all
	// would ask each failed delivery on every pass with no bound. The
	// pass is then an error (Run), so RedelivererErrorsAlarm says so.
	StopAskRefused = "ask_refused"
)

// Report is what one pass did.
type Report struct {
	Pages int
	// Read counts log entries read (new since the mark, inside the window).
	Read int
	// Failed counts GUIDs of workflow_job whose latest delivery failed.
	Failed int
	// Redelivered counts redeliveries GitHub accepted.
	Redelivered int
	// Spent counts failed GUIDs left because they had MaxAttempts already.
	Spent int
	// Expired counts failed deliveries that aged out of the window before
	// they could be asked: carried from earlier passes (stopped, refused),
	// or never read at all (above the mark, past the window's edge). Like
	// a spent one, nothing brings their job in.
	Expired int
	// Gap: entries above the mark aged past the window on pages this pass
	// did not read; failed ones among them are lost, uncounted.
	Gap bool
	// Waiting counts failed GUIDs not asked yet because their last attempt
	// is too recent (Config.Spacing), or not judged yet because their last
	// allowed attempt's outcome is not in the log yet.
	Waiting int
	// Errors counts redeliveries refused for another reason than a rate limit.
	Errors int
	// Stopped is why the pass stopped early ("" when it completed).
	Stopped string
	// askErr is the failure that stopped the pass with StopAskRefused;
	// unreached counts the asks in a row that found no GitHub.
	askErr    error
	unreached int
	// Mark is the mark the pass saved (zero when it saved none), with the
	// read it leaves under way, if any.
	Mark job.DeliveryMark
}

// Handle is the Lambda handler for the EventBridge schedule. It returns an
// error only when the pass could not run (the log or the table could not
// be read): a pass that stopped early is normal. Lambda logs the error,
// and GitHub's message in it may quote the App JWT: it is redacted.
func (r *Redeliverer) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	_, err := r.Run(ctx)
	return redact.Error(err)
}

// Run performs one pass (see the package doc).
func (r *Redeliverer) Run(ctx context.Context) (Report, error) {
	now := r.c.Now() // read once: window, budget and the table's TTLs share it
	stop := now.Add(r.c.Budget)
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - 5*time.Second; now.Add(left).Before(stop) {
			stop = now.Add(left)
		}
	}
	var rep Report
	defer func() { r.record(rep) }()

	mark, err := r.c.Store.LoadMark(ctx)
	if err != nil && !errors.Is(err, job.ErrNotFound) {
		return rep, fmt.Errorf("redeliver: load mark: %w", err)
	}
	oldest := now.Add(-r.c.Window)
	rd := r.read(ctx, &rep, mark, oldest, stop)
	// The deliveries earlier passes could not ask, unless this read found
	// a newer entry of their GUID (that one decides).
	for _, d := range mark.Retry {
		if id, ok := rd.latest[d.GUID]; ok && id >= d.ID {
			continue // this pass read it again, or a newer entry of its GUID
		}
		if d.DeliveredAt.Before(oldest) {
			// Dropped before, silently: a job lost with no alarm.
			rep.Expired++
			r.c.Log.Warn("redeliver: a failed delivery aged out of the window before it could be redelivered",
				"delivery_id", d.GUID, "log_id", d.ID, "action", d.Action, "delivered_at", d.DeliveredAt, "window", r.c.Window)
			continue
		}
		rd.candidates = append(rd.candidates, ghapp.HookDelivery{ID: d.ID, GUID: d.GUID, Action: d.Action,
			DeliveredAt: d.DeliveredAt, Event: EventWorkflowJob})
	}
	// Oldest first: the order GitHub first sent them.
	slices.SortFunc(rd.candidates, func(a, b ghapp.HookDelivery) int { return cmp.Compare(a.ID, b.ID) })
	var retry []job.DeliveryRef
	for _, d := range rd.candidates {
		if rep.Stopped != StopRateLimit && rep.Stopped != StopAskRefused {
			if why := r.shouldStop(stop); why != "" {
				rep.Stopped = why
			}
		}
		if rep.Stopped == StopReadError || rep.Stopped == "" {
			if r.redeliver(ctx, &rep, d, now) {
				continue
			}
		}
		// Not asked (stopped, a failed count write, a refused
		// redelivery): the next pass asks it again. Past the list's
		// bound, the read's mark stays below it, so a later read reaches
		// it again.
		if len(retry) < maxRetry {
			retry = append(retry, job.DeliveryRef{ID: d.ID, GUID: d.GUID, Action: d.Action, DeliveredAt: d.DeliveredAt})
		} else if d.ID-1 < rd.top.ID {
			rd.top = job.DeliveryMark{ID: d.ID - 1, DeliveredAt: d.DeliveredAt}
		}
	}
	next := job.DeliveryMark{ID: mark.ID, DeliveredAt: mark.DeliveredAt, Retry: retry}
	switch {
	case rd.next != "":
		next.Resume = job.DeliveryResume{Cursor: rd.next, Top: rd.top.ID, TopAt: rd.top.DeliveredAt, Redelivered: rd.redelivered}
	case rd.top.ID > mark.ID:
		next.ID, next.DeliveredAt = rd.top.ID, rd.top.DeliveredAt
	}
	if changed(mark, next) {
		if err := r.c.Store.SaveMark(ctx, next, now); err != nil {
			return rep, fmt.Errorf("redeliver: save mark: %w", err)
		}
		rep.Mark = next
	}
	// Not one page read: the pass could not run (a bad App key, GitHub
	// down). An error, so that the function's Errors metric and its alarm
	// say so; a read that got somewhere is progress.
	if rd.err != nil && rep.Pages == 0 {
		return rep, fmt.Errorf("redeliver: the delivery log could not be read: %w", rd.err)
	}
	if rep.askErr != nil {
		// Every ask would meet it until someone mends the App or the way
		// to GitHub; the deliveries wait, carried. An error, as above.
		return rep, fmt.Errorf("redeliver: asking GitHub to redeliver failed (%d carried to the next pass): %w", len(retry), rep.askErr)
	}
	return rep, nil
}

// changed reports whether next says more than the stored mark.
func changed(stored, next job.DeliveryMark) bool {
	return next.ID != stored.ID || next.Resume.Cursor != stored.Resume.Cursor || next.Resume.Top != stored.Resume.Top ||
		len(next.Resume.Redelivered) != len(stored.Resume.Redelivered) ||
		!slices.EqualFunc(next.Retry, stored.Retry, func(a, b job.DeliveryRef) bool { return a.ID == b.ID })
}

// maxRetry bounds the deliveries carried to the next pass (about 80 bytes
// each in the mark's item); past it, the mark holds below them instead.
const maxRetry = 1000

// maxRedelivered bounds the GUIDs a resumable read carries (36 bytes
// each): past it, an older failed entry of a GUID already redelivered may
// be asked once more (an attempt, and a duplicate the webhook refuses).
const maxRedelivered = 2000

// reading is what one read found.
type reading struct {
	// candidates are the failed workflow_job GUIDs' latest deliveries,
	// newest first.
	candidates []ghapp.HookDelivery
	// top is the mark the read saves when it ends (so far: its newest
	// entry).
	top job.DeliveryMark
	// next is the cursor of the page to read next when the read stopped
	// part-way ("": it ended, or it stopped before its first page).
	next string
	// redelivered: GUIDs of the redelivery entries read, carried with next.
	redelivered []string
	// err is the failure that stopped the read, when it was one.
	err error
	// latest: the id of the newest entry of each GUID this pass read (the
	// GUIDs carried from earlier passes of the read are not in it: their
	// entry may be the one a retry carries).
	latest map[string]int64
}

// read pages through the log down to the mark or the window's edge: from
// the newest entry, or from where the stored read stopped. A failed page
// (any error) or a stop ends it with the cursor of the page not read, so
// the next pass goes on from there.
func (r *Redeliverer) read(ctx context.Context, rep *Report, mark job.DeliveryMark, oldest, stop time.Time) reading {
	seen := map[string]bool{}
	rd := reading{top: job.DeliveryMark{ID: mark.ID, DeliveredAt: mark.DeliveredAt}, latest: map[string]int64{}}
	cursor := ""
	if mark.Resuming() {
		cursor = mark.Resume.Cursor
		rd.top = job.DeliveryMark{ID: mark.Resume.Top, DeliveredAt: mark.Resume.TopAt}
		rd.redelivered = slices.Clone(mark.Resume.Redelivered)
		for _, g := range rd.redelivered {
			seen[g] = true
		}
	}
	for {
		if why := r.shouldStop(stop); why != "" {
			rep.Stopped = why
			rd.next = cursor
			return rd
		}
		page, err := r.c.GitHub.ListHookDeliveries(ctx, cursor, r.c.PerPage)
		if err != nil {
			f := failure.Classify(err)
			switch {
			case f.Class == failure.RateLimit:
				rep.Stopped = StopRateLimit
			case f.Class == failure.NonRetryable && cursor != "" && rep.Pages == 0 && mark.Resuming():
				// GitHub refuses the stored cursor itself: start the read
				// again from the newest entry (a read is never lost).
				r.c.Log.Warn("redeliver: stored cursor refused, reading from the newest entry", "class", f.Class.String(), "error", err.Error())
				mark.Resume = job.DeliveryResume{}
				return r.read(ctx, rep, mark, oldest, stop)
			default:
				rep.Stopped = StopReadError
				rd.err = err
			}
			r.c.Log.Warn("redeliver: delivery log read stopped", "stopped", rep.Stopped, "class", f.Class.String(),
				"pages", rep.Pages, "error", err.Error())
			rd.next = cursor
			return rd
		}
		rep.Pages++
		for i, d := range page.Deliveries {
			if d.ID <= mark.ID || d.DeliveredAt.Before(oldest) {
				if d.ID > mark.ID && mark.ID > 0 {
					r.missed(ctx, rep, page, i, mark, seen, rd.latest, stop)
					// The mark moves past what was reported: the next pass
					// reports it again only if it is read again.
					if d.ID > rd.top.ID {
						rd.top = job.DeliveryMark{ID: d.ID, DeliveredAt: d.DeliveredAt}
					}
				}
				rd.next = ""
				return rd // read before, or past the window: so is everything after
			}
			rep.Read++
			if d.ID > rd.top.ID {
				rd.top = job.DeliveryMark{ID: d.ID, DeliveredAt: d.DeliveredAt}
			}
			if _, ok := rd.latest[d.GUID]; !ok {
				rd.latest[d.GUID] = d.ID
			}
			if seen[d.GUID] {
				continue // an older delivery of a GUID already decided
			}
			seen[d.GUID] = true
			if d.Redelivery && len(rd.redelivered) < maxRedelivered {
				rd.redelivered = append(rd.redelivered, d.GUID)
			}
			if d.Event == EventWorkflowJob && !d.OK() {
				rd.candidates = append(rd.candidates, d)
				rep.Failed++
			}
		}
		if page.Next == "" || len(page.Deliveries) == 0 {
			rd.next = ""
			return rd
		}
		cursor = page.Next
	}
}

// missed reports the deliveries above the mark that aged past the window
// before any pass read them (the redeliverer stopped or rate-limited
// longer than the window): nothing will redeliver them now. The failed
// workflow_job GUIDs on the rest of page (from entry i) count as Expired,
// each logged; older entries above the mark on later pages are not read
// (each a call, for nothing that can be redelivered), so when the page
// does not reach the mark the pass says there is a gap (Report.Gap), which
// pages as an expiry does.
func (r *Redeliverer) missed(ctx context.Context, rep *Report, page ghapp.DeliveryPage, i int, mark job.DeliveryMark, seen map[string]bool, latest map[string]int64, stop time.Time) {
	reached := false
	for _, d := range page.Deliveries[i:] {
		if d.ID <= mark.ID {
			reached = true
			break
		}
		if _, ok := latest[d.GUID]; !ok {
			latest[d.GUID] = d.ID // a carried retry of this GUID is decided here
		}
		if seen[d.GUID] {
			continue
		}
		seen[d.GUID] = true
		if d.Event == EventWorkflowJob && !d.OK() {
			rep.Expired++
			r.c.Log.Warn("redeliver: a failed delivery aged out of the window before any pass read it",
				"delivery_id", d.GUID, "log_id", d.ID, "action", d.Action, "delivered_at", d.DeliveredAt, "window", r.c.Window)
		}
	}
	if !reached && page.Next != "" && r.beyond(ctx, rep, page.Next, mark, stop) {
		rep.Gap = true
		r.c.Log.Warn("redeliver: deliveries between the mark and the window's edge were never read: failed ones among them will not be redelivered",
			"mark", mark.ID, "oldest_read", page.Deliveries[len(page.Deliveries)-1].ID, "window", r.c.Window)
	}
}

// beyond reports whether the log page at cursor starts above the mark:
// entries above it were left unread. One entry is asked for (a page's end
// often meets the mark), within the pass's rate floor and budget; a read
// that fails or may not be made counts as a gap, the safe side.
func (r *Redeliverer) beyond(ctx context.Context, rep *Report, cursor string, mark job.DeliveryMark, stop time.Time) bool {
	// Not below the rate floor or past the budget: no call, and the gap is
	// reported (the safe side).
	if why := r.shouldStop(stop); why != "" {
		rep.Stopped = why
		return true
	}
	next, err := r.c.GitHub.ListHookDeliveries(ctx, cursor, 1)
	if err != nil {
		if failure.Classify(err).Class == failure.RateLimit {
			rep.Stopped = StopRateLimit // the carried retries wait too
		}
		return true
	}
	return len(next.Deliveries) > 0 && next.Deliveries[0].ID > mark.ID
}

// redeliver counts an attempt for d's GUID, then asks GitHub. It reports
// whether d is settled for this pass: asked, or its attempts spent.
func (r *Redeliverer) redeliver(ctx context.Context, rep *Report, d ghapp.HookDelivery, now time.Time) bool {
	log := r.c.Log.With("delivery_id", d.GUID, "log_id", d.ID, "event", d.Event, "action", d.Action,
		"status_code", d.StatusCode, "delivered_at", d.DeliveredAt)
	if c, err := r.c.Store.Redeliveries(ctx, d.GUID, now); err != nil {
		// Asked without the spacing: the count still bounds it.
		log.Warn("redeliver: read attempt count", "error", err.Error())
	} else if c.Attempts > 0 && c.Attempts < r.c.MaxAttempts {
		if next := c.AskedAt.Add(r.spacing(c.Attempts)); now.Before(next) {
			rep.Waiting++
			log.Info("redeliver: waiting before asking again", "attempts", c.Attempts, "next_at", next)
			return false
		}
	} else if c.Attempts >= r.c.MaxAttempts && !outcomeOf(d, c) && now.Before(c.AskedAt.Add(r.c.Spacing)) {
		// d is not the last attempt's outcome (outcomeOf). GitHub answers
		// an ask 202 and redelivers later, and this pass read d again (the
		// pass that asked could not save its mark, say) before the outcome
		// was in the log. The outcome, a newer entry of the GUID, decides
		// when a pass reads it; d is carried meanwhile, for Spacing at
		// most (an ask GitHub refused for good has no outcome). Judged
		// spent here, it paged for a job whose redelivery was on its way.
		rep.Waiting++
		log.Info("redeliver: the last attempt's outcome is not in the log yet", "attempts", c.Attempts, "asked_at", c.AskedAt, "asked_log_id", c.AskedID)
		return false
	}
	n, err := r.c.Store.CountRedelivery(ctx, d.GUID, d.ID, r.c.MaxAttempts, now)
	if errors.Is(err, job.ErrAttemptsSpent) {
		rep.Spent++
		log.Warn("redeliver: attempts spent, delivery left", "max_attempts", r.c.MaxAttempts)
		return true
	}
	if err != nil {
		rep.Errors++
		log.Error("redeliver: count attempt", "error", err.Error())
		return false
	}
	log = log.With("attempt", n)
	if err := r.c.GitHub.RedeliverHookDelivery(ctx, d.ID); err != nil {
		f := failure.Classify(err)
		switch {
		case f.Class == failure.RateLimit:
			rep.Stopped = StopRateLimit
		case f.GitHub && (f.Status == http.StatusUnauthorized || f.Status == http.StatusForbidden):
			rep.Errors++
			rep.Stopped, rep.askErr = StopAskRefused, err
		case f.Class == failure.Network || f.Class == failure.ServerSide:
			// GitHub did nothing: unreached, or failing (a 5xx). One is a
			// blip; maxUnreached in a row is GitHub down for every ask,
			// each refunded, and asking the rest would spend the App's
			// budget (the claimers' token exchanges draw on it) to the
			// floor on every pass of the outage.
			rep.Errors++
			if rep.unreached++; rep.unreached >= maxUnreached {
				rep.Stopped, rep.askErr = StopAskRefused, err
			}
		default:
			// GitHub's refusal of this delivery, or a failure of ours:
			// the next ask may pass.
			rep.Errors++
			if f.GitHub {
				rep.unreached = 0 // GitHub answered: the failures were not in a row
			}
		}
		log.Warn("redeliver: redelivery refused", "class", f.Class.String(), "error", err.Error())
		if !refusedForGood(f) {
			if rerr := r.c.Store.RefundRedelivery(ctx, d.GUID, n); rerr != nil {
				log.Warn("redeliver: give back the attempt", "error", rerr.Error())
			}
		}
		return false
	}
	rep.unreached = 0
	rep.Redelivered++
	log.Info("redeliver: redelivery asked")
	return true
}

// outcomeOf reports whether d may be the outcome of the attempt c counted
// last. The outcome is a new entry of the log, above the entry the attempt
// was asked for (c.AskedID): an entry at or below it is not, however close
// to the ask it was delivered and whatever GitHub's clock says (judged by
// delivered_at against the ask's time, a failed delivery asked within a
// minute of its delivery was judged spent while its redelivery was on its
// way, and with GitHub's clock behind ours the outcome itself was held for
// Spacing). A count that does not know the id (written before it was kept)
// falls back to the times.
func outcomeOf(d ghapp.HookDelivery, c job.RedeliveryCount) bool {
	if c.AskedID > 0 {
		return d.ID > c.AskedID
	}
	return !d.DeliveredAt.Before(c.AskedAt.Add(-outcomeSkew))
}

// outcomeSkew is how much earlier than its ask, by the redeliverer's
// clock, the delivered_at of the ask's outcome may read: GitHub's clock
// against ours, and delivered_at's whole seconds. Only for counts that do
// not know the id asked (outcomeOf).
const outcomeSkew = time.Minute

// maxUnreached is how many asks in a row may find no GitHub (a failed
// connection, a 408, a 5xx) before a pass stops (StopAskRefused): one such
// failure is a blip, and stopping at it let a steady rate of blips cap how
// fast a backlog drains, some of it ageing out unasked.
const maxUnreached = 3

// refusedForGood reports whether a failed ask for a redelivery was
// GitHub's answer about that delivery (a 4xx other than 401, 403 and 429:
// 400, 404, 409, 410, 422, 451…), which keeps the attempt it counted, so
// that asking it again is bounded by MaxAttempts. Any other failure gives
// the attempt back, since GitHub redelivered nothing: a rate limit or a
// 5xx, a connection that failed, and a 401 or 403 (the App's key rotated
// on GitHub and not yet in Secrets Manager, its permission withdrawn),
// which refuses every ask alike until the operator mends it. Kept, those
// spent a failed delivery's attempts while the endpoint was down, and its
// job was never redelivered once both were mended. A failure that reached
// GitHub and was lost on the way back may have redelivered it: asking
// again is a duplicate delivery, which the webhook answers without a
// second claim.
func refusedForGood(f failure.Failure) bool {
	if !f.GitHub || f.Class == failure.RateLimit || f.Class == failure.Network || f.Status < 400 || f.Status >= 500 {
		return false // a 408 is GitHub's timeout: nothing redelivered
	}
	switch f.Status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return false
	}
	return true
}

// spacing is the least time after a GUID's k-th attempt before the next.
func (r *Redeliverer) spacing(k int) time.Duration {
	return r.c.Spacing << min(k-1, 20)
}

// shouldStop says why the pass must not make another call ("" when it may).
func (r *Redeliverer) shouldStop(stop time.Time) string {
	if !r.c.Now().Before(stop) {
		return StopBudget
	}
	rd, ok := r.c.Rate()
	if !ok {
		return ""
	}
	if rd.Blocked(r.c.Now()) {
		return StopRateLimit
	}
	if rd.Known() && rd.Remaining < r.c.MinRemaining && rd.ResetAt.After(r.c.Now()) {
		return StopRateFloor
	}
	return ""
}

func (r *Redeliverer) record(rep Report) {
	r.c.Metrics.Add("DeliveriesRead", float64(rep.Read))
	r.c.Metrics.Add("DeliveriesFailed", float64(rep.Failed))
	r.c.Metrics.Add("Redelivered", float64(rep.Redelivered))
	r.c.Metrics.Add("RedeliveryAttemptsSpent", float64(rep.Spent))
	r.c.Metrics.Add("RedeliveryExpired", float64(rep.Expired))
	if rep.Gap {
		r.c.Metrics.Add("RedeliveryGap", 1)
	}
	r.c.Metrics.Add("RedeliveryWaiting", float64(rep.Waiting))
	r.c.Metrics.Add("RedeliveryErrors", float64(rep.Errors))
	if rep.Stopped != "" {
		r.c.Metrics.Add("RedeliveryPassStopped", 1)
	}
	r.c.Metrics.Flush()
	r.c.Log.Info("redeliver: pass", "pages", rep.Pages, "read", rep.Read, "failed", rep.Failed,
		"redelivered", rep.Redelivered, "spent", rep.Spent, "expired", rep.Expired, "errors", rep.Errors, "stopped", rep.Stopped, "mark", rep.Mark.ID)
}

// AppBudget holds the App budget's latest reading: a ratelimit.Observer for
// the ratelimit.Transport in front of the App client, read through
// Config.Rate (AppBudget.Reading). The App is one budget, read by one pass
// at a time, so the last answer wins (readings taken in the same
// millisecond included, which ratelimit.Tracker would keep the first of).
// A secondary limit's block (a 429, or a 403 with Retry-After) is kept
// beside it, the later block winning, and outlives the pass in a warm
// process: the next passes make no call until it ends (GitHub may ban an
// integration that goes on calling).
type AppBudget struct {
	mu sync.Mutex
	r  ratelimit.Reading
}

var _ ratelimit.Observer = (*AppBudget)(nil)

// Observe keeps r's budget, when it carries one, and the later of the
// kept block and r's.
func (b *AppBudget) Observe(_ int64, r ratelimit.Reading) {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, length := b.r.BlockedUntil, b.r.BlockedFor
	if r.BlockedUntil.After(until) {
		until, length = r.BlockedUntil, r.BlockedFor
	}
	if r.Known() {
		b.r = r
	}
	b.r.BlockedUntil, b.r.BlockedFor = until, length
}

// Reading returns the latest reading (ok false: no budget and no block
// seen yet).
func (b *AppBudget) Reading() (ratelimit.Reading, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.r, b.r.Known() || !b.r.BlockedUntil.IsZero()
}
