package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// Store is the part of the job store the webhook writes through, in the
// domain's types (*store.Store over DynamoDB in production, *mem.Store in
// the flow tests). CreateJob refuses a job already recorded with a
// *job.ConflictError; MarkDone is an upsert that returns job.ErrTerminal
// when the record was terminal already (with, for a done record, the state
// it had before it became done, so a redelivery decides as the first did). Get and Swap serve only the
// rare taken-runner path (see the package doc): Swap moves a record read
// as claimed back to queued (a new attempt with a runner name of its own,
// counted toward neither the replacement cap nor max age), conditional on
// the version read, and refuses with a *job.ConflictError carrying the
// record as it is now. Recheck serves only a queued delivery for a claimed
// job the reclaimer found held at GitHub (waits > 0): its next look moves
// to now (job.CheckSkipped), conditional on the state and version read.
type Store interface {
	CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error)
	MarkDone(ctx context.Context, d job.Report, now time.Time) (job.State, error)
	Get(ctx context.Context, id int64) (job.Record, error)
	Swap(ctx context.Context, read job.Record, due time.Time, reason string, now time.Time) (job.Record, error)
	Recheck(ctx context.Context, read job.Record, due time.Time, check job.Check, now time.Time) (job.Record, error)
}

// Queue sends claim messages (*queue.Queue in production).
type Queue interface {
	Send(ctx context.Context, m job.Message, delay time.Duration) error
}

// Defaults of Config.
const (
	// DefaultMaxBody caps a delivery's body. GitHub caps payloads at 25 MB,
	// but a workflow_job payload is a few KB.
	DefaultMaxBody = 1 << 20
	// DefaultBudget leaves GitHub's 10 s delivery timeout a 2 s margin.
	DefaultBudget = 8 * time.Second
	// AttemptTimeout bounds each AWS request attempt of a delivery (the
	// wiring's HTTP client): a stalled attempt is retried within the
	// budget instead of using it up. DynamoDB and SQS answer in
	// milliseconds.
	AttemptTimeout = 2 * time.Second
)

// Config is the handler's settings and collaborators. Secrets, Pools,
// Store and Queue are required; every other zero value takes its default
// (New fills them, in one place).
type Config struct {
	// Store records jobs; Queue carries their claim messages.
	Store Store
	Queue Queue
	// Now is the clock, read once per delivery (time.Now when nil).
	Now clock.Func
	// Logger gets one line per decision (discarded when nil).
	Logger *slog.Logger
	// Metrics makes each delivery's decision line an EMF document, and
	// writes the metrics of a line the logger's level drops to its own
	// writer (the logger's stream, stdout); none when nil.
	Metrics *obs.Metrics
	// Secrets are the webhook secrets accepted at once (rotation); at least
	// one non-empty secret is required.
	Secrets [][]byte
	// CurrentSecrets, when set, replaces Secrets: it is asked on every
	// delivery (through a cache with a TTL in production), so a rotation
	// or the first secret written by `make app` is used without a cold
	// start. An error whose NotSet() is true (no secret yet) answers 503
	// with the message its NotSetReason() calls for (ErrSecretNotSet,
	// ErrSecretDeleted, ErrSecretEmpty); any other error 503 "unavailable".
	CurrentSecrets func(ctx context.Context) ([][]byte, error)
	// Pools are the runner pools, in match order.
	Pools []pool.Pool
	// AllowedOwners restricts claims to these repository owners
	// (case-insensitive); empty allows any owner.
	AllowedOwners []string
	// MaxBodyBytes caps the decoded body; 0 means DefaultMaxBody.
	MaxBodyBytes int
	// Budget bounds the whole delivery; 0 means DefaultBudget.
	Budget time.Duration
	// MaxAge: a job failing longer than this whose runner another job
	// took is not sent back but left to the reclaimer, which abandons it
	// (MAX_AGE); 0 means job.DefaultMaxAge.
	MaxAge time.Duration
}

// Handler answers GitHub webhook deliveries. It is safe for concurrent use.
type Handler struct {
	cfg Config
}

