package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/names"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// Action is the action of a workflow_job delivery.
type Action string

// The workflow_job actions GitHub documents. Anything else is never acted
// on (Parse returns ErrUnknownAction): guessing what a new action means
// could claim a job twice or never.
const (
	// ActionQueued: a new job waits for a runner; we claim it if a pool matches.
	ActionQueued Action = "queued"
	// ActionWaiting: the job waits for an environment's protection rules; it
	// is queued (and delivered again) once they pass, so nothing is claimed.
	ActionWaiting Action = "waiting"
	// ActionInProgress: a runner took the job.
	ActionInProgress Action = "in_progress"
	// ActionCompleted: the job finished (or was cancelled before it started).
	ActionCompleted Action = "completed"
)

// MaxLabels bounds the labels of one job. GitHub's runs-on is far smaller in
// practice; the bound keeps one delivery from writing an unbounded list.
const MaxLabels = 100

// MaxRunnerName bounds the runner_name a job record keeps (GitHub's runner
// names are at most 64 characters; ours are shorter still).
const MaxRunnerName = 256

// ErrBadPayload is the class of every payload problem: the delivery is
// answered 400 and nothing is written. Parse returns a *PayloadError.
var ErrBadPayload = errors.New("bad payload")

// PayloadError says which field of a payload is wrong and how.
type PayloadError struct {
	// Field is the JSON path of the field ("workflow_job.id"); empty for the
	// body as a whole.
	Field string
	// Problem says what is wrong, in words fit to show the sender.
	Problem string
	// unknownAction: the action is well formed but none GitHub documented.
	unknownAction bool
}

func (e *PayloadError) Error() string {
	if e.Field == "" {
		return "payload: " + e.Problem
	}
	return "payload: " + e.Field + ": " + e.Problem
}

// ErrUnknownAction is the *PayloadError of an action none of the above:
// errors.Is(err, ErrUnknownAction) tells it from a malformed payload. The
// handler answers it 2xx (see the package doc), not 400.
var ErrUnknownAction = errors.New("unknown action")

// Is makes errors.Is(err, ErrBadPayload) true for every *PayloadError, and
// errors.Is(err, ErrUnknownAction) for an unknown action's.
func (e *PayloadError) Is(target error) bool {
	return target == ErrBadPayload || (target == ErrUnknownAction && e.unknownAction)
}

// Job is a validated workflow_job delivery: everything the webhook decides
// and writes with, and nothing else.
type Job struct {
	Action Action
	// JobID is workflow_job.id, always > 0.
	JobID int64
	// RunID is workflow_job.run_id, always > 0.
	RunID int64
	// Labels are workflow_job.labels (runs-on): at most MaxLabels, none empty.
	// A null label of an in_progress or completed report is left out
	// (parseLabels).
	Labels []string
	// RunnerName is workflow_job.runner_name; empty while the job is queued.
	RunnerName string
	// Status is workflow_job.status as GitHub sent it (informational).
	Status string
	// Repo is repository.full_name, always "owner/name".
	Repo string
	// Public is true unless GitHub says the repository is private or
	// internal: an unknown visibility counts as public, the stricter case.
	Public bool
	// UserOwned is true when GitHub says the repository's owner is a user
	// account (repository.owner.type "User"), which has no organisation
	// runners; false for an organisation, and when the type is absent.
	UserOwned bool
	// InstallationID is installation.id of the GitHub App: always > 0 for
	// queued, 0 when another action's payload has no installation.
	InstallationID int64
	// CreatedAt and StartedAt are workflow_job.created_at and started_at
	// of an in_progress job, when a runner took it (informational: zero
	// for other actions, and when absent or not RFC 3339).
	CreatedAt, StartedAt time.Time
}

// Owner is the repository owner (organisation or user).
func (j Job) Owner() string {
	owner, _, _ := strings.Cut(j.Repo, "/")
	return owner
}

