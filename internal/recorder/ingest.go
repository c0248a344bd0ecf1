package recorder

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/runs"
)

// Runs made by svc edge processes reach the control plane in batches (docs/DEPLOY.md, "Runs and
// lastUsedAt"). Ingest writes one batch in one transaction, and writes it once: the batch id is
// remembered, and each run keeps the id its edge gave it (INSERT OR IGNORE), so a batch retried after
// a lost answer, or a run sent again in another batch, is never counted twice: neither as a run nor in
// the usage aggregates, which the batch updates in the same transaction. The control plane applies
// batches through core.Service.IngestRuns.

// Ingest writes a shipped batch (core.RunIngester). Runs of deployments deleted meanwhile are dropped
// and counted, as the recorder drops them; lastUsedAt only moves forward.
//
// The runs of b.Runs (decoded from the request body as they are written) are written together in chunks
// of at most ingestChunk runs or ingestChunkBytes of bodies: a chunk is one statement on PostgreSQL, and
// a batch is never whole in memory. A run the store refuses is set aside in the result's Refused (counted in
// Failed and logged with its id) and the rest written, so that the edge neither resends it nor waits
// behind it. The batch id is noted last, when the number of runs is known, and a batch applied before
// rolls back whole (its runs were already ignored by id, and its usage must not count twice).
func (r *Recorder) Ingest(ctx context.Context, b *runs.Batch, now time.Time) (runs.IngestResult, error) {
	var res runs.IngestResult
	err := db.Write(ctx, r.db, func(tx *db.WriteTx) error {
		res = runs.IngestResult{}
		ptx := &preparedTx{Tx: tx.Tx, stmts: map[string]*sql.Stmt{}}
		defer ptx.close()
		live := map[string]bool{}
		var counted []queued // what the usage aggregates count: new runs only, without their bodies
		var rows []dbsqlc.RunCreateParams
		var shipped []runs.Run // the runs of rows, without their bodies, for the aggregates
		size := 0
		// flush writes the runs read so far together: in one statement on PostgreSQL, from one prepared
		// statement on SQLite. A run the store refuses is set aside (Refused) and the others written.
		// Runs are flushed every ingestChunk runs or ingestChunkBytes of bodies, so that a large batch
		// is never whole in memory.
		flush := func() error {
			if len(rows) == 0 {
				return nil
			}
			var on db.DBTX = ptx // SQLite compiles the INSERT once per batch
			if r.engine == db.Postgres {
				on = tx // the batch is copied, or one statement, and its savepoints cannot be prepared
			}
			inserted, refused, err := db.InsertRuns(ctx, r.engine, on, rows)
			if err != nil {
				return err
			}
			gone := make(map[int]bool, len(refused))
			for _, f := range refused {
				gone[f.Index] = true
				res.Refused = append(res.Refused, runs.Refused{ID: rows[f.Index].ID, Reason: f.Reason})
			}
			for i := range rows {
				switch {
				case gone[i]:
				case !inserted[i]:
					res.Duplicates++
				default:
					res.Inserted++
					counted = append(counted, queued{run: shipped[i], store: true})
				}
			}
			rows, shipped, size = rows[:0], shipped[:0], 0
			return nil
		}
		n := 0
		for run, err := range b.Runs {
			if err != nil {
				return err
			}
			n++
			ok, seen := live[run.DeploymentID]
			if !seen {
				c, err := r.q.DeploymentLive(ctx, ptx, run.DeploymentID)
				if err != nil {
					return err
				}
				ok = c > 0
				live[run.DeploymentID] = ok
			}
			if !ok {
				res.Rejected++
				continue
			}
			if run.UsageOnly {
				// Retention none: no transcript to store; the batch id alone keeps it from counting twice.
				usage := run.Run
				usage.ID, usage.Request, usage.Response = run.ID, nil, nil
				counted = append(counted, queued{run: usage})
				res.UsageOnly++
				continue
			}
			run.Run.ID = run.ID
			rows = append(rows, dbsqlc.RunCreateParams{})
			row(&rows[len(rows)-1], &run.Run)
			meta := run.Run
			meta.ID, meta.Request, meta.Response = run.ID, nil, nil // written; the aggregates need none of the transcript
			shipped = append(shipped, meta)
			size += len(run.Request) + len(run.Response)
			if len(rows) >= ingestChunk || size >= ingestChunkBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		added, err := r.q.EdgeBatchAdd(ctx, tx, dbsqlc.EdgeBatchAddParams{ID: b.ID, Runs: int64(n), CreatedAt: now.UnixMilli()})
		if err != nil {
			return err
		}
		if added == 0 {
			return errReplayed
		}
		if err := r.addUsage(ctx, ptx, aggregate(counted), aggregateArms(counted)); err != nil {
			return err
		}
		for id, at := range b.Touches {
			if err := r.q.KeyTouch(ctx, ptx, dbsqlc.KeyTouchParams{ID: id, UsedAt: sql.NullInt64{Int64: at.UnixMilli(), Valid: true}}); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errReplayed) {
		return runs.IngestResult{Replayed: true}, nil
	}
	for _, f := range res.Refused {
		r.failed.Add(1)
		r.log.Warn("shipped run refused by the store, set aside", "run", f.ID, "batch", b.ID, "reason", f.Reason)
	}
	return res, err
}

// A shipped batch's runs are written in chunks of at most this many runs or bytes of bodies.
const (
	ingestChunk      = 500
	ingestChunkBytes = 4 << 20
)

// errReplayed rolls back a batch whose id was applied before.
var errReplayed = errors.New("batch applied before")