// New validates cfg, fills its defaults and returns a handler.
func New(cfg Config) (*Handler, error) {
	if !anyUsable(cfg.Secrets) && cfg.CurrentSecrets == nil {
		return nil, errors.New("webhook: Config.Secrets has no usable secret and no Config.CurrentSecrets: every delivery would be refused")
	}
	if len(cfg.Pools) == 0 {
		return nil, errors.New("webhook: Config.Pools is required")
	}
	switch {
	case cfg.Store == nil:
		return nil, errors.New("webhook: Config.Store is required")
	case cfg.Queue == nil:
		return nil, errors.New("webhook: Config.Queue is required")
	}
	cfg.Now = clock.Or(cfg.Now)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBody
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = job.DefaultMaxAge
	}
	return &Handler{cfg: cfg}, nil
}

// Reply is the JSON body of every answer.
type Reply struct {
	// Status is "ok" (ping), "accepted", "ignored", "duplicate" or "error".
	Status string `json:"status"`
	// Message says why, for the "Recent Deliveries" page of the GitHub App.
	// 5xx messages never carry internal error text.
	Message string `json:"message,omitempty"`
}

// Statuses of a Reply.
const (
	StatusOK        = "ok"
	StatusAccepted  = "accepted"
	StatusIgnored   = "ignored"
	StatusDuplicate = "duplicate"
	StatusError     = "error"
)

// delivery is one request in flight: what the log line of its decision says.
type delivery struct {
	id     string
	event  string
	action Action
	jobID  int64
	// created is set when the delivery recorded a new job, toRunner when
	// it says how long its job waited for a runner (metrics.go).
	created  bool
	toRunner time.Duration
	// refused is why the pools refuse the job now, when its report is
	// applied anyway because a runner of ours has it (ranOnOurs).
	refused string
	// refusedRan is set when such a job ran on the runner of another job
	// of ours (metricRefusedJobRan).
	refusedRan bool
}

// Handle answers one delivery. It never returns an error: every outcome is
// an HTTP answer, since a Lambda error would reach GitHub as an opaque 502.
// API Gateway HTTP API (payload format 2.0) events have the same JSON shape
// and decode into the same struct, so both front doors work.
func (h *Handler) Handle(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Budget)
	defer cancel()
	now := h.cfg.Now()
	hdr := lowerKeys(req.Headers)
	d := &delivery{id: hdr["x-github-delivery"], event: hdr["x-github-event"]}

	if m := req.RequestContext.HTTP.Method; !strings.EqualFold(m, http.MethodPost) {
		resp := h.reject(ctx, d, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("method %s not allowed: GitHub delivers with POST", m))
		resp.Headers["allow"] = http.MethodPost
		return resp, nil
	}
	body, status, msg := h.body(req)
	if status != 0 {
		return h.reject(ctx, d, status, "bad_body", msg), nil
	}
	secrets, err := h.secrets(ctx)
	if err != nil {
		return h.noSecret(ctx, d, err), nil
	}
	sig := hdr["x-hub-signature-256"]
	if sig == "" && hdr["x-hub-signature"] != "" {
		err = ErrSignatureSHA1
	} else {
		err = Verify(body, sig, secrets)
	}
	if err != nil {
		return h.reject(ctx, d, http.StatusUnauthorized, "bad_signature", err.Error()), nil
	}
	if d.event == "" {
		return h.reject(ctx, d, http.StatusBadRequest, "bad_request", "X-GitHub-Event header is required"), nil
	}
	if d.id == "" {
		return h.reject(ctx, d, http.StatusBadRequest, "bad_request", "X-GitHub-Delivery header is required"), nil
	}

	switch d.event {
	case "ping":
		return h.answer(ctx, d, http.StatusOK, StatusOK, "pong", "ping"), nil
	case "workflow_job":
	default:
		return h.answer(ctx, d, http.StatusAccepted, StatusIgnored, fmt.Sprintf("event %q is not handled", d.event), "ignored_event"), nil
	}

	j, err := Parse(body)
	if errors.Is(err, ErrUnknownAction) {
		// GitHub adds actions without notice (it added waiting). A 4xx is
		// a failed delivery in the App's log, which the redeliverer asks
		// GitHub to send again, up to its attempts per GUID, for every
		// such delivery: App budget and RedeliveryAttemptsSpentAlarm
		// spent on an answer no redelivery changes. Nothing is written,
		// so nothing is guessed; the warning names the action.
		h.decided(ctx, d, slog.LevelWarn, "delivery of an unknown action ignored",
			h.attrs(d, slog.String("outcome", OutcomeUnknownAction), slog.Int("status", http.StatusAccepted), slog.String(obs.KeyReason, err.Error())))
		return reply(http.StatusAccepted, Reply{Status: StatusIgnored, Message: strings.TrimPrefix(err.Error(), "payload: ")}), nil
	}
	if err != nil {
		return h.reject(ctx, d, http.StatusBadRequest, "bad_payload", err.Error()), nil
	}
	d.action, d.jobID = j.Action, j.JobID

	// A job we do not serve is answered before the table is touched: the
	// decision costs no API call, so it is made again on every delivery,
	// and an operator who fixes RUNNER_POOLS or ALLOWED_OWNERS and clicks
	// Redeliver (same GUID) gets the job claimed instead of "duplicate".
	// in_progress and completed of such a job (most of them are
	// GitHub-hosted jobs) write nothing either, unless they name a runner
	// of ours (ranOnOurs).
	if j.Action == ActionWaiting { // GitHub sends queued once the environment allows it.
		return h.answer(ctx, d, http.StatusOK, StatusIgnored, "waiting: the job is claimed when it is queued", "skip_waiting"), nil
	}
	p, why := h.decide(j)
	if why != "" {
		q, ours := h.ranOnOurs(j)
		if !ours {
			return h.answer(ctx, d, http.StatusOK, StatusIgnored, why, "skip", slog.String(obs.KeyReason, why)), nil
		}
		p, d.refused = q, why
	}
	if j.Action == ActionQueued {
		return h.queued(ctx, d, j, p, now), nil
	}
	return h.done(ctx, d, j, p, now), nil // in_progress, completed
}

