// Package webhook owns the front door of ghclaim: it answers GitHub's
// workflow_job deliveries (Lambda Function URL or API Gateway HTTP API,
// payload format 2.0), verifies their signature, validates their payload,
// and turns a queued job that one of our pools serves into a durable job
// record plus one claim message.
//
// It must never claim, call GitHub, or decide retries (the claimer and the
// reclaimer do), never write anything for a delivery it answers 4xx, and
// never log or echo a secret or a request body.
//
// Decisions, in the order a delivery meets them:
//
//   - The signature (X-Hub-Signature-256, HMAC-SHA256 of the raw body,
//     hmac.Equal) is checked before anything is parsed, against every
//     configured secret, so a secret rotates without downtime. SHA-1
//     signatures are never accepted. Bad signature: 401, nothing written.
//   - The whole payload is parsed and validated (Parse) before the first
//     write: a malformed delivery gets a 400 naming the field and leaves no
//     trace, so fixing the sender and redelivering starts clean.
//   - Fewest requests. A served queued job costs two: the job record's
//     conditional put, then the claim message. A served in_progress or
//     completed costs one conditional upsert (MarkDone). A job we do not
//     serve costs none, whatever the action, unless a runner of ours has
//     it (below). Nothing is read first, except
//     on the rare taken-runner path below (one read, then one conditional
//     write and one message).
//   - The job record is the dedup key. CreateJob succeeds only when no live
//     record exists (one past its expires_at counts as absent: TTL deletion
//     is lazy) and sets expires_at = creation + RECORD_TTL (7 days, past
//     GitHub's 3-day redelivery window). A redelivery of the same GUID, a
//     new GUID for a job already recorded, or a queued that in_progress
//     overtook is refused by that put (a *job.ConflictError carrying the
//     record, logged) and answered 200 duplicate: nothing is sent, so one
//     message per job stays a promise. There is no delivery#<guid> key any
//     more: it cost a read and a write on every delivery and guarded
//     nothing the record does not (a crash between its steps is covered by
//     the record and the reclaimer, below).
//   - 500 only while nothing durable was written (CreateJob or MarkDone
//     failed), so a redelivery is always safe. Once the job record exists,
//     the answer is 2xx whatever fails next: GitHub never redelivers by
//     itself, and the record is an outbox. If the SQS send fails (or the
//     function dies before it), the record stays pending and the
//     reclaimer sends it once PendingGrace has passed.
//   - The record stays pending after the send: marking it queued was a
//     third request that bought nothing, since the claimer leases a pending
//     record as readily as a queued one. So "pending" also means "sent,
//     waiting for a claimer", and the reclaimer cannot tell that from a lost
//     send until PendingGrace has passed. PendingGrace therefore defaults to
//     15 minutes, the same bound QueuedGrace puts on any message waiting in
//     the queue: with the default claimer concurrency (10) and a claim
//     taking ~2 s, that covers a backlog of thousands of jobs. A shorter
//     grace would make the reclaimer re-send every job still waiting in a
//     backlog longer than it, exactly when the claimers are saturated: the
//     re-send (version+1) is harmless (the claimer drops the older message
//     by its version) but costs a write and a message, and sends the job to
//     the back of the queue. The price is paid only by a send that really
//     failed, which is rare (the SDK retries it) and logged
//     (pending_send_failed): that job waits up to PendingGrace plus one
//     sweep. A deployment whose backlogs are short can lower PENDING_GRACE.
//   - A job we do not serve (waiting, no matching pool, owner not allowed,
//     public repository refused) is answered 200 before the table is
//     touched, for every action. The decision costs no API call, so a
//     redelivery simply re-decides it (O(1), free): "fix RUNNER_POOLS /
//     ALLOWED_OWNERS, then Redeliver" (same GUID) claims the job. It also
//     spares the writes of most deliveries, which are for GitHub-hosted
//     jobs. A served job keeps being served while its deliveries arrive
//     (the same labels, the same decision); a pool removed mid-job only
//     leaves its record to the claimer and reclaimer, which ask GitHub.
//     One exception: an in_progress or completed that names a runner of
//     ours (`<pool>-<job_id>[-r<n>]` after a configured pool) is applied
//     as a served job's, logged with refused_now: the job was claimed
//     while its pool served it (before allow_public was turned off, or a
//     relabel), and skipped, a job that ran was left claimed until the
//     maximum age abandoned it. Only a recorded job is marked done
//     (job.Report.Recorded): with no record, no runner of ours was made
//     for it (a claim records the job first), and one named like ours is
//     somebody else's (another stack's with the same pool names): nothing
//     is written. A refused job run on the runner of another job of ours,
//     A (A's record waits for exactly it, registered where the job could
//     take it), is warned about and counted (refused_job_ran): our runner
//     group let it in. ALLOWED_OWNERS is never overridden, and
//     GitHub-hosted jobs name no runner of ours: their deliveries still
//     cost nothing. Another tool's runner named like ours costs the
//     refused conditional write (and on the taken-runner path a read).
//   - in_progress / completed move the record to done (or create it done,
//     with its pool, when they overtake queued), so a late queued creates
//     nothing and a retry in flight stops. They do not need installation
//     (marking done calls nobody), so a payload without it is applied, not
//     refused; installation.id is required for queued only, whose claim
//     calls GitHub as that installation.
//   - Every delivery runs under a budget (DefaultBudget, 8 s) well inside
//     GitHub's 10 s timeout.
//   - An unknown action is not guessed at: nothing is written, and it is
//     answered 202 ignored with a warning naming it. GitHub adds actions
//     without notice (waiting came late), and a 4xx would be a failed
//     delivery in the App's log, which the redeliverer asks again up to
//     its attempts for every such GUID, spending the App's budget and
//     firing RedeliveryAttemptsSpentAlarm for an answer no redelivery
//     changes. Unknown fields are ignored, since GitHub adds fields
//     without notice. No answer is 3xx: GitHub follows no redirect.
//   - in_progress and completed move a claimed record to done too (claimed
//     is not terminal: the reclaimer checks it after the runner-start grace).
//   - A runner taken by another job. GitHub gives a queued job to any idle
//     runner whose labels fit, so the runner made for job A can run job B.
//     An in_progress for B naming a runner of ours made for A ≠ B (any
//     attempt's name, job.ParseRunnerName) sends A back for a new attempt
//     at once, so a job whose runner was taken never waits for the
//     reclaimer's runner-start grace: B is marked done as always, then A's
//     record is read (B's upsert cannot return another item) and, when it
//     is claimed and waits for exactly that runner, taken back to queued
//     conditionally on the version read (a new runner name, counted toward
//     neither the replacement cap nor max age: the runner did our work;
//     failing past MAX_AGE already, A is left to the reclaimer, which
//     abandons it with its alarm), and A's claim message is sent. The new attempt has a runner name and
//     a machine of its own (job.RunnerNameAt, shared/provision), and the
//     taken runner and its machine are left to B. A redelivery finds A
//     moved on and changes nothing; a lost race or an error leaves A to the
//     reclaimer's liveness check, which does the same; the delivery's
//     answer never depends on A. Logged for A with taken_from_job_id and
//     outcome runner_taken (runner_taken_left, runner_taken_stale,
//     runner_taken_failed). A runner's name is its registrant's choice:
//     A is sent back only when its runner is registered where B's job
//     could take it (B's repository for a repository's runner, B's
//     organisation for an organisation's: couldTake), so a runner
//     somebody else named after A cannot make A start machine after
//     machine (a swap counts toward neither cap).
//
// Every decision is one JSON log line with delivery_id, job_id, action and
// outcome.
//
// Metrics ride on that line (obs.Inline, see metrics.go): it is the
// delivery's EMF document, so they cost no line and no API call of their
// own. Deliveries counts every delivery by outcome, and by event and pool
// too when the event is one ghclaim handles (workflow_job, ping): the
// event header is read before the signature is checked, and a forged one
// must not mint a custom metric. JobsCreated counts the job records
// created, by pool; TimeToRunner is GitHub's own wait of a job
// (started_at − created_at, from its in_progress delivery), by pool. A
// logger level that drops the decision line (LOG_LEVEL=warn drops a 2xx's,
// error a 4xx's too) must not drop its counts: the metrics then get an EMF
// line of their own (obs.Emit, the same values and dimensions), one per
// delivery since a Function URL invocation has no batch end to flush at.
// One or the other, never both; the check is the logger's Enabled, so a
// logged line costs nothing more.
package webhook
