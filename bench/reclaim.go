package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/wire/reclaimer"
)

// ReclaimResult is what sweeping a backlog of stale records cost.
type ReclaimResult struct {
	// Backlog is the number of stale records seeded; Swept how many the
	// measured passes re-enqueued.
	Backlog int `json:"backlog"`
	Swept   int `json:"swept"`
	// Passes is how many reclaimer runs (default configuration) were
	// measured; PerPass the mean records each re-enqueued.
	Passes  int     `json:"passes"`
	PerPass float64 `json:"per_pass"`
	SeedS   float64 `json:"seed_s"`
	// WallS is the time of the measured passes; PassMaxS the longest
	// (the function's timeout is 55 s, its budget reclaim.DefaultBudget).
	WallS    float64 `json:"wall_s"`
	PassMaxS float64 `json:"pass_max_s"`
	// AWSS is the time spent in AWS requests; OwnS the rest (ours).
	AWSS        float64            `json:"aws_s"`
	OwnS        float64            `json:"own_s"`
	RecordsPerS float64            `json:"records_per_s"`
	Calls       map[string]int     `json:"calls"`
	OpLatencyMS map[string]float64 `json:"op_latency_ms"`
	// CallsPerRecord counts every request; FloorPerRecord is 2: the
	// conditional take-back and the send (the rest are the queries that
	// find stale keys and the BatchGetItem that reads their records, one
	// each per page of up to 100).
	CallsPerRecord float64 `json:"calls_per_record"`
	FloorPerRecord float64 `json:"floor_per_record"`
	// Complete is set when the passes drained the whole backlog; when
	// not, the Projected* figures extend the measured rate to it.
	Complete bool `json:"complete"`
	// ProjectedS is the time to drain the backlog at the measured rate;
	// ProjectedCalls its requests; ProjectedPasses the passes (= minutes on
	// the default one-minute schedule) at the measured records per pass.
	ProjectedS      float64 `json:"projected_s"`
	ProjectedCalls  int     `json:"projected_calls"`
	ProjectedPasses int     `json:"projected_passes"`
}

// SeedStale writes n pending records created an hour before now, whose
// outbox grace has long passed: the reclaimer's "outbox lost" case, the one
// that every record reaches after an SQS outage. Records are written with
// BatchWriteItem in the store's item shape (DESIGN.md data model); job ids
// start above base.
func SeedStale(ctx context.Context, env *Env, n int, base int64, now time.Time) error {
	created := job.Millis(now.Add(-time.Hour))
	shards := env.Store.Options().Shards
	var batch []types.WriteRequest
	flush := func() error {
		for len(batch) > 0 {
			out, err := env.DB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{env.Stack.TableName: batch},
			})
			if err != nil {
				return fmt.Errorf("seed: %w", err)
			}
			batch = out.UnprocessedItems[env.Stack.TableName]
		}
		return nil
	}
	for i := range n {
		id := base + int64(i) + 1
		item := map[string]types.AttributeValue{
			"pk":              s(job.Key(id)),
			"state":           s(string(job.Pending)),
			"version":         n1,
			"attempt":         n0,
			"due_at":          nn(created),
			"repo":            s("octo-org/octo-repo"),
			"installation_id": nn(42),
			"labels":          &types.AttributeValueMemberL{Value: []types.AttributeValue{s("self-hosted"), s("linux"), s("x64")}},
			"pool":            s(BenchPool.Name),
			"run_id":          nn(10_000_000_000 + id),
			"created_at":      nn(created),
			"updated_at":      nn(created),
			"sweep_shard":     s(job.Shard(id, shards)),
			"sweep_at":        nn(created + env.Store.Options().PendingGrace.Milliseconds()),
		}
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		if len(batch) == 25 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

var (
	n0 = nn(0)
	n1 = nn(1)
)

func nn(v int64) types.AttributeValue { return n(v) }

// MeasureReclaim seeds backlog stale records and runs the reclaimer, in its
// default configuration and under the function's 55 s deadline, pass after
// pass until the backlog is drained or limit has passed (0: no limit).
func MeasureReclaim(ctx context.Context, env *Env, backlog int, base int64, limit time.Duration) (ReclaimResult, error) {
	r := ReclaimResult{Backlog: backlog, FloorPerRecord: 2}
	t0 := time.Now()
	if err := SeedStale(ctx, env, backlog, base, t0); err != nil {
		return r, err
	}
	r.SeedS = round(time.Since(t0).Seconds(), 2)

	rc, err := NewReclaimer(ctx, env)
	if err != nil {
		return r, err
	}
	before := env.Count.Snapshot()
	start := time.Now()
	for r.Swept < backlog && (limit <= 0 || time.Since(start) < limit) {
		pctx, cancel := context.WithTimeout(ctx, 55*time.Second)
		p0 := time.Now()
		rep, err := rc.Run(pctx)
		cancel()
		if err != nil {
			return r, fmt.Errorf("reclaim pass %d: %w", r.Passes+1, err)
		}
		r.Passes++
		r.PassMaxS = max(r.PassMaxS, round(time.Since(p0).Seconds(), 2))
		r.Swept += rep.RequeuedTotal()
		if rep.RequeuedTotal() == 0 {
			break
		}
	}
	wall := time.Since(start)
	d := env.Count.Snapshot().Since(before)
	r.Complete = r.Swept >= backlog
	r.WallS = round(wall.Seconds(), 2)
	r.AWSS = round(d.Busy.Seconds(), 2)
	r.OwnS = round((wall - d.Busy).Seconds(), 2)
	r.RecordsPerS = round(float64(r.Swept)/wall.Seconds(), 1)
	r.PerPass = round(float64(r.Swept)/float64(max(1, r.Passes)), 1)
	r.Calls = d.Calls
	r.CallsPerRecord = round(float64(d.Total())/float64(max(1, r.Swept)), 3)
	r.OpLatencyMS = map[string]float64{}
	for op, k := range d.Calls {
		r.OpLatencyMS[op] = ms(d.OpBusy[op] / time.Duration(k))
	}
	if r.Swept > 0 {
		r.ProjectedS = round(float64(backlog)/float64(r.Swept)*wall.Seconds(), 1)
		r.ProjectedCalls = int(math.Round(r.CallsPerRecord * float64(backlog)))
		r.ProjectedPasses = int(math.Ceil(float64(backlog) / r.PerPass))
	}
	return r, nil
}

// NewReclaimer returns the reclaimer every bench pass runs: the one
// functions/reclaimer runs, from its own wiring (shared/wire/reclaimer),
// with the stack's environment and its defaults (the sweep budget, the
// logger and the metrics, written to a discarding stream), every request
// counted. Its GitHub App reads its key only to check a claimed record,
// which the bench's stale records are not.
func NewReclaimer(ctx context.Context, env *Env) (*reclaim.Reclaimer, error) {
	pools, err := json.Marshal([]pool.Pool{BenchPool})
	if err != nil {
		return nil, err
	}
	return reclaimer.New(ctx, env.Function(map[string]string{"RUNNER_POOLS": string(pools), "GITHUB_APP_ID": "1"}))
}