// queued records a job pool p serves and enqueues its claim: two requests.
// The record is the dedup key: a job already recorded (a redelivery, a new
// GUID for the same job, or in_progress got here first) is refused by the
// conditional put itself, and nothing is sent.
func (h *Handler) queued(ctx context.Context, d *delivery, j Job, p pool.Pool, now time.Time) events.LambdaFunctionURLResponse {
	rec, err := h.cfg.Store.CreateJob(ctx, job.Record{
		JobID: j.JobID, RunID: j.RunID, Repo: j.Repo, InstallationID: j.InstallationID,
		Labels: j.Labels, Pool: p.Name, Public: j.Public, UserOwned: j.UserOwned,
	}, now)
	if errors.Is(err, job.ErrConflict) {
		var attrs []slog.Attr
		outcome := "duplicate_job"
		if cur, ok := job.CurrentOf(err); ok {
			attrs = append(attrs, slog.String("state", string(cur.State)), slog.Int64("version", cur.Version))
			if held(cur, now) {
				outcome = h.wake(ctx, d, cur, now)
			}
		}
		return h.answer(ctx, d, http.StatusOK, StatusDuplicate, fmt.Sprintf("job %d already recorded", j.JobID), outcome, attrs...)
	}
	if err != nil {
		return h.fail(ctx, d, "create_failed", err)
	}
	// From here the record is durable: whatever fails next, the reclaimer
	// finishes the job's hand-off (outbox), so the answer is 2xx.
	outcome := "enqueued"
	d.created = true
	if err := h.cfg.Queue.Send(ctx, job.Message{JobID: rec.JobID, Version: rec.Version, Attempt: 0}, 0); err != nil {
		outcome = "pending_send_failed"
		h.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "send failed; the record stays pending for the reclaimer",
			h.attrs(d, slog.String("outcome", outcome), slog.String("error", err.Error()))...)
	}
	return h.answer(ctx, d, http.StatusAccepted, StatusAccepted, fmt.Sprintf("job %d accepted for pool %s", j.JobID, p.Name), outcome, slog.String("pool", p.Name))
}

// held reports whether cur is a claimed job the reclaimer last found held
// at GitHub (waiting for an environment's reviewers, pending) and looks at
// again only later: its looks back off to one an hour.
func held(cur job.Record, now time.Time) bool {
	return cur.State == job.Claimed && cur.Waits > 0 && cur.SweepAt > job.Millis(now)
}

