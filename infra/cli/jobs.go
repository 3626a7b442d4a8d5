package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/redact"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
)

func jobsFlags(fs *flag.FlagSet, o *opts) {
	fs.Var((*commaList)(&o.states), "state", "only these states, comma-separated or repeated (pending, queued, claiming, claimed, failed, abandoned, done)")
	fs.StringVar(&o.pool, "pool", "", "only this pool")
	fs.Var((*duration)(&o.olderThan), "older-than", "only jobs created longer ago than this `duration` (e.g. 30m, 2h)")
	fs.IntVar(&o.pageSize, "page-size", 0, "items read per Scan page (0: DynamoDB's 1 MB pages)")
}

func retryFlags(fs *flag.FlagSet, o *opts) {
	fs.StringVar(&o.by, "by", "", "operator name recorded with the retry (default $USER)")
}

// transitionView is a history entry as printed.
type transitionView struct {
	At      string `json:"at"`
	From    string `json:"from"`
	To      string `json:"to"`
	Attempt int    `json:"attempt"`
	Class   string `json:"class,omitempty"`
	Error   string `json:"error,omitempty"`
	Actor   string `json:"actor"`
}

// jobView is a job record as printed (--json).
type jobView struct {
	JobID   int64  `json:"job_id"`
	State   string `json:"state"`
	Version int64  `json:"version"`
	Attempt int    `json:"attempt"`
	Pool    string `json:"pool,omitempty"`
	Repo    string `json:"repo,omitempty"`
	// Public and UserOwned: the repository as its queued delivery
	// described it, to which the claimer holds the recorded pool.
	Public         bool     `json:"public,omitempty"`
	UserOwned      bool     `json:"user_owned,omitempty"`
	InstallationID int64    `json:"installation_id,omitempty"`
	RunID          int64    `json:"run_id,omitempty"`
	Labels         []string `json:"labels,omitempty"`
	RunnerName     string   `json:"runner_name,omitempty"`
	// RunnerScope is where the last claim registered its runner;
	// TriedRunner and TriedScope the runner name the last retried attempt
	// asked for, and where (the next attempt under that name looks there
	// first should the pool's scope have changed).
	RunnerScope string `json:"runner_scope,omitempty"`
	TriedRunner string `json:"tried_runner,omitempty"`
	TriedScope  string `json:"tried_scope,omitempty"`
	// Replacements counts the new attempts of runners that never took the
	// job; ReplacementsBase those before the last operator retry (the cap,
	// MAX_REPLACEMENTS, counts the rest); LivenessChecks the idle checks;
	// Waits the looks in a row that found the job held at GitHub (waiting
	// for reviewers, pending), NextLook when the reclaimer looks again at a
	// claimed one.
	Replacements     int              `json:"replacements,omitempty"`
	ReplacementsBase int              `json:"replacements_base,omitempty"`
	LivenessChecks   int              `json:"liveness_checks,omitempty"`
	Waits            int              `json:"waits,omitempty"`
	NextLook         string           `json:"next_look,omitempty"`
	CreatedAt        string           `json:"created_at,omitempty"`
	UpdatedAt        string           `json:"updated_at,omitempty"`
	DueAt            string           `json:"due_at,omitempty"`
	FirstFailureAt   string           `json:"first_failure_at,omitempty"`
	LeaseExpiresAt   string           `json:"lease_expires_at,omitempty"`
	LastErrorClass   string           `json:"last_error_class,omitempty"`
	LastError        string           `json:"last_error,omitempty"`
	History          []transitionView `json:"history,omitempty"`
}

// repoNote says how the queued delivery described the repository, when
// it said more than a private organisation's: the pool's rules apply to it.
func repoNote(r job.Record) string {
	var notes []string
	if r.Public {
		notes = append(notes, "public")
	}
	if r.UserOwned {
		notes = append(notes, "a user's")
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, ", ") + ")"
}

