// Package bench measures ghclaim the way a user choosing between it and
// the Terraform/TypeScript runner modules would: time to a runner, GitHub
// API budget spent per job, and AWS cost per job. Every figure that could
// drift with the machine is a ratio measured in one run, next to the floor
// it is compared with (the same AWS requests issued directly with the SDK,
// interleaved with the real code path), because the machines this runs on
// are noisy and absolute times move from run to run.
//
// The package holds the scenarios (plain functions over an Env: the
// emulator, the deployed template and counted SDK clients); the Go
// benchmarks in bench_test.go run them under testing.B so benchstat can
// compare two commits, and cmd/benchreport runs them all and writes
// REPORT.md and report.json.
//
// Decisions:
//   - The bench measures what ships: the webhook and the claimer are the
//     handlers their functions run, built by shared/wire/webhook and
//     shared/wire/claimer from a wire.Env that Env.Function points at the
//     emulator stack (its table, queue and secrets: the App key is put in
//     the stack's secret, the webhook's deliveries are signed with the
//     secret the stack generated) and whose HTTPClient is the Counter, so
//     every AWS request the wired function makes is counted, secret reads
//     included. The reclaimer is still wired here (reclaim.go).
//   - The provisioner's own send (the dispatch pool's JIT config message)
//     is the machine's start, not the job's overhead: the Counter counts
//     the dispatch queue apart (Counter.Apart), and each send's start is
//     the job's provisioning time.
//   - A job's DynamoDB requests are told by the item they are on (its
//     partition key's prefix, read at Snapshot time): the job's own
//     record, a cost of each job, and the installation's shared rate
//     item, which a claimer instance reads and writes per refresh and
//     whose share per job shrinks as the instance claims more. The report
//     gives the total and both parts.
//   - AWS calls are counted at the HTTP level (Counter, an aws.HTTPClient
//     decorator keyed by X-Amz-Target), so retries, pagination and any call
//     a port hides are all in the count: the bill is per HTTP request.
//   - The floor of a delivery is one bare SendMessage from Go, in the same
//     run: the TypeScript runner module's whole webhook path (it sends once,
//     with no dedup and no outbox). The handler does one more request (the
//     job record's conditional put, which is also the dedup key and the
//     outbox); issue 11 sets handler p50 / floor p50 ≤ 2.0, the module's own
//     ratio on that baseline. The report names every call so the
//     difference is visible, not hidden in a ratio.
//   - Handler and floor alternate delivery by delivery, so a slow patch of
//     the machine (or of moto) hits both alike.
//   - Everything runs against moto on 127.0.0.1: latencies are moto's, not
//     AWS's. The ratios and the call counts carry over; the milliseconds do
//     not.
//
// bench must never run in `make test` (it only holds benchmarks, and the
// tests it has are quick), never talk to anything but 127.0.0.1, and never
// edit the packages it measures: it uses their exported API, as the
// functions' main packages do.
package bench
