package recorder

import (
	"context"
	"database/sql"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// Runs made by svc edge processes reach the control plane in batches (docs/DEPLOY.md, "Runs and
// lastUsedAt"). Ingest writes one batch in one transaction, and writes it once: the batch id is
// remembered, and each run keeps the id its edge gave it (INSERT OR IGNORE), so a batch retried after
// a lost answer, or a run sent again in another batch, is never counted twice: neither as a run nor in
// the usage aggregates, which the batch updates in the same transaction.

// NewRunID returns a fresh run id. Edge processes give their runs ids before shipping them, so that
// every retry names the same run.
func NewRunID(at time.Time) string { return newRunID(at.UnixMilli()) }

// ShippedRun is a run with the id its edge gave it.
type ShippedRun struct {
	ID string
	Run
}

// Batch is what an edge ships at once: runs and the last use of keys.
type Batch struct {
	ID      string
	Runs    []ShippedRun
	Touches map[string]time.Time // key id → last use
}

// IngestResult says what a batch changed.
type IngestResult struct {
	Inserted   int  // runs written
	UsageOnly  int  // runs of deployments whose retention is none: counted in usage, not stored
	Duplicates int  // runs already there (sent before)
	Rejected   int  // runs of deployments that no longer exist (deleted, or being drained)
	Replayed   bool // the whole batch was applied before: nothing was written
}

// Ingest writes a shipped batch. Runs of deployments deleted meanwhile are dropped and counted, as the
// recorder drops them; lastUsedAt only moves forward.
func Ingest(ctx context.Context, sqldb *sql.DB, b Batch, now time.Time) (IngestResult, error) {
	var res IngestResult
	err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
		res = IngestResult{}
		n, err := db.Q.EdgeBatchAdd(ctx, tx, dbsqlc.EdgeBatchAddParams{ID: b.ID, Runs: int64(len(b.Runs)), CreatedAt: now.UnixMilli()})
		if err != nil {
			return err
		}
		if n == 0 {
			res.Replayed = true
			return nil
		}
		ptx := &preparedTx{Tx: tx, stmts: map[string]*sql.Stmt{}}
		defer ptx.close()
		live := map[string]bool{}
		counted := make([]queued, 0, len(b.Runs)) // what the usage aggregates count: new runs only
		for _, r := range b.Runs {
			ok, seen := live[r.DeploymentID]
			if !seen {
				c, err := db.Q.DeploymentLive(ctx, ptx, r.DeploymentID)
				if err != nil {
					return err
				}
				ok = c > 0
				live[r.DeploymentID] = ok
			}
			if !ok {
				res.Rejected++
				continue
			}
			if r.UsageOnly {
				// Retention none: no transcript to store; the batch id alone keeps it from counting twice.
				counted = append(counted, queued{run: params(r.ID, r.Run, false)})
				res.UsageOnly++
				continue
			}
			p := params(r.ID, r.Run, true)
			n, err := db.Q.RunCreateIfAbsent(ctx, ptx, dbsqlc.RunCreateIfAbsentParams(p))
			if err != nil {
				return err
			}
			if n == 0 {
				res.Duplicates++
				continue
			}
			res.Inserted++
			counted = append(counted, queued{run: p, store: true})
		}
		for _, u := range aggregate(counted) {
			if err := db.Q.UsageAdd(ctx, ptx, *u); err != nil {
				return err
			}
		}
		for id, at := range b.Touches {
			if err := db.Q.KeyTouch(ctx, ptx, dbsqlc.KeyTouchParams{ID: id, UsedAt: sql.NullInt64{Int64: at.UnixMilli(), Valid: true}}); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}
