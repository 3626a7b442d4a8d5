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
//   - The dedup key delivery#<guid> is read first (a duplicate answers 200
//     and does nothing; a failed read counts as unseen, since everything
//     after it is idempotent) but written LAST. Written first, a crash after it
//     would make GitHub's redelivery of the same GUID a "duplicate" of a job
//     that was never recorded: lost. Written last, a crash before it only
//     means the redelivery repeats idempotent steps: CreateJob is
//     conditional (the job record itself dedups the job across GUIDs), and
//     MarkDone is an upsert.
//   - 500 only while nothing durable was written (CreateJob or MarkDone
//     failed), so a redelivery is always safe. Once the job
//     record exists, the answer is 2xx whatever fails next: GitHub never
//     redelivers by itself, and the record is an outbox. If the SQS send
//     fails, the record stays pending and the reclaimer sends it after its
//     grace; if MarkQueued fails, the message is already out and the
//     claimer accepts a pending record.
//   - A job we do not serve (waiting, no matching pool, owner not allowed,
//     public repository refused) is answered 200 before the table is
//     touched: no dedup read, no dedup key, no record. The decision costs
//     no API call, so a redelivery simply re-decides it (O(1), free); a
//     dedup key written on skip would outlive GitHub's redelivery window and
//     turn "fix RUNNER_POOLS / ALLOWED_OWNERS, then Redeliver" (same GUID)
//     into a silent "duplicate". It also spares the writes of most
//     deliveries, which are for GitHub-hosted jobs.
//   - in_progress / completed move the record to done (or create it done
//     when they overtake queued), so a late queued creates nothing and a
//     retry in flight stops. They do not need installation (marking done
//     calls nobody), so a payload without it is applied, not refused;
//     installation.id is required for queued only, whose claim calls GitHub
//     as that installation.
//   - Every delivery runs under a budget (DefaultBudget, 8 s) well inside
//     GitHub's 10 s timeout.
//   - Unknown actions are refused (400) rather than guessed at; unknown
//     fields are ignored, since GitHub adds fields without notice.
//
// Every decision is one JSON log line with delivery_id, job_id, action and
// outcome.
package webhook