func view(r job.Record) jobView {
	v := jobView{
		JobID: r.JobID, State: string(r.State), Version: r.Version, Attempt: r.Attempt, Pool: r.Pool, Repo: r.Repo,
		Public: r.Public, UserOwned: r.UserOwned,
		InstallationID: r.InstallationID, RunID: r.RunID, Labels: r.Labels, RunnerName: r.RunnerName,
		RunnerScope: r.Scope, TriedRunner: r.TriedRunner, TriedScope: r.TriedScope,
		Replacements: r.Replacements, ReplacementsBase: r.ReplacementsBase, LivenessChecks: r.LivenessChecks, Waits: r.Waits,
		CreatedAt: stamp(r.CreatedAt), UpdatedAt: stamp(r.UpdatedAt), DueAt: stamp(r.DueAt),
		FirstFailureAt: stamp(r.FirstFailureAt), LeaseExpiresAt: stamp(r.LeaseExpiresAt),
		LastErrorClass: r.LastErrorClass, LastError: r.LastError,
	}
	if r.State == job.Claimed {
		v.NextLook = stamp(r.SweepAt) // the reclaimer's next look at its runner
	}
	for _, t := range r.History {
		v.History = append(v.History, transitionView{At: stamp(t.At), From: string(t.From), To: string(t.To),
			Attempt: t.Attempt, Class: t.Class, Error: t.Error, Actor: t.Actor})
	}
	return v
}

// commaList is a flag whose repeats add up (--state failed --state
// abandoned is both, as "failed,abandoned" is), where a plain string flag
// keeps only the last.
type commaList string

func (l *commaList) String() string { return string(*l) }

func (l *commaList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		// "--state $STATES" with nothing in it would list every job.
		return errors.New("empty: want one or more states, comma-separated")
	}
	if *l != "" {
		v = string(*l) + "," + v
	}
	*l = commaList(v)
	return nil
}

func (c *CLI) jobs(ctx context.Context, o *opts, _ []string) error {
	if strings.Contains(o.pool, ",") {
		return usagef("invalid value %q for flag --pool: one pool name (no pool name has a comma)", o.pool)
	}
	if o.pageSize > math.MaxInt32 {
		return usagef("invalid value %d for flag --page-size: at most %d", o.pageSize, math.MaxInt32)
	}
	f := store.JobFilter{Pool: o.pool, PageSize: int32(o.pageSize)}
	if o.states != "" {
		for _, s := range strings.Split(o.states, ",") {
			st := job.State(strings.TrimSpace(s))
			if !st.Valid() {
				return usagef("invalid value %q for flag --state: not a state", s)
			}
			f.States = append(f.States, st)
		}
	}
	if o.olderThan < 0 {
		return usagef("invalid value %s for flag --older-than: must not be negative", o.olderThan)
	}
	if o.pageSize < 0 {
		return usagef("invalid value %d for flag --page-size: must not be negative (0: DynamoDB's 1 MB pages)", o.pageSize)
	}
	if err := c.resolve(ctx, o); err != nil {
		return err
	}
	if err := need("table", o.dep.Table); err != nil {
		return err
	}
	now := c.cfg.Now()
	if o.olderThan > 0 {
		f.CreatedBefore = now.Add(-o.olderThan)
	}
	inv := store.NewInventory(store.InventoryConfig{DB: c.cfg.DynamoDB, Table: o.dep.Table})
	var recs []job.Record
	var undecodable []string
	scanned, pages, cursor := 0, 0, ""
	for {
		p, err := inv.Jobs(ctx, f, cursor)
		if err != nil {
			return fmt.Errorf("table %s: %w", o.dep.Table, err)
		}
		pages++
		scanned += p.Scanned
		recs = append(recs, p.Records...)
		undecodable = append(undecodable, p.Undecodable...)
		if p.Next == "" {
			break
		}
		c.progress("page %d: %d items read, %d jobs match so far…", pages, scanned, len(recs))
		cursor = p.Next
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].CreatedAt != recs[j].CreatedAt {
			return recs[i].CreatedAt < recs[j].CreatedAt
		}
		return recs[i].JobID < recs[j].JobID
	})
	for _, k := range undecodable {
		c.progress("item %s is not a job record this version can read; skipped", k)
	}
	// Items this version cannot read are named above and make the exit
	// status a failure once the list is out: a script that reads the
	// list must not take it for complete.
	partial := func() error {
		if len(undecodable) == 0 {
			return nil
		}
		return failf("%d item(s) are not job records this version can read (named above): the list is incomplete", len(undecodable))
	}
	if o.json {
		out := make([]jobView, 0, len(recs))
		for _, r := range recs {
			out = append(out, view(r))
		}
		if err := c.printJSON(out); err != nil {
			return err
		}
		return partial()
	}
	w := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tSTATE\tVERSION\tATTEMPT\tPOOL\tREPO\tAGE\tLAST ERROR")
	for _, r := range recs {
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r.JobID, r.State, r.Version, r.Attempt, r.Pool, r.Repo,
			ago(now, r.CreatedAt), oneLine(r.LastError, 60))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.cfg.Stdout, "%d jobs (%d items read)\n", len(recs), scanned)
	return partial()
}

