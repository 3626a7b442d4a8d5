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
// when the record was terminal already.
type Store interface {
	CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error)
	MarkDone(ctx context.Context, d job.Report, now time.Time) (job.State, error)
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
	// Metrics makes each delivery's decision line an EMF document (none
	// when nil).
	Metrics *obs.Metrics
	// Secrets are the webhook secrets accepted at once (rotation); at least
	// one non-empty secret is required.
	Secrets [][]byte
	// CurrentSecrets, when set, replaces Secrets: it is asked on every
	// delivery (through a cache with a TTL in production), so a rotation
	// or the first secret written by `make app` is used without a cold
	// start. An error whose NotSet() is true (no secret yet) answers 503
	// with ErrSecretNotSet's message; any other error 503 "unavailable".
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
	if err != nil {
		return h.reject(ctx, d, http.StatusBadRequest, "bad_payload", err.Error()), nil
	}
	d.action, d.jobID = j.Action, j.JobID

	// A job we do not serve is answered before the table is touched: the
	// decision costs no API call, so it is made again on every delivery,
	// and an operator who fixes RUNNER_POOLS or ALLOWED_OWNERS and clicks
	// Redeliver (same GUID) gets the job claimed instead of "duplicate".
	// in_progress and completed of such a job (most of them are
	// GitHub-hosted jobs) write nothing either.
	if j.Action == ActionWaiting { // GitHub sends queued once the environment allows it.
		return h.answer(ctx, d, http.StatusOK, StatusIgnored, "waiting: the job is claimed when it is queued", "skip_waiting"), nil
	}
	p, why := h.decide(j)
	if why != "" {
		return h.answer(ctx, d, http.StatusOK, StatusIgnored, why, "skip", slog.String(obs.KeyReason, why)), nil
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
		Labels: j.Labels, Pool: p.Name,
	}, now)
	if errors.Is(err, job.ErrConflict) {
		var attrs []slog.Attr
		if cur, ok := job.CurrentOf(err); ok {
			attrs = append(attrs, slog.String("state", string(cur.State)), slog.Int64("version", cur.Version))
		}
		return h.answer(ctx, d, http.StatusOK, StatusDuplicate, fmt.Sprintf("job %d already recorded", j.JobID), "duplicate_job", attrs...)
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

// done marks the record of a job pool p serves done: one conditional upsert.
func (h *Handler) done(ctx context.Context, d *delivery, j Job, p pool.Pool, now time.Time) events.LambdaFunctionURLResponse {
	prev, err := h.cfg.Store.MarkDone(ctx, job.Report{
		JobID: j.JobID, RunID: j.RunID, Repo: j.Repo, InstallationID: j.InstallationID,
		Labels: j.Labels, Pool: p.Name, RunnerName: j.RunnerName,
	}, now)
	outcome := "done"
	d.toRunner = toRunner(j)
	switch {
	case errors.Is(err, job.ErrTerminal):
		outcome = "already_terminal"
	case err != nil:
		return h.fail(ctx, d, "mark_done_failed", err)
	case prev == "":
		outcome = "done_created"
	}
	if taken, ok := takenFrom(h.cfg.Pools, j); ok {
		// Our runner made for another job took this one: that job waits
		// for its runner to finish this one (see shared/reclaim's liveness
		// check, which starts its new attempt once the runner is gone).
		h.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "runner taken by another job",
			h.attrs(d, slog.String("outcome", "runner_taken"), slog.String("runner_name", j.RunnerName), slog.Int64("taken_from_job_id", taken))...)
	}
	return h.answer(ctx, d, http.StatusAccepted, StatusAccepted, fmt.Sprintf("job %d is %s", j.JobID, j.Action), outcome,
		slog.String("pool", p.Name), slog.String("previous_state", string(prev)), slog.String("runner_name", j.RunnerName))
}

// takenFrom reports the job whose runner took j: j is in progress on a
// runner named <pool>-<A> for one of our pools with A ≠ j's id.
func takenFrom(pools []pool.Pool, j Job) (int64, bool) {
	if j.Action != ActionInProgress {
		return 0, false
	}
	for _, p := range pools {
		rest, ok := strings.CutPrefix(j.RunnerName, p.Name+"-")
		if !ok {
			continue
		}
		if a, err := strconv.ParseInt(rest, 10, 64); err == nil && a > 0 && a != j.JobID {
			return a, true
		}
	}
	return 0, false
}

// decide picks the pool of a job, or says why the job is not ours. Every
// action asks the same question, so "a job we serve" means one thing.
func (h *Handler) decide(j Job) (pool.Pool, string) {
	if len(h.cfg.AllowedOwners) > 0 {
		allowed := false
		for _, o := range h.cfg.AllowedOwners {
			if strings.EqualFold(o, j.Owner()) {
				allowed = true
				break
			}
		}
		if !allowed {
			return pool.Pool{}, fmt.Sprintf("owner %s is not allowed", j.Owner())
		}
	}
	p, ok := pool.Match(h.cfg.Pools, j.Labels)
	if !ok {
		return pool.Pool{}, fmt.Sprintf("no pool matches labels [%s]", strings.Join(j.Labels, ", "))
	}
	if j.Public && !p.AllowPublic {
		return pool.Pool{}, fmt.Sprintf("repository %s is public and pool %s does not allow public repositories", j.Repo, p.Name)
	}
	return p, ""
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
	h.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "delivery", h.delivered(d, h.attrs(d, append([]slog.Attr{slog.String("outcome", outcome), slog.Int("status", code)}, extra...)...))...)
	return reply(code, Reply{Status: status, Message: msg})
}

// reject logs and answers a 4xx: the message names what is wrong.
func (h *Handler) reject(ctx context.Context, d *delivery, code int, outcome, msg string) events.LambdaFunctionURLResponse {
	h.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "delivery rejected",
		h.delivered(d, h.attrs(d, slog.String("outcome", outcome), slog.Int("status", code), slog.String(obs.KeyReason, msg)))...)
	return reply(code, Reply{Status: StatusError, Message: msg})
}

// fail answers 500 when nothing durable was written, so GitHub's redelivery
// (manual or by the App's redelivery job) starts cleanly. The error is
// logged, never returned to the caller.
func (h *Handler) fail(ctx context.Context, d *delivery, outcome string, err error) events.LambdaFunctionURLResponse {
	h.cfg.Logger.LogAttrs(ctx, slog.LevelError, "delivery failed",
		h.delivered(d, h.attrs(d, slog.String("outcome", outcome), slog.Int("status", http.StatusInternalServerError), slog.String("error", err.Error())))...)
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