// wake brings the reclaimer's next look at a held job to now: GitHub
// queues a job again once its reviewers approve it (queued, waiting,
// queued), and its runner's machine may have powered off in the wait.
// One conditional write, on the rare path of a queued delivery for a
// held job; a refusal (the record moved on) or a failure leaves the look
// where it was (it comes within the back-off's hour): the answer is the
// duplicate's either way, since nothing here is lost.
func (h *Handler) wake(ctx context.Context, d *delivery, cur job.Record, now time.Time) string {
	if _, err := h.cfg.Store.Recheck(ctx, cur, now, job.CheckSkipped, now); err != nil {
		if !errors.Is(err, job.ErrConflict) {
			h.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "wake of a held job failed; the reclaimer looks at its next interval",
				h.attrs(d, slog.String("error", err.Error()))...)
		}
		return "duplicate_job"
	}
	return OutcomeHeldWoken
}

// OutcomeUnknownAction: a workflow_job delivery whose action ghclaim does
// not know, answered 202 ignored (logged at warn) and not acted on.
const OutcomeUnknownAction = "ignored_action"

// OutcomeHeldWoken: a queued delivery for a claimed job held at GitHub
// brought the reclaimer's next look at it to now.
const OutcomeHeldWoken = "held_job_woken"

// done marks the record of a job pool p serves done: one conditional upsert.
func (h *Handler) done(ctx context.Context, d *delivery, j Job, p pool.Pool, now time.Time) events.LambdaFunctionURLResponse {
	// A job the pools refuse now is marked done only if we recorded it:
	// with no record, no runner of ours was made for it (a claim records
	// the job before it registers a runner), and a runner named like ours
	// is somebody else's (another stack's with the same pool names, say).
	prev, err := h.cfg.Store.MarkDone(ctx, job.Report{
		JobID: j.JobID, RunID: j.RunID, Repo: j.Repo, InstallationID: j.InstallationID,
		Labels: j.Labels, Pool: p.Name, RunnerName: j.RunnerName, Recorded: d.refused != "",
	}, now)
	outcome := "done"
	d.toRunner = toRunner(j)
	unrecorded := errors.Is(err, job.ErrNotFound)
	switch {
	case unrecorded:
		outcome = OutcomeRefusedUnrecorded
	case errors.Is(err, job.ErrTerminal):
		outcome = "already_terminal"
	case err != nil:
		return h.fail(ctx, d, "mark_done_failed", err)
	case prev == "":
		outcome = "done_created"
	}
	if taken, isTaken := takenFrom(h.cfg.Pools, j); isTaken {
		// B claimed has a runner of its own booting (registered, its
		// machine started), now without a job: one that fits A's labels
		// will take A, as a burst's runners take its jobs in whatever
		// order they boot. Sent back now, A would get a spare runner and
		// machine; if that runner never takes it, the liveness check does
		// as for any claimed job.
		var spare *pool.Pool
		if prev == job.Claimed && d.refused == "" {
			// (A job the pools refuse now has its own runner in its
			// recorded pool, which p, the pool of the runner it ran on,
			// need not be: A is sent back rather than wait for it.)
			spare = &p
		}
		if ours := h.replaceTaken(ctx, d, taken, j.RunnerName, j.Repo, spare, now); ours && d.refused != "" {
			// A runner of ours, made for job A (its record waits for
			// exactly that runner, registered where this job could take
			// it), took a job no pool of ours would claim, a public
			// repository's perhaps. GitHub hands a job to any runner
			// whose labels and runner group fit: the group is the guard,
			// and it let this one in.
			d.refusedRan = true
			h.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "a runner of ours took a job the pools refuse", h.attrs(d,
				slog.String("runner_name", j.RunnerName), slog.String("pool", p.Name), slog.String("refused_now", d.refused),
				slog.String("hint", fmt.Sprintf("restrict runner group %d's repository access (public repositories off) to the repositories pool %s serves",
					p.RunnerGroupID, p.Name)))...)
		}
	}
	attrs := []slog.Attr{slog.String("pool", p.Name), slog.String("previous_state", string(prev)), slog.String("runner_name", j.RunnerName)}
	if d.refused != "" {
		attrs = append(attrs, slog.String("refused_now", d.refused))
	}
	if unrecorded {
		why := fmt.Sprintf("job %d is not ours (%s) and not recorded: runner %s was not made for it by us", j.JobID, d.refused, j.RunnerName)
		return h.answer(ctx, d, http.StatusOK, StatusIgnored, why, outcome, attrs...)
	}
	return h.answer(ctx, d, http.StatusAccepted, StatusAccepted, fmt.Sprintf("job %d is %s", j.JobID, j.Action), outcome, attrs...)
}