// get reads a job, turning "not found" into the operator's message.
func (c *CLI) get(ctx context.Context, d deployment, id int64) (job.Record, error) {
	r, err := c.store(d).Get(ctx, id)
	if errors.Is(err, job.ErrNotFound) {
		return job.Record{}, failf("job %d not found", id)
	}
	if err != nil {
		// A --table typo says ResourceNotFoundException, not which table.
		return job.Record{}, fmt.Errorf("table %s: %w", d.Table, err)
	}
	return r, nil
}

// githubView is what GitHub says about a job, or why it could not be asked.
type githubView struct {
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

func (c *CLI) job(ctx context.Context, o *opts, args []string) error {
	id, err := parseID(args[0])
	if err != nil {
		return err
	}
	if err := c.resolve(ctx, o); err != nil {
		return err
	}
	if err := need("table", o.dep.Table); err != nil {
		return err
	}
	r, err := c.get(ctx, o.dep, id)
	if err != nil {
		return err
	}
	gh := c.githubStatus(ctx, o.dep, r)
	if o.json {
		return c.printJSON(struct {
			jobView
			GitHub githubView `json:"github"`
		}{view(r), gh})
	}
	now := c.cfg.Now()
	w := tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s\t%s\n", k, v)
		}
	}
	row("job", fmt.Sprint(r.JobID))
	row("state", fmt.Sprintf("%s (version %d, attempt %d)", r.State, r.Version, r.Attempt))
	row("repo", r.Repo+repoNote(r))
	row("pool", r.Pool)
	row("labels", strings.Join(r.Labels, ", "))
	row("installation", nonzero(r.InstallationID))
	if r.RunnerName != "" && r.Scope != "" {
		row("runner", fmt.Sprintf("%s (%s)", r.RunnerName, r.Scope))
	} else {
		row("runner", r.RunnerName)
	}
	if r.TriedRunner != "" && !r.State.Settled() {
		row("last tried", fmt.Sprintf("%s (%s)", r.TriedRunner, r.TriedScope))
	}
	if r.Replacements > 0 || r.LivenessChecks > 0 {
		rep := fmt.Sprintf("%d", r.Replacements)
		if r.ReplacementsBase > 0 {
			rep += fmt.Sprintf(" (%d since the last retry)", r.Replacements-r.ReplacementsBase)
		}
		row("replacements", fmt.Sprintf("%s, idle checks %d", rep, r.LivenessChecks))
	}
	if r.Waits > 0 && r.State == job.Claimed {
		row("held at github", fmt.Sprintf("%d looks in a row found it waiting or pending; next look %s", r.Waits, stamp(r.SweepAt)))
	}
	row("created", withAge(now, r.CreatedAt))
	row("updated", withAge(now, r.UpdatedAt))
	row("first failure", withAge(now, r.FirstFailureAt))
	if r.LastErrorClass != "" || r.LastError != "" {
		row("last error", strings.TrimSpace(fmt.Sprintf("[%s] %s", r.LastErrorClass, oneLine(r.LastError, 200))))
	}
	if gh.Error != "" {
		row("github", "unavailable: "+gh.Error)
	} else {
		row("github", gh.Status)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(r.History) > 0 {
		fmt.Fprintln(c.cfg.Stdout, "\nhistory:")
		w = tabwriter.NewWriter(c.cfg.Stdout, 0, 4, 2, ' ', 0)
		for _, t := range r.History {
			from := string(t.From)
			if from == "" {
				from = "new" // the record's first entry
			}
			fmt.Fprintf(w, "  %s\t%s → %s\tattempt %d\t%s\t%s\n", stamp(t.At), from, t.To, t.Attempt, t.Actor,
				strings.TrimSpace(t.Class+" "+oneLine(t.Error, 80)))
		}
		return w.Flush()
	}
	return nil
}