// rawPayload is the part of GitHub's workflow_job payload we read. Pointers
// tell "absent or null" from zero; unknown fields are ignored, because GitHub
// adds fields without notice.
type rawPayload struct {
	Action      *string `json:"action"`
	WorkflowJob *struct {
		ID         *int64          `json:"id"`
		RunID      *int64          `json:"run_id"`
		Labels     json.RawMessage `json:"labels"`
		RunnerName *string         `json:"runner_name"`
		Status     *string         `json:"status"`
		CreatedAt  string          `json:"created_at"`
		StartedAt  string          `json:"started_at"`
	} `json:"workflow_job"`
	Repository *struct {
		FullName   *string `json:"full_name"`
		Private    *bool   `json:"private"`
		Visibility *string `json:"visibility"`
		Owner      *struct {
			Type string `json:"type"`
		} `json:"owner"`
	} `json:"repository"`
	Installation *struct {
		ID *int64 `json:"id"`
	} `json:"installation"`
}

// Parse validates a workflow_job payload completely and returns the job it
// describes. Any problem is a *PayloadError (errors.Is ErrBadPayload) naming
// the field. Parse is pure: the caller writes nothing until it succeeds.
func Parse(body []byte) (Job, error) {
	if len(body) == 0 {
		return Job{}, &PayloadError{Problem: "empty body"}
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD, so a
	// label or repo could differ from what GitHub meant.
	if !utf8.Valid(body) {
		return Job{}, &PayloadError{Problem: "body is not valid UTF-8"}
	}
	var raw rawPayload
	if err := json.Unmarshal(body, &raw); err != nil {
		return Job{}, jsonError(err)
	}

	if raw.Action == nil {
		return Job{}, &PayloadError{Field: "action", Problem: "required"}
	}
	j := Job{Action: Action(*raw.Action)}
	switch j.Action {
	case ActionQueued, ActionWaiting, ActionInProgress, ActionCompleted:
	default:
		return Job{}, &PayloadError{Field: "action", Problem: fmt.Sprintf("unknown action %q: want queued, waiting, in_progress or completed", *raw.Action), unknownAction: true}
	}

	wj := raw.WorkflowJob
	if wj == nil {
		return Job{}, &PayloadError{Field: "workflow_job", Problem: "required"}
	}
	if wj.ID == nil {
		return Job{}, &PayloadError{Field: "workflow_job.id", Problem: "required"}
	}
	if *wj.ID <= 0 {
		return Job{}, &PayloadError{Field: "workflow_job.id", Problem: fmt.Sprintf("%d is not a positive id", *wj.ID)}
	}
	j.JobID = *wj.ID
	if wj.RunID == nil {
		return Job{}, &PayloadError{Field: "workflow_job.run_id", Problem: "required"}
	}
	if *wj.RunID <= 0 {
		return Job{}, &PayloadError{Field: "workflow_job.run_id", Problem: fmt.Sprintf("%d is not a positive id", *wj.RunID)}
	}
	j.RunID = *wj.RunID
	labels, err := parseLabels(wj.Labels, j.Action != ActionQueued)
	if err != nil {
		return Job{}, err
	}
	j.Labels = labels
	if wj.RunnerName != nil {
		// Kept on the record: bounded, as no runner name of GitHub's or
		// ours comes near it, so a freak one cannot make the record an
		// item DynamoDB refuses (400 KB) and fail the delivery for good.
		j.RunnerName = job.Cut(*wj.RunnerName, MaxRunnerName)
	}
	if wj.Status != nil {
		j.Status = *wj.Status
	}
	if j.Action == ActionInProgress { // queued's started_at is its created_at
		j.CreatedAt, _ = time.Parse(time.RFC3339, wj.CreatedAt)
		j.StartedAt, _ = time.Parse(time.RFC3339, wj.StartedAt)
	}

	repo := raw.Repository
	if repo == nil {
		return Job{}, &PayloadError{Field: "repository", Problem: "required"}
	}
	if repo.FullName == nil {
		return Job{}, &PayloadError{Field: "repository.full_name", Problem: "required"}
	}
	if !validRepo(*repo.FullName) {
		return Job{}, &PayloadError{Field: "repository.full_name", Problem: fmt.Sprintf("%q is not owner/name", *repo.FullName)}
	}
	j.Repo = *repo.FullName
	j.Public = pool.IsPublic(repo.Private, repo.Visibility)
	j.UserOwned = repo.Owner != nil && strings.EqualFold(repo.Owner.Type, "User")

	// Only a claim calls GitHub as the installation: marking a job done or
	// skipping it does not, so only queued requires it. An id that is there
	// must be valid whatever the action.
	if raw.Installation == nil || raw.Installation.ID == nil {
		if j.Action == ActionQueued {
			return Job{}, &PayloadError{Field: "installation.id", Problem: "installation.id is required for queued: is this webhook configured on the GitHub App?"}
		}
		return j, nil
	}
	if *raw.Installation.ID <= 0 {
		return Job{}, &PayloadError{Field: "installation.id", Problem: fmt.Sprintf("%d is not a positive id", *raw.Installation.ID)}
	}
	j.InstallationID = *raw.Installation.ID
	return j, nil
}

// parseLabels reads workflow_job.labels. GitHub's schema lets a
// completed report's labels hold null (@octokit/openapi-webhooks:
// webhook-workflow-job-completed), so a report (any action but queued)
// leaves a null label out instead of refusing the delivery: refused, the
// report of a job we recorded would not mark it done, a cancelled job's
// claim would go on, and a report arriving before its queued would leave
// no done record to stop that queued from being claimed. A report's
// labels only decide whether the job is ours (the remaining labels are
// among the original ones, so a pool that served the job still covers
// them). A queued job's labels choose its runner: a null among them is
// refused, naming it.
func parseLabels(msg json.RawMessage, dropNull bool) ([]string, error) {
	const field = "workflow_job.labels"
	if len(msg) == 0 || string(msg) == "null" {
		return nil, &PayloadError{Field: field, Problem: "required"}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(msg, &items); err != nil {
		return nil, &PayloadError{Field: field, Problem: "want an array of strings"}
	}
	if len(items) > MaxLabels {
		return nil, &PayloadError{Field: field, Problem: fmt.Sprintf("%d labels, more than %d", len(items), MaxLabels)}
	}
	labels := make([]string, 0, len(items))
	for i, it := range items {
		if string(it) == "null" {
			if dropNull {
				continue
			}
			return nil, &PayloadError{Field: fmt.Sprintf("%s[%d]", field, i), Problem: "want a string, got null"}
		}
		var s string
		if err := json.Unmarshal(it, &s); err != nil {
			return nil, &PayloadError{Field: fmt.Sprintf("%s[%d]", field, i), Problem: "want a string"}
		}
		if strings.TrimSpace(s) == "" {
			return nil, &PayloadError{Field: fmt.Sprintf("%s[%d]", field, i), Problem: "empty label"}
		}
		labels = append(labels, s)
	}
	return labels, nil
}

// validRepo reports whether full is owner/name with owner and repository
// names as GitHub (and GitHub Enterprise Server, whose managed users carry
// an "_suffix") allows them; the repo later becomes part of GitHub API
// paths, so nothing else may pass.
func validRepo(full string) bool {
	owner, name, ok := strings.Cut(full, "/")
	return ok && names.Safe(owner, 100, true) && names.Safe(name, 100, false) && name != "." && name != ".."
}

// jsonError turns a decoding error into a *PayloadError naming the field.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return &PayloadError{Problem: fmt.Sprintf("want a JSON object, got %s", te.Value)}
		}
		return &PayloadError{Field: te.Field, Problem: fmt.Sprintf("want %s, got %s", kind(te.Type.Kind().String()), te.Value)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &PayloadError{Problem: fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se)}
	}
	return &PayloadError{Problem: "not valid JSON: " + err.Error()}
}

func kind(k string) string {
	switch k {
	case "int64":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "struct", "ptr":
		return "an object"
	}
	return k
}