// OutcomeRefusedUnrecorded: an in_progress or completed of a job the pools
// refuse, naming a runner like ours, for a job we never recorded: nothing
// written (that runner is not ours).
const OutcomeRefusedUnrecorded = "refused_unrecorded"

// ranOnOurs reports whether an in_progress or completed delivery of a job
// the pools refuse now (decide) names a runner of ours, and the pool that
// runner was made for: the job was ours when it was queued (the pool then
// allowed its public repository, a user's repository at its scope, its
// labels), and a runner of ours registered for it, or for another job
// of ours (takenFrom), has it. Skipped, its record stayed claimed, or
// queued with a claimer retrying it, until the maximum age abandoned a job
// that ran; and the job whose runner it took waited for the reclaimer.
// The owner allow-list is not overridden: ALLOWED_OWNERS bounds which
// accounts' deliveries touch the table at all, whatever runner they name.
// GitHub-hosted jobs, and other tools' runners, name no runner of ours:
// their deliveries still cost no request.
func (h *Handler) ranOnOurs(j Job) (pool.Pool, bool) {
	if (j.Action != ActionInProgress && j.Action != ActionCompleted) || !h.ownerAllowed(j) {
		return pool.Pool{}, false
	}
	r, ok := job.ParseRunnerName(j.RunnerName, poolNames(h.cfg.Pools)...)
	if !ok {
		return pool.Pool{}, false
	}
	return pool.Find(h.cfg.Pools, r.Pool)
}

// takenFrom reports the job whose runner took j: j is in progress on a
// runner of ours (any attempt's name, job.RunnerNameAt) made for job A ≠ j.
func takenFrom(pools []pool.Pool, j Job) (int64, bool) {
	if j.Action != ActionInProgress {
		return 0, false
	}
	r, ok := job.ParseRunnerName(j.RunnerName, poolNames(pools)...)
	if !ok || r.JobID == j.JobID {
		return 0, false
	}
	return r.JobID, true
}

// couldTake reports whether a job of repo could have been handed the
// runner claimed record rec waits for: a runner registered in a
// repository takes only that repository's jobs, one registered at the
// organisation only its repositories'. A runner_name is whatever its
// registrant chose: anyone who can register a runner where the App is
// installed can name one after our job A, and without this check every
// job it ran sent A back for a new runner and machine (a swap counts
// toward neither A's replacement cap nor its maximum age). The scope is
// the record's (where the claim registered it), else its pool's as
// configured, else unknown: then only the owner is held to.
func couldTake(pools []pool.Pool, rec job.Record, repo string) bool {
	scope := rec.Scope
	if p, ok := pool.Find(pools, rec.Pool); ok {
		scope = p.Where(rec.Scope)
	}
	if scope == pool.ScopeRepo {
		return strings.EqualFold(rec.Repo, repo)
	}
	owner, _, _ := strings.Cut(repo, "/")
	return strings.EqualFold(rec.Owner(), owner)
}

// poolNames are the pools' names: the prefixes of our runners' names.
func poolNames(pools []pool.Pool) []string {
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return names
}

// Outcomes of the taken-runner path, logged for job A (taken_from_job_id).
const (
	OutcomeRunnerTaken       = "runner_taken"        // A sent back for a new attempt
	OutcomeRunnerTakenLeft   = "runner_taken_left"   // A past max age: left to the reclaimer, which abandons it
	OutcomeRunnerTakenStale  = "runner_taken_stale"  // A no longer waits for that runner
	OutcomeRunnerTakenFailed = "runner_taken_failed" // left to the reclaimer's liveness check
	OutcomeRunnerSwapped     = "runner_swapped"      // A waits for the other job's own runner
)

