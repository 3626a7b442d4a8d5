package chaos

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
)

// Report is the figures of one run.
type Report struct {
	// Jobs is N; Faults the injected faults (every target); Kills the
	// claimer invocations killed.
	Jobs, Faults, Kills int
	// DuplicateDeliveries counts deliveries GitHub sent twice;
	// Redeliveries the deliveries repeated after a 5xx answer.
	DuplicateDeliveries, Redeliveries int
	// Lost counts jobs that did not end run by a runner of ours, cancelled,
	// taken by another runner (with our record done), or failed/abandoned
	// with a stated reason.
	Lost int
	// DuplicateRunners counts runners registered beyond one per job at
	// any sampled moment (every few seconds and at the end).
	DuplicateRunners int
	// DuplicateInstances counts machines beyond one per job at any sampled
	// moment: EC2 instances (pending or running) tagged with the job.
	DuplicateInstances int
	// GitHubCallsPerClaim is every GitHub API request over claimed jobs;
	// AWSCallsPerJob every DynamoDB, SQS and provisioner call the webhook
	// and the claimer made over N. The reclaimer's calls depend on its
	// schedule, not on the jobs (ReclaimerCalls).
	GitHubCallsPerClaim, AWSCallsPerJob float64
	ReclaimerCalls                      int
	// SecondaryLimited counts GitHub requests the stand-in refused for
	// its secondary rate limit on points a minute (as GitHub would), not
	// as an injected fault.
	SecondaryLimited int
	// Claimed counts jobs that got a machine (a claim that reached the
	// provisioner); Done, Failed and Abandoned the jobs' final states.
	Claimed, Done, Failed, Abandoned int
	// ClaimedAfterDone counts jobs whose done event was answered before
	// their queued was sent, and that got a machine anyway.
	ClaimedAfterDone int
	// Stray counts job records of deliveries that must leave none.
	Stray int
	// LateAnswers and BadAnswers count claimer invocations whose answer
	// the event source mapping discards (after the timeout; not a valid
	// batch item failures response for the batch): their whole batch
	// comes back, late but not lost. A bad answer is a claimer bug and
	// fails the run; a late one is reported (the emulator can be slow).
	LateAnswers, BadAnswers int
	// Rejected counts deliveries answered 4xx (a valid, signed delivery
	// must never be); Undelivered those still 5xx after every redelivery.
	Rejected, Undelivered int
	// SecretsLogged counts secrets (tokens, JIT configs, the webhook
	// secret, the App key) found in the functions' logs.
	SecretsLogged int
	// OrphanRunners counts runners still registered at the end, after a
	// final janitor pass, when every job has ended (none has a live job).
	OrphanRunners int
	// Ran counts jobs a runner of ours took; Cancelled those cancelled
	// while queued; Elsewhere those another runner took.
	Ran, Cancelled, Elsewhere int
	// NeverBooted counts machines that never booted; RunnersDied runners
	// that died before taking their job.
	NeverBooted, RunnersDied int
	// Unreached counts deliveries made while the endpoint was down;
	// Redelivered the redeliveries the redeliverer asked GitHub for.
	Unreached, Redelivered int
	// OrphanMachines counts machines still up at the end, after a final
	// janitor pass: EC2 instances tagged with a job (every job has ended)
	// and dispatch messages whose config still registers a runner.
	OrphanMachines int
	// GonePoolRunners and GonePoolMachines count what the end state holds
	// of a pool absent from the RUNNER_POOLS in force at the end (the rename
	// scenario: rename.go) for a job whose record is terminal: an idle
	// runner, a pending or running instance. The janitor removes those whose
	// job's record names them (README, "Changing pools with jobs in
	// flight"), so what remains here it left by design: a record that does
	// not name them, no pool serving the job's labels, a spare's grace
	// still running, a scope no pool lists (the machines power off at the
	// boot script's idle limit, the operator deletes the offline runners).
	// They are not orphans; Left says what each one is. A busy runner, or one whose
	// job's record is not terminal, still counts as an orphan.
	GonePoolRunners, GonePoolMachines int
	Left                              []string
	// GaveUpQueued counts failed or abandoned jobs (each with a reason,
	// so not lost) that GitHub still has queued: jobs no runner will ever
	// run, listed in GaveUp. Figures only, as before this count existed.
	GaveUpQueued int
	GaveUp       []string
	// LostJobs says why each lost or duplicated job is counted.
	LostJobs []string
	// Statuses counts webhook answers by HTTP status.
	Statuses map[int]int
	// Counts is the fault breakdown.
	Counts Counts
	// Elapsed is the run's wall-clock time.
	Elapsed time.Duration
}

