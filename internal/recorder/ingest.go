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
// The runs of b.Runs (decoded from the request body as they are written) are written by a runWriter, in
// chunks, so that a batch is never whole in memory. A run the store refuses is set aside in the
// result's Refused (counted in Failed and logged with its id) and the rest written, so that the edge
// neither resends it nor waits behind it. The batch id is noted once the number of runs is known,
// before the usage is added, and a batch applied before rolls back whole (its runs were already
// ignored by id, and its usage must not count twice).
func (r *Recorder) Ingest(ctx context.Context, b *runs.Batch, now time.Time) (runs.IngestResult, error) {
	var res runs.IngestResult
	err := db.Write(ctx, r.db, func(tx *db.WriteTx) error {
		w := r.writeRuns(tx, nil)
		n := 0
		for run, err := range b.Runs {
			if err != nil {
				return err
			}
			n++
			run.Run.ID = run.ID
			if err := w.add(ctx, run.Run); err != nil {
				return err
			}
		}
		added, err := r.q.EdgeBatchAdd(ctx, tx, dbsqlc.EdgeBatchAddParams{ID: b.ID, Runs: int64(n), CreatedAt: now.UnixMilli()})
		if err != nil {
			return err
		}
		if added == 0 {
			return errReplayed
		}
		if err := w.done(ctx); err != nil {
			return err
		}
		for id, at := range b.Touches {
			if err := r.q.KeyTouch(ctx, tx, dbsqlc.KeyTouchParams{ID: id, UsedAt: sql.NullInt64{Int64: at.UnixMilli(), Valid: true}}); err != nil {
				return err
			}
		}
		res = w.res
		return nil
	})
	if errors.Is(err, errReplayed) {
		return runs.IngestResult{Replayed: true}, nil
	}
	if err != nil {
		return runs.IngestResult{}, err
	}
	r.setAside(res, b.ID)
	return res, nil
}

// runWriter writes runs in one transaction: the one way the recorder stores runs, for its own batches
// (write), an edge's (Ingest) and its spool's (replay). Runs of deployments that no longer exist are
// left out (Rejected). The others' transcripts go to db.InsertRuns together, in chunks of at most
// ingestChunk runs or ingestChunkBytes of bodies, so that a large batch is never whole in memory: a
// run already there is a duplicate, one the store refuses is set aside (Refused), the rest written.
// The usage aggregates (done) count the runs written and the runs kept for usage only.
type runWriter struct {
	r       *Recorder
	tx      *db.WriteTx
	res     runs.IngestResult
	live    map[string]bool          // deployment id → it exists
	rows    []dbsqlc.RunCreateParams // read, not yet written
	meta    []runs.Run               // the runs of rows without their transcripts, for the aggregates
	size    int                      // bytes of transcripts in rows
	counted []runs.Run               // what the usage aggregates count, without transcripts
}

// writeRuns starts writing runs in tx: in the buffers of w, which it empties, so that a writer used
// batch after batch allocates them once; nil takes new ones.
func (r *Recorder) writeRuns(tx *db.WriteTx, w *runWriter) *runWriter {
	if w == nil {
		w = &runWriter{}
	}
	if w.live == nil {
		w.live = map[string]bool{}
	}
	clear(w.live)
	*w = runWriter{r: r, tx: tx, live: w.live, rows: w.rows[:0], meta: w.meta[:0], counted: w.counted[:0]}
	return w
}

// add writes run (with its id), or holds it for the next chunk.
func (w *runWriter) add(ctx context.Context, run runs.Run) error {
	ok, seen := w.live[run.DeploymentID]
	if !seen {
		c, err := w.r.q.DeploymentLive(ctx, w.tx, run.DeploymentID)
		if err != nil {
			return err
		}
		ok = c > 0
		w.live[run.DeploymentID] = ok
	}
	if !ok {
		w.res.Rejected++
		return nil
	}
	if run.UsageOnly {
		// Retention none: no transcript to store (a shipped batch's id alone keeps it from counting twice).
		run.Request, run.Response = nil, nil
		w.counted = append(w.counted, run)
		w.res.UsageOnly++
		return nil
	}
	w.rows = append(w.rows, dbsqlc.RunCreateParams{})
	row(&w.rows[len(w.rows)-1], &run)
	w.size += len(run.Request) + len(run.Response)
	run.Request, run.Response = nil, nil // written; the aggregates need none of the transcript
	w.meta = append(w.meta, run)
	if len(w.rows) >= ingestChunk || w.size >= ingestChunkBytes {
		return w.flush(ctx)
	}
	return nil
}

// flush writes the runs held together (db.InsertRuns).
func (w *runWriter) flush(ctx context.Context) error {
	if len(w.rows) == 0 {
		return nil
	}
	inserted, refused, err := db.InsertRuns(ctx, w.tx, w.rows)
	if err != nil {
		return err
	}
	gone := make(map[int]bool, len(refused))
	for _, f := range refused {
		gone[f.Index] = true
		w.res.Refused = append(w.res.Refused, runs.Refused{ID: w.rows[f.Index].ID, Reason: f.Reason})
	}
	for i := range w.rows {
		switch {
		case gone[i]:
		case !inserted[i]:
			w.res.Duplicates++
		default:
			w.res.Inserted++
			w.counted = append(w.counted, w.meta[i])
		}
	}
	clear(w.rows) // the transcripts, held no longer than their write
	w.rows, w.meta, w.size = w.rows[:0], w.meta[:0], 0
	return nil
}

// done writes the runs still held, then the usage rows of the runs written and kept for usage.
func (w *runWriter) done(ctx context.Context) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	return w.r.addUsage(ctx, w.tx, aggregate(w.counted), aggregateArms(w.counted))
}

// setAside counts and logs the runs of a written batch that the store refused (batch: a shipped
// batch's id, or "" for the recorder's own).
func (r *Recorder) setAside(res runs.IngestResult, batch string) {
	for _, f := range res.Refused {
		r.failed.Add(1)
		attrs := []any{"run", f.ID, "reason", f.Reason}
		if batch != "" {
			attrs = append(attrs, "batch", batch)
		}
		r.log.Warn("run refused by the store, set aside", attrs...)
	}
}

// A shipped batch's runs are written in chunks of at most this many runs or bytes of bodies.
const (
	ingestChunk      = 500
	ingestChunkBytes = 4 << 20
)

// errReplayed rolls back a batch whose id was applied before.
var errReplayed = errors.New("batch applied before")
