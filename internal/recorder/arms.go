package recorder

import (
	"context"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/qsketch"
	"github.com/svcdev/svc/internal/runs"
)

// armKey names one row of usage_arm_hourly: the calls of one arm of a deployment's canary, its
// target and hour (docs/API.md, "Usage by arm").
type armKey struct {
	deployment, canary, arm, target string
	hour                            int64
}

// armAdd is what a batch adds to one arm's row: its counts and the latency and time-to-first-token
// sketches of the calls it answered.
type armAdd struct {
	dbsqlc.UsageArmAddParams
	latency, ttft qsketch.Sketch
}

// aggregateArms sums the runs of a batch that an arm answered (a deployment with a canary) into their
// usage_arm_hourly rows; runs without an arm add nothing.
func aggregateArms(batch []runs.Run) map[armKey]*armAdd {
	const hourMs = int64(time.Hour / time.Millisecond)
	var out map[armKey]*armAdd
	for i := range batch {
		run := &batch[i]
		if run.Arm == "" || run.EvalOf != "" {
			continue // no canary; or an eval's replay, which is no arm of a canary (docs/API.md, "Evals")
		}
		if out == nil {
			out = make(map[armKey]*armAdd)
		}
		at := run.CreatedAt.UnixMilli()
		k := armKey{run.DeploymentID, run.CanaryID, run.Arm, run.ArmTarget, at - at%hourMs}
		u := out[k]
		if u == nil {
			u = &armAdd{UsageArmAddParams: dbsqlc.UsageArmAddParams{DeploymentID: k.deployment, CanaryID: k.canary, Arm: k.arm, ArmTarget: k.target, Hour: k.hour}}
			out[k] = u
		}
		u.Requests++
		if !runOK(run) {
			u.Errors++
		} else {
			u.latency.Add(ms(run.Latency))
			u.ttft.Add(ms(run.TTFT))
		}
		u.PromptTokens += int64(run.PromptTokens)
		u.CompletionTokens += int64(run.CompletionTokens)
		*armLatency(&u.UsageArmAddParams, db.LatencyBucket(run.Latency.Milliseconds()))++
		*armTTFT(&u.UsageArmAddParams, db.LatencyBucket(run.TTFT.Milliseconds()))++
	}
	return out
}

// ms is a duration in (fractional) milliseconds, the unit of the sketches.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// addUsage writes a batch's usage rows and arm rows in its transaction, sketches merged.
func (r *Recorder) addUsage(ctx context.Context, tx dbsqlc.DBTX, usage map[usageKey]*usageAdd, arms map[armKey]*armAdd) error {
	for _, u := range usage {
		if err := r.addUsageRow(ctx, tx, u); err != nil {
			return err
		}
	}
	for _, u := range arms {
		if err := r.addArmRow(ctx, tx, u); err != nil {
			return err
		}
	}
	return nil
}

// addUsageRow adds a batch's counts to a usage row, then merges its sketch into the row's. The upsert
// holds the row (PostgreSQL's row lock, SQLite's write lock) until the transaction ends, so the read,
// merge and write of the sketch cannot interleave with another writer's. A row that held calls before
// it had a sketch (written before the sketches were) keeps none: its percentiles stay estimates from
// its histogram rather than a sketch of only part of its calls.
func (r *Recorder) addUsageRow(ctx context.Context, tx dbsqlc.DBTX, u *usageAdd) error {
	if err := r.q.UsageAdd(ctx, tx, u.UsageAddParams); err != nil {
		return err
	}
	row, err := r.q.UsageSketch(ctx, tx, dbsqlc.UsageSketchParams{DeploymentID: u.DeploymentID, KeyID: u.KeyID, Hour: u.Hour})
	if err != nil {
		return err
	}
	merged, ok := mergeSketch(row.LatencySketch, row.Requests-u.Requests, &u.latency)
	if !ok {
		return nil
	}
	return r.q.UsageSketchSet(ctx, tx, dbsqlc.UsageSketchSetParams{LatencySketch: merged, DeploymentID: u.DeploymentID, KeyID: u.KeyID, Hour: u.Hour})
}

// addArmRow is addUsageRow for an arm's row and its two sketches.
func (r *Recorder) addArmRow(ctx context.Context, tx dbsqlc.DBTX, u *armAdd) error {
	if err := r.q.UsageArmAdd(ctx, tx, u.UsageArmAddParams); err != nil {
		return err
	}
	k := dbsqlc.UsageArmSketchesParams{DeploymentID: u.DeploymentID, CanaryID: u.CanaryID, Arm: u.Arm, ArmTarget: u.ArmTarget, Hour: u.Hour}
	row, err := r.q.UsageArmSketches(ctx, tx, k)
	if err != nil {
		return err
	}
	before := row.Requests - u.Requests
	lat, ok := mergeSketch(row.LatencySketch, before, &u.latency)
	if !ok {
		return nil
	}
	ttft, _ := mergeSketch(row.TtftSketch, before, &u.ttft)
	return r.q.UsageArmSketchesSet(ctx, tx, dbsqlc.UsageArmSketchesSetParams{LatencySketch: lat, TtftSketch: ttft,
		DeploymentID: k.DeploymentID, CanaryID: k.CanaryID, Arm: k.Arm, ArmTarget: k.ArmTarget, Hour: k.Hour})
}

// mergeSketch is the encoding of a row's stored sketch merged with a batch's; ok is false when the row
// held calls (before > 0) without a sketch, or its sketch is unreadable, and is left as it is.
func mergeSketch(stored []byte, before int64, add *qsketch.Sketch) (merged []byte, ok bool) {
	if stored == nil && before > 0 {
		return nil, false
	}
	s, err := qsketch.Decode(stored)
	if err != nil {
		return nil, false
	}
	s.Merge(add)
	return s.Encode(), true
}

func armLatency(u *dbsqlc.UsageArmAddParams, bucket int) *int64 {
	return [...]*int64{&u.Lat25, &u.Lat50, &u.Lat100, &u.Lat250, &u.Lat500, &u.Lat1000, &u.Lat2500,
		&u.Lat5000, &u.Lat10000, &u.Lat30000, &u.Lat60000, &u.LatInf}[bucket]
}

func armTTFT(u *dbsqlc.UsageArmAddParams, bucket int) *int64 {
	return [...]*int64{&u.Ttft25, &u.Ttft50, &u.Ttft100, &u.Ttft250, &u.Ttft500, &u.Ttft1000, &u.Ttft2500,
		&u.Ttft5000, &u.Ttft10000, &u.Ttft30000, &u.Ttft60000, &u.TtftInf}[bucket]
}