// replaceTaken sends job A back for a new attempt: its runner (named by
// the delivery for another job) is at work on that job and will never take
// A. Only when A's record is claimed and waits for exactly that runner
// (its current attempt's name): a redelivery, or a runner of an older
// attempt, finds A moved on and does nothing. The take-back (Store.Swap)
// is conditional on the version read (a reclaimer or another delivery
// racing for A wins or loses cleanly) and counts nothing toward A's
// replacement cap or max age: the runner did the work of a job we serve,
// nothing failed (counted, a burst's runners taken by its older jobs used
// the newest job's replacements up and abandoned it with no runner
// coming). Then A's claim message is sent. A already failing past MaxAge
// is left claimed: the reclaimer's liveness check abandons it, with its
// metric and alarm. The taken runner and its machine are not touched:
// they run the other job. Every failure here leaves A to the reclaimer's
// liveness check, which finds the runner busy and does the same, so the
// delivery's answer never depends on it.
//
// spare is the other job's pool when that job's own runner is booting and
// left without a job (the other job was claimed): if that pool covers A's
// labels, A waits for that runner instead (runner_swapped). ours reports
// that the runner is A's (A's record waits for exactly it, registered
// where the delivery's job could take it), whatever was done about it.
func (h *Handler) replaceTaken(ctx context.Context, d *delivery, a int64, runner, repo string, spare *pool.Pool, now time.Time) (ours bool) {
	log := func(level slog.Level, outcome string, extra ...slog.Attr) {
		h.cfg.Logger.LogAttrs(ctx, level, "runner taken by another job", h.attrs(d, append([]slog.Attr{
			slog.String("outcome", outcome), slog.String("runner_name", runner), slog.Int64("taken_from_job_id", a)}, extra...)...)...)
	}
	rec, err := h.cfg.Store.Get(ctx, a)
	switch {
	case errors.Is(err, job.ErrNotFound):
		log(slog.LevelInfo, OutcomeRunnerTakenStale, slog.String(obs.KeyReason, "no record"))
		return
	case err != nil:
		log(slog.LevelWarn, OutcomeRunnerTakenFailed, slog.String("error", err.Error()))
		return
	case rec.State != job.Claimed || !strings.EqualFold(job.RunnerNameAt(rec.Pool, rec.JobID, rec.Replacements), runner):
		log(slog.LevelInfo, OutcomeRunnerTakenStale, slog.String(obs.KeyState, string(rec.State)),
			slog.String("record_runner_name", rec.RunnerName))
		return
	case !couldTake(h.cfg.Pools, rec, repo):
		log(slog.LevelWarn, OutcomeRunnerTakenStale, slog.String("repo", repo), slog.String("taken_from_repo", rec.Repo),
			slog.String(obs.KeyReason, "a job of "+repo+" cannot have taken the runner registered for job "+strconv.FormatInt(a, 10)+
				" in "+rec.Repo+": a runner named like it is not ours"))
		return
	}
	ours = true // A waits for exactly that runner, and this job could have taken it
	if spare != nil {
		// By the webhook's own rule too: the spare's pool may refuse A's
		// repository (public, or a user's at the organisation) whatever
		// its labels.
		_, fits := pool.Match([]pool.Pool{*spare}, rec.Labels)
		_, refused := pool.Serve([]pool.Pool{*spare}, spare.Labels, pool.Repository{FullName: rec.Repo, Public: rec.Public, UserOwned: rec.UserOwned})
		if fits && refused == "" {
			log(slog.LevelInfo, OutcomeRunnerSwapped, slog.String("spare_pool", spare.Name),
				slog.String(obs.KeyReason, "the other job's own runner is booting and fits this job"))
			return
		}
	}
	if rec.FirstFailureAt != 0 && now.Sub(job.FromMillis(rec.FirstFailureAt)) > h.cfg.MaxAge {
		log(slog.LevelWarn, OutcomeRunnerTakenLeft, slog.String(obs.KeyReason, "failing past max age "+h.cfg.MaxAge.String()+": the reclaimer abandons it"))
		return
	}
	why := "webhook: runner " + runner + " taken by job " + strconv.FormatInt(d.jobID, 10)
	next, err := h.cfg.Store.Swap(ctx, rec, now, why, now)
	switch {
	case errors.Is(err, job.ErrConflict):
		var attrs []slog.Attr
		if cur, ok := job.CurrentOf(err); ok {
			attrs = append(attrs, slog.String(obs.KeyState, string(cur.State)), slog.Int64(obs.KeyVersion, cur.Version))
		}
		log(slog.LevelInfo, OutcomeRunnerTakenStale, attrs...)
		return
	case err != nil:
		log(slog.LevelWarn, OutcomeRunnerTakenFailed, slog.String("error", err.Error()))
		return
	}
	attrs := []slog.Attr{slog.Int64(obs.KeyVersion, next.Version), slog.Int("replacements", next.Replacements)}
	if err := h.cfg.Queue.Send(ctx, job.Message{JobID: a, Version: next.Version, Attempt: next.Attempt}, 0); err != nil {
		// The record is queued with its due_at: the reclaimer sends it
		// after the queued grace.
		attrs = append(attrs, slog.String("send_error", err.Error()))
	}
	log(slog.LevelWarn, OutcomeRunnerTaken, attrs...)
	return ours
}