// OK reports whether the run proves the promise: every job ran or has a
// reason, nothing claimed twice, nothing left behind, refused or leaked.
func (r Report) OK() bool {
	return r.Jobs > 0 && r.Lost == 0 && r.DuplicateRunners == 0 && r.DuplicateInstances == 0 &&
		r.OrphanRunners == 0 && r.OrphanMachines == 0 &&
		r.ClaimedAfterDone == 0 && r.Stray == 0 && r.Rejected == 0 && r.SecretsLogged == 0 && r.BadAnswers == 0
}

// Line is the figures as key=value pairs, the required ones first.
func (r Report) Line() string {
	return fmt.Sprintf("jobs=%d faults=%d kills=%d duplicate_deliveries=%d lost=%d duplicate_runners=%d duplicate_instances=%d "+
		"github_calls_per_claim=%.2f aws_calls_per_job=%.2f claimed=%d done=%d failed=%d abandoned=%d redeliveries=%d "+
		"claimed_after_done=%d stray=%d rejected=%d undelivered=%d secrets_logged=%d orphan_runners=%d reclaimer_calls=%d "+
		"ran=%d cancelled=%d elsewhere=%d never_booted=%d runners_died=%d unreached=%d redelivered=%d orphan_machines=%d "+
		"late_answers=%d bad_answers=%d gone_pool_runners=%d gone_pool_machines=%d gave_up_queued=%d secondary_limited=%d elapsed=%s",
		r.Jobs, r.Faults, r.Kills, r.DuplicateDeliveries, r.Lost, r.DuplicateRunners, r.DuplicateInstances,
		r.GitHubCallsPerClaim, r.AWSCallsPerJob, r.Claimed, r.Done, r.Failed, r.Abandoned, r.Redeliveries,
		r.ClaimedAfterDone, r.Stray, r.Rejected, r.Undelivered, r.SecretsLogged, r.OrphanRunners, r.ReclaimerCalls,
		r.Ran, r.Cancelled, r.Elsewhere, r.NeverBooted, r.RunnersDied, r.Unreached, r.Redelivered, r.OrphanMachines,
		r.LateAnswers, r.BadAnswers, r.GonePoolRunners, r.GonePoolMachines, r.GaveUpQueued, r.SecondaryLimited, r.Elapsed.Round(time.Second))
}

// record is the part of a job record the accounting reads.
type record struct {
	PK             string `dynamodbav:"pk"`
	State          string `dynamodbav:"state"`
	Version        int64  `dynamodbav:"version"`
	Attempt        int    `dynamodbav:"attempt"`
	Pool           string `dynamodbav:"pool"`
	RunnerName     string `dynamodbav:"runner_name"`
	LastError      string `dynamodbav:"last_error"`
	LastErrorClass string `dynamodbav:"last_error_class"`
}

// final is a record as the accounting sees it.
type final struct {
	State job.State
	record
}

// scan reads every job record, fault-free (a Scan is for accounting only:
// the functions never scan).
func (r *run) scan(ctx context.Context) (map[int64]final, error) {
	out := map[int64]final{}
	var start map[string]ddbtypes.AttributeValue
	for {
		page, err := r.ddb.Scan(ctx, &dynamodb.ScanInput{
			TableName: aws.String(r.world.TableName), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true),
			FilterExpression:          aws.String("begins_with(pk, :p)"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "job#"}},
		})
		if err != nil {
			return nil, fmt.Errorf("scan job records: %w", err)
		}
		for _, it := range page.Items {
			var rec record
			if err := attributevalue.UnmarshalMap(it, &rec); err != nil {
				return nil, fmt.Errorf("decode job record: %w", err)
			}
			id, err := strconv.ParseInt(strings.TrimPrefix(rec.PK, "job#"), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("decode job record: pk %q", rec.PK)
			}
			out[id] = final{State: job.State(rec.State), record: rec}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		start = page.LastEvaluatedKey
	}
}

