package claim_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

const waitingSecret = "audit-secret"

// deliverSigned signs and hands one workflow_job delivery for id to h, as
// GitHub sends it, and returns the handler's reply.
func deliverSigned(t *testing.T, wh *webhook.Handler, action, guid string, id int64) webhook.Reply {
	t.Helper()
	body := ghfake.WorkflowJobPayload(ghfake.Delivery{Action: action, Repo: repo, Private: true, JobID: id, RunID: id * 10,
		Labels: []string{"self-hosted", "linux"}, Installation: installation})
	mac := hmac.New(sha256.New, []byte(waitingSecret))
	mac.Write(body)
	req := events.LambdaFunctionURLRequest{
		Headers: map[string]string{"x-github-event": "workflow_job", "x-github-delivery": guid,
			"x-hub-signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil)), "content-type": "application/json"},
		Body: string(body),
	}
	req.RequestContext.HTTP.Method = "POST"
	resp, err := wh.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", action, err)
	}
	var r webhook.Reply
	_ = json.Unmarshal([]byte(resp.Body), &r)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s: %d %+v", action, resp.StatusCode, r)
	}
	return r
}

// TestWaitingJobApprovedLateIsServed: a job that references an
// environment with required reviewers. GitHub sends workflow_job "queued"
// when the job is created, then "waiting" while the environment's
// protection rules hold it, then "queued" again once a reviewer approves
// (CloudSnorkel/cdk-github-runners#382: "jobs start out as queued, switch
// to waiting, and finally switch to queued back"); GET
// /repos/{o}/{r}/actions/jobs/{id} says "waiting" meanwhile, for up to 30
// days. The reviewer approves 4 hours later. Our claimer, reclaimer and
// webhook run every minute in between, on the in-memory stand-ins.
//
// Once approved, the job has a runner of ours that can take it (or a claim
// on its way). Before, the reclaimer took "waiting" for "still queued",
// replaced the idle runner every few checks and abandoned the job at the
// replacement cap (its last runner removed); the post-approval "queued",
// answered "duplicate" by the job record, brought nothing: the job waited
// until GitHub cancelled it.
func TestWaitingJobApprovedLateIsServed(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id = int64(9100)
	ctx := context.Background()
	wh, err := webhook.New(webhook.Config{Store: h.store, Queue: h.queue, Now: h.clock.Now,
		Secrets: [][]byte{[]byte(waitingSecret)}, Pools: h.pools})
	if err != nil {
		t.Fatal(err)
	}
	rc := h.reclaimer(t)
	c := h.claimer(t, claimerOpt{})
	owner, name, _ := strings.Cut(repo, "/")
	ours := func() []ghfake.Runner { // runners of ours registered for the job
		var out []ghfake.Runner
		for _, r := range h.gh.Runners() {
			if r.Name == job.RunnerName("linux", id) || strings.HasPrefix(r.Name, job.RunnerName("linux", id)+"-r") {
				out = append(out, r)
			}
		}
		return out
	}
	// step: every claim message is handled, every registered runner whose
	// machine is up connects (online, idle: GitHub assigns nothing to it
	// while the job waits), and one reclaimer pass runs.
	provisioned := 0
	step := func() {
		for {
			msgs := h.esm.receive(10)
			if len(msgs) == 0 {
				break
			}
			h.invoke(t, c, msgs...)
		}
		for _, r := range ours() {
			if r.Status == "offline" && h.machinesUp(id) > 0 {
				if err := h.gh.SetRunner(r.Name, "online", false); err != nil {
					t.Fatal(err)
				}
			}
		}
		provisioned = len(h.prov.Requests())
		if _, err := rc.Run(ctx); err != nil {
			t.Fatalf("reclaim: %v", err)
		}
	}

	h.gh.SetJob(owner, name, ghfake.Job{ID: id, RunID: id * 10, Status: "queued", Labels: []string{"self-hosted", "linux"}})
	if r := deliverSigned(t, wh, "queued", "g-queued-1", id); r.Status != webhook.StatusAccepted {
		t.Fatalf("first queued: %+v", r)
	}
	h.gh.SetJob(owner, name, ghfake.Job{ID: id, RunID: id * 10, Status: "waiting", Labels: []string{"self-hosted", "linux"}})
	deliverSigned(t, wh, "waiting", "g-waiting", id)

	start := h.clock.Now()
	var abandonedAfter time.Duration
	for h.clock.Now().Sub(start) < 4*time.Hour {
		step()
		if abandonedAfter == 0 && h.get(t, id).State.Terminal() {
			abandonedAfter = h.clock.Now().Sub(start)
		}
		h.clock.Advance(time.Minute)
	}
	before := h.get(t, id)

	// The reviewer approves: GitHub queues the job and delivers queued again.
	h.gh.SetJob(owner, name, ghfake.Job{ID: id, RunID: id * 10, Status: "queued", Labels: []string{"self-hosted", "linux"}})
	reply := deliverSigned(t, wh, "queued", "g-queued-2", id)
	for i := 0; i < 5; i++ {
		step()
		h.clock.Advance(time.Minute)
	}
	after := h.get(t, id)
	var idle []string
	for _, r := range ours() {
		if !r.Busy {
			idle = append(idle, fmt.Sprintf("%s(%s)", r.Name, r.Status))
		}
	}
	t.Logf("before approval: %s after %s, replacements %d, error %q; %d machines provisioned while the job waited; after approval: %s, reply %+v, runners %v",
		before.State, abandonedAfter, before.Replacements, before.LastError, provisioned, after.State, reply, idle)
	if after.State.Terminal() && len(idle) == 0 {
		t.Fatalf("approved job %d is lost: record %s (%q) and no runner of ours for it; the post-approval queued was answered %q (%s)",
			id, after.State, after.LastError, reply.Status, reply.Message)
	}
}

// reclaimer is a reclaimer "process" over the world of h, with h.pools:
// its own GitHub client and rate memory, and the in-memory provisioner's
// cleanup.
func (h *harness) reclaimer(t *testing.T) *reclaim.Reclaimer {
	t.Helper()
	gh, tracker := newGitHub(t, h.store, h.ghURL, h.clock.Now, true)
	rc, err := reclaim.New(reclaim.Config{Store: h.store, Queue: h.queue, Now: h.clock.Now, Rand: random.New(1),
		Logger: h.log, Sleep: func(context.Context, time.Duration) error { return nil },
		GitHub: gh.(reclaim.GitHub), Rates: tracker, Pools: h.pools,
		Provisioner: reclaim.ProvisionerFunc(func(ctx context.Context, lo reclaim.Leftover) error {
			return h.prov.Cleanup(ctx, pool.Request{JobID: lo.JobID, RunID: lo.RunID, Repo: lo.Repo, Pool: lo.Pool, RunnerName: lo.RunnerName, KeepMachines: lo.KeepMachines})
		})})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// machinesUp counts job id's machines not stopped.
func (h *harness) machinesUp(id int64) int {
	n := 0
	for _, m := range h.prov.Machines(id) {
		if !m.Stopped {
			n++
		}
	}
	return n
}