func nonzero(v int64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprint(v)
}

func withAge(now time.Time, ms int64) string {
	if ms == 0 {
		return ""
	}
	return fmt.Sprintf("%s (%s ago)", stamp(ms), ago(now, ms))
}

// githubApp builds the App client from the key secret, or says why not.
func (c *CLI) githubApp(ctx context.Context, d deployment) (*ghapp.Client, error) {
	if d.AppID == 0 {
		return nil, errors.New("no GitHub App id (--app-id or --stack)")
	}
	if d.AppKeyARN == "" {
		return nil, errors.New("no App private key (--app-key-arn or --stack)")
	}
	key, err := secret.Resolve(ctx, c.cfg.SecretsManager, d.AppKeyARN, "")
	if err != nil {
		return nil, fmt.Errorf("App private key: %w", err)
	}
	return ghapp.New(ghapp.Config{AppID: d.AppID, PrivateKey: []byte(key), BaseURL: d.GitHubAPI, Transport: c.cfg.HTTP, Now: c.cfg.Now})
}

// githubStatus asks GitHub for the job's status through the App; a GitHub
// that cannot be asked is reported, not fatal: the record is still shown.
func (c *CLI) githubStatus(ctx context.Context, d deployment, r job.Record) githubView {
	if r.InstallationID == 0 || r.RepoName() == "" {
		return githubView{Error: "the record names no installation or repository"}
	}
	app, err := c.githubApp(ctx, d)
	if err != nil {
		return githubView{Error: redact.String(err.Error())}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := app.JobStatus(ctx, r.InstallationID, r.Owner(), r.RepoName(), r.JobID)
	if err != nil {
		return githubView{Error: redact.String(err.Error())}
	}
	return githubView{Status: st}
}

func (c *CLI) retry(ctx context.Context, o *opts, args []string) error {
	ids, err := c.retryIDs(args)
	if err != nil {
		return err
	}
	if err := c.resolve(ctx, o); err != nil {
		return err
	}
	if err := need("table", o.dep.Table, "queue-url", o.dep.QueueURL); err != nil {
		return err
	}
	if o.dep.Shards == 0 {
		// The retried record goes back into the sweep index, on a shard of
		// the deployment's count: one the reclaimer never reads would leave
		// the job without its backstop.
		return usagef("flag --sweep-shards (or --stack) is required: the deployment's SweepShards")
	}
	if o.dep.Shards < 1 || o.dep.Shards > job.MaxShards {
		return usagef("invalid value %d for flag --sweep-shards: the deployment's SweepShards, 1 to %d", o.dep.Shards, job.MaxShards)
	}
	by := o.by
	if by == "" {
		by = c.cfg.User
	}
	if len(args) == 1 && args[0] != "-" {
		// One id as the argument: one object, as before lists were
		// taken. A list ("-", or several arguments) prints an array
		// whatever its length, so a script's reading does not depend on
		// how many jobs failed.
		out, err := c.retryJob(ctx, o, ids[0], by)
		if out != nil && o.json {
			if err := c.printJSON(out); err != nil {
				return err
			}
		}
		return err
	}
	// A list: paced as redrive's copies are (≤ 2 claims arriving a
	// second), each job tried whatever befell the others.
	pace := &pacer{now: c.cfg.Now, sleep: c.cfg.Sleep, rnd: c.cfg.Rand}
	c.progress("retrying %d jobs, about %s apart: about %s", len(ids), redriveGap+redriveJitter/2,
		(time.Duration(len(ids)-1) * (redriveGap + redriveJitter/2)).Round(time.Second))
	results := []any{}
	failed := 0
	for i, id := range ids {
		if err := pace.wait(ctx, func() {}); err != nil {
			if o.json {
				if err := c.printJSON(results); err != nil {
					return err
				}
			}
			return failf("retry interrupted (%v) after %d of %d jobs; not tried: %s", err, i, len(ids), joinIDs(ids[i:]))
		}
		out, err := c.retryJob(ctx, o, id, by)
		if out != nil {
			pace.sent() // a claim message was sent, or tried
			results = append(results, out)
		}
		if err != nil {
			failed++
			msg := err.Error()
			if out == nil {
				results = append(results, map[string]any{"job_id": id, "error": redact.String(msg)})
			}
			fmt.Fprintln(c.cfg.Stderr, "ghclaim: "+redact.String(msg))
		}
	}
	if o.json {
		if err := c.printJSON(results); err != nil {
			return err
		}
	}
	if failed > 0 {
		return failf("%d of %d jobs not retried, or queued without their claim message (above)", failed, len(ids))
	}
	return nil
}

// retryIDs reads retry's arguments: job ids, or "-" alone for ids read
// from standard input (separated by spaces, commas or new lines). Any bad
// one refuses the whole list before anything is written; a repeated id
// counts once.
func (c *CLI) retryIDs(args []string) ([]int64, error) {
	if slices.Contains(args, "-") {
		if len(args) > 1 {
			return nil, usagef("\"-\" (job ids from standard input) comes alone, not with ids")
		}
		// Read one byte past the cap: a list cut there would lose its
		// tail silently, and the id the cut fell in would become another.
		in, err := io.ReadAll(io.LimitReader(c.cfg.Stdin, maxRetryInput+1))
		if err != nil {
			return nil, failf("read job ids from standard input: %v", err)
		}
		if len(in) > maxRetryInput {
			return nil, usagef("more than %d bytes of job ids on standard input: split the list", maxRetryInput)
		}
		args = strings.FieldsFunc(string(in), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
		if len(args) == 0 {
			return nil, usagef("no job id on standard input")
		}
	}
	var ids []int64
	seen := map[int64]bool{}
	for _, a := range args {
		id, err := parseID(a)
		if err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// maxRetryInput caps what "retry -" reads from standard input (some
// 80,000 ids, a day of paced retries).
const maxRetryInput = 1 << 20

// joinIDs lists ids for a message.
func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, " ")
}

// retryOutput is one retried job as --json prints it.
type retryOutput struct {
	jobView
	From        string `json:"from"`
	MessageSent bool   `json:"message_sent"`
}

// retryJob retries job id: back to queued at a new version, then its claim
// message. out is nil when nothing was written.
func (c *CLI) retryJob(ctx context.Context, o *opts, id int64, by string) (*retryOutput, error) {
	r, err := c.get(ctx, o.dep, id)
	if err != nil {
		return nil, err
	}
	if !r.State.Retryable() {
		return nil, failf("job %d is %s: only failed or abandoned jobs are retried", id, r.State)
	}
	now := c.cfg.Now()
	nr, err := c.store(o.dep).Requeue(ctx, job.Requeue{Read: r, By: by, Due: now}, now)
	if errors.Is(err, job.ErrConflict) {
		if cur, ok := job.CurrentOf(err); ok {
			return nil, failf("job %d changed while retrying it (now %s, version %d): nothing written; look again", id, cur.State, cur.Version)
		}
		return nil, failf("job %d not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", id, err)
	}
	sendErr := queue.New(c.cfg.SQS, o.dep.QueueURL).Send(ctx, job.Message{JobID: id, Version: nr.Version, Attempt: 0}, 0)
	out := &retryOutput{view(nr), string(r.State), sendErr == nil}
	if !o.json {
		fmt.Fprintf(c.cfg.Stdout, "job %d: %s v%d → queued v%d (attempt 0), retried by operator %s\n", id, r.State, r.Version, nr.Version, by)
	}
	if sendErr != nil {
		return out, failf("job %d is queued at version %d but its claim message was not sent (%v): the reclaimer sends it after the queued grace", id, nr.Version, sendErr)
	}
	if !o.json {
		fmt.Fprintf(c.cfg.Stdout, "claim message sent (job %d, version %d)\n", id, nr.Version)
	}
	return out, nil
}