// instances counts pending or running EC2 instances per job id.
func (r *run) instances(ctx context.Context) (map[int64]int, error) {
	byPool, err := r.instancesByPool(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int64]int{}
	for id, pools := range byPool {
		for _, n := range pools {
			out[id] += n
		}
	}
	return out, nil
}

// instancesByPool counts pending or running EC2 instances per job id and
// pool (their ghclaim:pool tag).
func (r *run) instancesByPool(ctx context.Context) (map[int64]map[string]int, error) {
	out := map[int64]map[string]int{}
	in := &ec2api.DescribeInstancesInput{Filters: []ec2api.Filter{
		{Name: "tag-key", Values: []string{provision.TagJobID}},
		{Name: "instance-state-name", Values: []string{ec2api.StatePending, ec2api.StateRunning}},
	}}
	for {
		page, err := r.ec2.DescribeInstances(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("describe instances: %w", err)
		}
		for _, res := range page.Reservations {
			for _, inst := range res.Instances {
				id, pl, tagged := int64(0), "", false
				for _, t := range inst.Tags {
					switch t.Key {
					case provision.TagJobID:
						id, _ = strconv.ParseInt(t.Value, 10, 64)
						tagged = true
					case provision.TagPool:
						pl = t.Value
					}
				}
				if tagged {
					if out[id] == nil {
						out[id] = map[string]int{}
					}
					out[id][pl]++
				}
			}
		}
		if page.NextToken == "" {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// dispatched reads every dispatch message (hiding each for ten minutes, so
// none is read twice).
func (r *run) dispatched(ctx context.Context) ([]provision.DispatchMessage, error) {
	var out []provision.DispatchMessage
	url := r.pools[1].Provisioner.QueueURL
	for empty := 0; empty < 3; {
		res, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 600})
		if err != nil {
			return nil, fmt.Errorf("read dispatch queue: %w", err)
		}
		if len(res.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range res.Messages {
			var d provision.DispatchMessage
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &d); err != nil {
				return nil, fmt.Errorf("decode dispatch message: %w", err)
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// agentID is the runner id a ghfake JIT config registers.
func agentID(config string) int64 {
	var files map[string]string
	b, err := base64.StdEncoding.DecodeString(config)
	if err != nil || json.Unmarshal(b, &files) != nil {
		return 0
	}
	rb, err := base64.StdEncoding.DecodeString(files[".runner"])
	if err != nil {
		return 0
	}
	var runner struct{ AgentId string }
	if json.Unmarshal(rb, &runner) != nil {
		return 0
	}
	id, _ := strconv.ParseInt(runner.AgentId, 10, 64)
	return id
}

// jobOfRunner is the job id in a runner name "<pool>-<job>" (or
// "<pool>-<job>-<suffix>"), 0 when the name is not one of ours.
func jobOfRunner(name string) int64 {
	for _, p := range runnerPools {
		rest, ok := strings.CutPrefix(strings.ToLower(name), p+"-")
		if !ok {
			continue
		}
		digits, _, _ := strings.Cut(rest, "-")
		id, err := strconv.ParseInt(digits, 10, 64)
		if err == nil {
			return id
		}
	}
	return 0
}

// dupSampler keeps, per job, the most runners and machines it ever saw
// at one moment.
type dupSampler struct {
	mu       sync.Mutex
	runners  map[int64]int
	machines map[int64]int
}

// sample looks at the runners and the live instances now (fault-free).
func (d *dupSampler) sample(ctx context.Context, r *run) {
	perJob := map[int64]int{}
	for _, rn := range r.gh.Runners() {
		if id := jobOfRunner(rn.Name); id != 0 {
			perJob[id]++
		}
	}
	inst, err := r.instances(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.runners == nil {
		d.runners, d.machines = map[int64]int{}, map[int64]int{}
	}
	for id, n := range perJob {
		d.runners[id] = max(d.runners[id], n)
	}
	if err == nil {
		for id, n := range inst {
			d.machines[id] = max(d.machines[id], n)
		}
	}
}

// account reads the end state and turns it into the figures.
func (r *run) account(ctx context.Context) (Report, error) {
	recs, err := r.scan(ctx)
	if err != nil {
		return Report{}, err
	}
	instByPool, err := r.instancesByPool(ctx)
	if err != nil {
		return Report{}, err
	}
	msgs, err := r.dispatched(ctx)
	if err != nil {
		return Report{}, err
	}
	runners := r.gh.Runners()
	byID := map[int64]ghfake.Runner{}
	for _, rn := range runners {
		byID[rn.ID] = rn
	}
	live := map[int64]int{} // job → dispatch messages whose config still registers a runner
	for _, m := range msgs {
		if _, ok := byID[agentID(m.JITConfig)]; ok {
			live[m.JobID]++
		}
	}
	log := r.gh.Deliveries()
	answered := map[string]bool{} // GUIDs answered 2xx at least once
	c := r.inj.Counts()
	r.stats.mu.Lock()
	rep := Report{
		Jobs: len(r.plans), Faults: c.TotalFaults(), Kills: c.Kills, Counts: c,
		DuplicateDeliveries: r.stats.duplicates, Redeliveries: r.stats.redeliveries,
		Rejected: r.stats.rejected, Undelivered: r.stats.undelivered, Unreached: r.stats.unreached, Statuses: map[int]int{},
		LateAnswers: int(r.late.Load()), BadAnswers: int(r.badAnswers.Load()),
	}
	for k, v := range r.stats.statuses {
		rep.Statuses[k] = v
	}
	r.stats.mu.Unlock()
	_, finalPools := r.currentPools()
	gone := func(name string) bool { _, ok := pool.Find(finalPools, name); return !ok }
	ended := func(id int64) bool { rec, ok := recs[id]; return ok && rec.State.Terminal() }
	inst := map[int64]int{}
	for id, pools := range instByPool {
		for pl, n := range pools {
			if gone(pl) && ended(id) {
				rep.GonePoolMachines += n
				rep.Left = append(rep.Left, fmt.Sprintf("job %d: %d machines of pool %s, gone from RUNNER_POOLS, still up", id, n, pl))
				continue
			}
			inst[id] += n
		}
	}
	for _, d := range log {
		if d.OK() {
			answered[d.GUID] = true
		}
		if d.Redelivery {
			rep.Redelivered++
		}
	}
	if r.fleet != nil {
		rep.NeverBooted, rep.RunnersDied = r.fleet.count(fateNeverBoots), r.fleet.count(fateDies)
	}

	lose := func(id int64, format string, args ...any) {
		rep.LostJobs = append(rep.LostJobs, fmt.Sprintf("job %d: %s", id, fmt.Sprintf(format, args...)))
	}
	r.dups.mu.Lock()
	for _, p := range r.plans {
		id := p.Job.ID
		if n := r.dups.runners[id]; n > 1 {
			rep.DuplicateRunners += n - 1
			lose(id, "%d runners at once", n)
		}
		if n := r.dups.machines[id]; n > 1 {
			rep.DuplicateInstances += n - 1
			lose(id, "%d machines at once", n)
		}
	}
	r.dups.mu.Unlock()
	for _, rn := range runners {
		id := jobOfRunner(rn.Name)
		if id == 0 || r.byJob[id] == nil {
			continue
		}
		if n, ok := job.ParseRunnerName(rn.Name, runnerPools...); ok && gone(n.Pool) && ended(id) && !rn.Busy {
			rep.GonePoolRunners++
			rep.Left = append(rep.Left, fmt.Sprintf("job %d: runner %s (id %d, %s) of pool %s, gone from RUNNER_POOLS, still registered", id, rn.Name, rn.ID, rn.Status, n.Pool))
			continue
		}
		rep.OrphanRunners++
		lose(id, "runner %s (id %d, %s, busy %v) still registered", rn.Name, rn.ID, rn.Status, rn.Busy)
	}
	for _, p := range r.plans {
		id := p.Job.ID
		if n := inst[id] + live[id]; n > 0 {
			rep.OrphanMachines += n
			lose(id, "%d machines still up (%d instances, %d live dispatch messages)", n, inst[id], live[id])
		}
		if r.machines.hasJob(id) {
			rep.Claimed++
		}
		p.mu.Lock()
		doneFirst, status, ours, cancelled, takenBy := p.doneFirst, p.status, p.ours, p.cancelled, p.takenBy
		heard := false
		for _, g := range p.doneGUIDs {
			heard = heard || answered[g]
		}
		p.mu.Unlock()
		if doneFirst && r.machines.hasJob(id) {
			rep.ClaimedAfterDone++
			lose(id, "done before queued, yet it got a machine")
		}
		switch {
		case ours:
			rep.Ran++
		case cancelled:
			rep.Cancelled++
		case takenBy != "":
			rep.Elsewhere++
		}
		rec, ok := recs[id]
		switch {
		case !ok:
			rep.Lost++
			lose(id, "no record (%s, GitHub: %s)", p.Script, status)
		case !rec.State.Terminal():
			rep.Lost++
			lose(id, "stuck %s at version %d attempt %d (%s, GitHub: %s)", rec.State, rec.Version, rec.Attempt, p.Script, status)
		case rec.State == job.Done:
			rep.Done++
			if status == "queued" {
				rep.Lost++
				lose(id, "done, but still queued at GitHub (%s, heard: %v)", p.Script, heard)
			}
		case rec.State == job.Failed, rec.State == job.Abandoned:
			if rec.State == job.Failed {
				rep.Failed++
			} else {
				rep.Abandoned++
			}
			if strings.TrimSpace(rec.LastError) == "" {
				rep.Lost++
				lose(id, "%s without a reason", rec.State)
			}
			if status == "queued" {
				rep.GaveUpQueued++
				rep.GaveUp = append(rep.GaveUp, fmt.Sprintf("job %d: %s in pool %s, still queued at GitHub (%s): %s", id, rec.State, rec.Pool, p.Script, rec.LastError))
			}
		}
	}
	for id := range recs {
		if noiseID(id) {
			rep.Stray++
			lose(id, "noise delivery left a record")
		}
	}
	sort.Strings(rep.LostJobs)
	sort.Strings(rep.Left)

	gh := r.gh.Stats()
	rep.SecondaryLimited = gh.SecondaryLimited
	ghCalls := 0
	for _, n := range gh.Calls {
		ghCalls += n
	}
	if rep.Claimed > 0 {
		rep.GitHubCallsPerClaim = float64(ghCalls) / float64(rep.Claimed)
	}
	perJob := 0
	for _, fn := range []string{fnWebhook, fnClaimer} {
		perJob += c.ByCaller[fn][TargetDynamoDB] + c.ByCaller[fn][TargetSQS] + c.ByCaller[fn][TargetProvision]
	}
	rep.AWSCallsPerJob = float64(perJob) / float64(rep.Jobs)
	rep.ReclaimerCalls = c.ByCaller[fnReclaimer][TargetDynamoDB] + c.ByCaller[fnReclaimer][TargetSQS]

	configs := make([]string, 0, len(msgs))
	for _, m := range msgs {
		configs = append(configs, m.JITConfig)
	}
	rep.SecretsLogged = r.logs.count([][]byte{[]byte("ghs_"), Secret, []byte("PRIVATE KEY")}) + r.logs.pieces(configs)
	return rep, nil
}

// piece is the length of the JIT config pieces pieces looks for; a piece
// starts every piece/2 bytes of a config, so any run of 1.5 × piece bytes
// of one (36) holds a whole piece, wherever it was cut.
const piece = 24

// pieces is the number of places where a piece of one of configs appears
// in the log: its start, its middle, its end, or any part of it a line
// quoted. The first 24 bytes alone were looked for: a config cut or
// quoted from its middle went unseen.
func (l *logSink) pieces(configs []string) int {
	want := map[string]bool{}
	for _, c := range configs {
		for i := 0; i+piece <= len(c); i += piece / 2 {
			want[c[i:i+piece]] = true
		}
	}
	if len(want) == 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, n := l.buf.Bytes(), 0
	for i := 0; i+piece <= len(b); i++ {
		if want[string(b[i:i+piece])] {
			n++
			i += piece - 1 // count a leaked run once per piece's length
		}
	}
	return n
}

// logSink passes the functions' log lines on and keeps them to look for
// secrets at the end.
type logSink struct {
	mu  sync.Mutex
	out io.Writer
	buf bytes.Buffer
}

func newLogSink(out io.Writer) *logSink { return &logSink{out: out} }

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	return l.out.Write(p)
}

// count is the number of occurrences of any of needles.
func (l *logSink) count(needles [][]byte) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range needles {
		n += bytes.Count(l.buf.Bytes(), s)
	}
	return n
}