// decide picks the pool of a job, or says why the job is not ours. Every
// action asks the same question, so "a job we serve" means one thing.
func (h *Handler) decide(j Job) (pool.Pool, string) {
	if !h.ownerAllowed(j) {
		return pool.Pool{}, fmt.Sprintf("owner %s is not allowed", j.Owner())
	}
	// The rest is the rule the claimer applies too, when a job's pool is
	// renamed or relabelled under it (shared/pool.Serve).
	return pool.Serve(h.cfg.Pools, j.Labels, pool.Repository{FullName: j.Repo, Public: j.Public, UserOwned: j.UserOwned})
}

// ownerAllowed reports whether ALLOWED_OWNERS (when set) names j's owner.
func (h *Handler) ownerAllowed(j Job) bool {
	if len(h.cfg.AllowedOwners) == 0 {
		return true
	}
	for _, o := range h.cfg.AllowedOwners {
		if strings.EqualFold(o, j.Owner()) {
			return true
		}
	}
	return false
}

// body returns the decoded, size-checked body, or a 4xx status and why.
func (h *Handler) body(req events.LambdaFunctionURLRequest) ([]byte, int, string) {
	max := h.cfg.MaxBodyBytes
	if !req.IsBase64Encoded {
		if len(req.Body) > max {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the %d-byte cap", max)
		}
		return []byte(req.Body), 0, ""
	}
	if base64.StdEncoding.DecodedLen(len(req.Body)) > max+3 {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the %d-byte cap", max)
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, http.StatusBadRequest, "body is marked isBase64Encoded but is not valid base64"
	}
	if len(b) > max {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the %d-byte cap", max)
	}
	return b, 0, ""
}

func (h *Handler) attrs(d *delivery, extra ...slog.Attr) []slog.Attr {
	a := []slog.Attr{slog.String(obs.KeyDeliveryID, d.id), slog.String("event", d.event)}
	if d.action != "" {
		a = append(a, slog.String("action", string(d.action)))
	}
	if d.jobID != 0 {
		a = append(a, slog.Int64(obs.KeyJobID, d.jobID))
	}
	return append(a, extra...)
}

// answer logs the decision and builds a 2xx reply.
func (h *Handler) answer(ctx context.Context, d *delivery, code int, status, msg, outcome string, extra ...slog.Attr) events.LambdaFunctionURLResponse {
	h.decided(ctx, d, slog.LevelInfo, "delivery", h.attrs(d, append([]slog.Attr{slog.String("outcome", outcome), slog.Int("status", code)}, extra...)...))
	return reply(code, Reply{Status: status, Message: msg})
}

// reject logs and answers a 4xx: the message names what is wrong.
func (h *Handler) reject(ctx context.Context, d *delivery, code int, outcome, msg string) events.LambdaFunctionURLResponse {
	h.decided(ctx, d, slog.LevelWarn, "delivery rejected",
		h.attrs(d, slog.String("outcome", outcome), slog.Int("status", code), slog.String(obs.KeyReason, msg)))
	return reply(code, Reply{Status: StatusError, Message: msg})
}

// fail answers 500 when nothing durable was written, so GitHub's redelivery
// (manual or by the App's redelivery job) starts cleanly. The error is
// logged, never returned to the caller.
func (h *Handler) fail(ctx context.Context, d *delivery, outcome string, err error) events.LambdaFunctionURLResponse {
	h.decided(ctx, d, slog.LevelError, "delivery failed",
		h.attrs(d, slog.String("outcome", outcome), slog.Int("status", http.StatusInternalServerError), slog.String("error", err.Error())))
	return reply(http.StatusInternalServerError, Reply{Status: StatusError, Message: "internal error: redeliver this delivery"})
}

func reply(code int, r Reply) events.LambdaFunctionURLResponse {
	b, _ := json.Marshal(r) // a struct of two strings always marshals
	return events.LambdaFunctionURLResponse{
		StatusCode: code,
		Headers:    map[string]string{"content-type": "application/json"},
		Body:       string(b),
	}
}

// lowerKeys indexes headers case-insensitively (Function URLs lower-case
// them; API Gateway and hand-written events may not).
func lowerKeys(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[strings.ToLower(k)] = v
	}
	return out
}
