package recorder

import (
	"context"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// armKey names one row of usage_arm_hourly: the calls of one arm of a deployment's canary, its
// target and hour (docs/API.md, "Usage by arm").
type armKey struct {
	deployment, arm, target string
	hour                    int64
}

// aggregateArms sums the runs of a batch that an arm answered (a deployment with a canary) into their
// usage_arm_hourly rows; runs without an arm add nothing.
func aggregateArms(batch []queued) map[armKey]*dbsqlc.UsageArmAddParams {
	const hourMs = int64(time.Hour / time.Millisecond)
	var out map[armKey]*dbsqlc.UsageArmAddParams
	for i := range batch {
		run := &batch[i].run
		if run.Arm == "" {
			continue
		}
		if out == nil {
			out = make(map[armKey]*dbsqlc.UsageArmAddParams)
		}
		at := run.CreatedAt.UnixMilli()
		k := armKey{run.DeploymentID, run.Arm, run.ArmTarget, at - at%hourMs}
		u := out[k]
		if u == nil {
			u = &dbsqlc.UsageArmAddParams{DeploymentID: k.deployment, Arm: k.arm, ArmTarget: k.target, Hour: k.hour}
			out[k] = u
		}
		u.Requests++
		if !runOK(run) {
			u.Errors++
		}
		u.PromptTokens += int64(run.PromptTokens)
		u.CompletionTokens += int64(run.CompletionTokens)
		*armLatency(u, db.LatencyBucket(run.Latency.Milliseconds()))++
		*armTTFT(u, db.LatencyBucket(run.TTFT.Milliseconds()))++
	}
	return out
}

// addArmUsage writes the arms' rows of a batch in its transaction.
func (r *Recorder) addArmUsage(ctx context.Context, tx dbsqlc.DBTX, arms map[armKey]*dbsqlc.UsageArmAddParams) error {
	for _, u := range arms {
		if err := r.q.UsageArmAdd(ctx, tx, *u); err != nil {
			return err
		}
	}
	return nil
}

func armLatency(u *dbsqlc.UsageArmAddParams, bucket int) *int64 {
	return [...]*int64{&u.Lat25, &u.Lat50, &u.Lat100, &u.Lat250, &u.Lat500, &u.Lat1000, &u.Lat2500,
		&u.Lat5000, &u.Lat10000, &u.Lat30000, &u.Lat60000, &u.LatInf}[bucket]
}

func armTTFT(u *dbsqlc.UsageArmAddParams, bucket int) *int64 {
	return [...]*int64{&u.Ttft25, &u.Ttft50, &u.Ttft100, &u.Ttft250, &u.Ttft500, &u.Ttft1000, &u.Ttft2500,
		&u.Ttft5000, &u.Ttft10000, &u.Ttft30000, &u.Ttft60000, &u.TtftInf}[bucket]
}
