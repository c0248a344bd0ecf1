// Package recorder writes the edge's run history, usage aggregates and key lastUsedAt in batches, off
// the request path.
package recorder

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/batchq"
	"github.com/svcdev/svc/internal/fieldmap"
	"github.com/svcdev/svc/internal/logx"
	"github.com/svcdev/svc/internal/qsketch"
	"github.com/svcdev/svc/internal/runs"
)

// Options tune a Recorder; zero values take the defaults.
type Options struct {
	// BufferSize is how many runs wait to be written (default 4096). Beyond it, with a spool, runs go to
	// the spool (the store is slower than the traffic: spooled.go); without one they are dropped.
	BufferSize    int
	BatchSize     int           // runs written per transaction at most (default 256)
	FlushInterval time.Duration // how long a run may wait for a batch to fill (default 200ms)
	TouchInterval time.Duration // how often lastUsedAt is written (default 5s)
	Logger        *slog.Logger

	// SpoolDir is the folder of the spool that keeps the batches the store did not take until it
	// answers again (spooled.go); "" keeps no spool: such batches are dropped and counted.
	SpoolDir      string
	SpoolMaxBytes int64         // the spool's size at most; beyond it batches are dropped (default 1 GiB)
	SpoolRetry    time.Duration // wait before replaying the spool again after the store failed (default 1s)
}

// Recorder buffers runs and key uses and writes them in batches from one goroutine each, so that the
// edge never waits on SQLite.
type Recorder struct {
	db   *sql.DB
	q    db.Querier // the queries of db's engine
	log  *slog.Logger
	opts Options

	runs     *batchq.Queue[runs.Run]
	overflow *batchq.Queue[runs.Run] // with a spool: runs past a full buffer, on their way to the spool
	own      runWriter               // the writer of the recorder's own batches (write), its buffers reused
	writing  atomic.Int64            // runs of the batch being written
	dropped  atomic.Int64
	failed   atomic.Int64
	fails    *logx.Limiter // the drop lines, a few per interval however many runs are dropped

	droppedAt   atomic.Int64 // Unix ms of the last drop (Degraded)
	spoolErrAt  atomic.Int64 // Unix ms of the last failed spool write (Degraded)
	spoolErrors atomic.Int64
	spool       *spooler // nil without Options.SpoolDir

	mu      sync.Mutex
	touched map[string]int64 // key id -> last use (Unix ms) not yet written

	flushReq  chan chan struct{}
	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once
}

// New starts a Recorder writing to sqldb, without a spool (Options.SpoolDir is ignored). Call Close to
// flush and stop it.
func New(sqldb *sql.DB, o Options) *Recorder {
	o.SpoolDir = ""
	r, _ := Open(sqldb, o)
	return r
}

// Open starts a Recorder writing to sqldb with the spool in o.SpoolDir (when set), whose batches left
// by an earlier process are replayed first. Call Close to flush and stop it.
func Open(sqldb *sql.DB, o Options) (*Recorder, error) {
	if o.BufferSize <= 0 {
		o.BufferSize = 4096
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 200 * time.Millisecond
	}
	if o.TouchInterval <= 0 {
		o.TouchInterval = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SpoolMaxBytes <= 0 {
		o.SpoolMaxBytes = 1 << 30
	}
	if o.SpoolRetry <= 0 {
		o.SpoolRetry = time.Second
	}
	var sp *spooler
	if o.SpoolDir != "" {
		var err error
		if sp, err = openSpooler(o.SpoolDir, o.SpoolMaxBytes, o.SpoolRetry); err != nil {
			return nil, err
		}
		if n := sp.spooled.Load(); n > 0 {
			o.Logger.Info("replaying the recorder's spool", "runs", n, "dir", o.SpoolDir)
		}
	}
	r := &Recorder{
		spool:    sp,
		db:       sqldb,
		q:        db.For(sqldb),
		log:      o.Logger,
		fails:    logx.New(o.Logger, 0),
		opts:     o,
		runs:     batchq.New[runs.Run](o.BufferSize, o.BatchSize),
		touched:  map[string]int64{},
		flushReq: make(chan chan struct{}),
		stop:     make(chan struct{}),
	}
	r.done.Add(2)
	go r.runLoop()
	go r.touchLoop()
	if sp != nil {
		r.overflow = batchq.New[runs.Run](o.BufferSize, o.BatchSize)
		r.done.Add(2)
		go r.replayLoop()
		go r.overflowLoop()
	}
	return r, nil
}

// Record queues a run for writing. It never blocks: when the buffer is full the run goes to the spool
// (through a second buffer, written by its own goroutine), or without a spool is dropped and counted. Its usage is always counted; with UsageOnly its transcript is not kept. It reports whether
// the run was queued.
func (r *Recorder) Record(run runs.Run) bool {
	if r == nil {
		return false
	}
	store := !run.UsageOnly
	if run.CreatedAt.IsZero() {
		run.CreatedAt = time.Now()
	}
	id := "" // a run kept only in the usage counts needs neither an id nor a copy of its bodies
	if store {
		id = run.ID
		if id == "" {
			id = runs.NewID(run.CreatedAt)
		}
	}
	run.ID = id
	if !store {
		run.Request, run.Response = nil, nil
	}
	if !r.runs.Put(run) && (r.overflow == nil || !r.overflow.Put(run)) {
		r.drop(1, "runs dropped: the recorder's buffer and its overflow to the spool are full", nil)
		return false
	}
	return true
}

// drop counts n runs lost, notes when (Degraded) and logs it, a line per kind and interval at most
// (logx): a storm of drops is a few lines, never one per run.
func (r *Recorder) drop(n int, why string, err error) {
	total := r.dropped.Add(int64(n))
	r.droppedAt.Store(time.Now().UnixMilli())
	if r.fails.Allow(context.Background(), slog.LevelError, why, "") {
		attrs := []any{"runs", n, "dropped_total", total}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		r.log.Error(why, attrs...)
	}
}

// degradedFor is how long /readyz says "degraded" after the recorder last dropped a run or failed to
// write its spool.
const degradedFor = time.Minute

// Degraded says why the recorder is losing runs ("" when it is not): it dropped runs, or its spool
// refused a write, within the last minute. /readyz reports it.
func (r *Recorder) Degraded() string {
	if r == nil {
		return ""
	}
	now := time.Now().UnixMilli()
	switch {
	case r.spoolErrAt.Load() != 0 && now-r.spoolErrAt.Load() < degradedFor.Milliseconds():
		return "spool write failing"
	case r.droppedAt.Load() != 0 && now-r.droppedAt.Load() < degradedFor.Milliseconds():
		return "dropping runs"
	}
	return ""
}

// SpoolWriteErrors returns how many appends to the spool failed (a full disk, say): their runs were
// dropped.
func (r *Recorder) SpoolWriteErrors() int64 { return r.spoolErrors.Load() }

// row sets p to the row of a run, its transcript included.
func row(p *dbsqlc.RunCreateParams, run *runs.Run) {
	rowOf.Copy(p, run)
	if p.Status == "" {
		p.Status = "ok"
	}
}

// rowOf maps a run's fields to the store's columns by name (fieldmap: times and durations as
// milliseconds, "" key as NULL), so that a run field needs no line here. The id is the run's own.
var rowOf = fieldmap.New[dbsqlc.RunCreateParams, runs.Run]()

// runOK says whether a run is an answer (a run recorded before svc kept its status is).
func runOK(run *runs.Run) bool { return run.Status == "" || run.Status == "ok" }

// Touch notes that a key was used now; the time reaches the database with the next periodic flush.
func (r *Recorder) Touch(keyID string, at time.Time) {
	if r == nil || keyID == "" {
		return
	}
	ms := at.UnixMilli()
	r.mu.Lock()
	if ms > r.touched[keyID] {
		r.touched[keyID] = ms
	}
	r.mu.Unlock()
}

// QueueDepth returns how many runs wait to be written, the batch being written included.
func (r *Recorder) QueueDepth() int {
	n := r.runs.Len() + int(r.writing.Load())
	if r.overflow != nil {
		n += r.overflow.Len()
	}
	return n
}

// Dropped returns how many runs were dropped: the buffer was full, or, without a spool, the store did
// not take their batch.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Failed returns how many runs could not be written (for example because their deployment was deleted
// in the meantime).
func (r *Recorder) Failed() int64 { return r.failed.Load() }

// Flush writes everything buffered so far and returns when it is in the database.
func (r *Recorder) Flush() {
	ack := make(chan struct{})
	select {
	case r.flushReq <- ack:
		<-ack
	case <-r.stop:
	}
	r.flushTouches()
}

// Close writes everything still buffered (to the spool, while the store is behind) and stops the
// writers. What the spool holds stays there for the next Open.
func (r *Recorder) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.done.Wait()
		if r.spool != nil {
			r.spool.disk.Close()
		}
	})
	return nil
}

func (r *Recorder) runLoop() {
	defer r.done.Done()
	ticker := time.NewTicker(r.opts.FlushInterval)
	defer ticker.Stop()
	var spare []runs.Run
	for {
		select {
		case <-r.runs.Ready(): // a batch's worth is waiting
		case <-ticker.C:
		case ack := <-r.flushReq:
			spare = r.writeQueued(spare)
			close(ack)
			continue
		case <-r.stop:
			r.writeQueued(spare)
			return
		}
		spare = r.writeQueued(spare)
	}
}

// writeQueued writes every queued run, in batches of at most BatchSize, and returns them: the buffer
// for the next Take.
func (r *Recorder) writeQueued(spare []runs.Run) []runs.Run {
	all := r.runs.Take(spare)
	if len(all) == 0 {
		return all // an idle tick: nothing to write, the spool not looked at
	}
	r.writing.Store(int64(len(all)))
	if r.behind() { // after the spooled batches, all in one append (toSpool)
		r.toSpool(all, nil)
		r.writing.Store(0)
		return all
	}
	for rest := all; len(rest) > 0; {
		n := min(len(rest), r.opts.BatchSize)
		r.write(rest[:n])
		rest = rest[n:]
		r.writing.Add(-int64(n))
	}
	return all
}

// write stores a batch in one transaction (writeRuns): the runs whose transcripts are kept, and one
// upsert per usage row (deployment, key, hour) the batch touches. A run of a deployment deleted
// meanwhile, or one the store refuses, is counted in Failed and logged; the others are written. With a
// spool, a batch whose transaction fails goes to the spool, and so does every batch while the spool
// holds any (spooled.go); without one it is dropped and counted.
func (r *Recorder) write(batch []runs.Run) {
	if len(batch) == 0 {
		return
	}
	if r.behind() {
		r.toSpool(batch, nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res runs.IngestResult
	err := db.Write(ctx, r.db, func(tx *db.WriteTx) error {
		w := r.writeRuns(tx, &r.own)
		for i := range batch {
			if err := w.add(ctx, batch[i]); err != nil {
				return err
			}
		}
		if err := w.done(ctx); err != nil {
			return err
		}
		res = w.res
		return nil
	})
	switch {
	case err != nil && r.spool != nil:
		r.toSpool(batch, err)
	case err != nil:
		r.drop(len(batch), "runs dropped: the store did not take their batch, and the recorder keeps no spool", err)
	default:
		r.setAside(res, "")
		if res.Rejected > 0 {
			r.failed.Add(int64(res.Rejected))
			r.log.Warn("runs of deleted deployments not recorded", "runs", res.Rejected)
		}
	}
}

// usageKey names one row of usage_hourly.
type usageKey struct {
	deployment, key string
	hour            int64
}

// usageAdd is what a batch adds to one usage row: its counts, and the latency sketch of the calls it
// answered (refused and failed calls are counted, never in the latency percentiles).
type usageAdd struct {
	dbsqlc.UsageAddParams
	latency qsketch.Sketch
}

// aggregate sums a batch into its usage rows, so that a batch writes each row once.
func aggregate(batch []runs.Run) map[usageKey]*usageAdd {
	const hourMs = int64(time.Hour / time.Millisecond)
	out := make(map[usageKey]*usageAdd)
	for i := range batch {
		run := &batch[i]
		at := run.CreatedAt.UnixMilli()
		k := usageKey{run.DeploymentID, run.UsageKey(), at - at%hourMs}
		u := out[k]
		if u == nil {
			u = &usageAdd{UsageAddParams: dbsqlc.UsageAddParams{DeploymentID: k.deployment, KeyID: k.key, Hour: k.hour}}
			out[k] = u
		}
		u.Requests++
		if !runOK(run) {
			u.Errors++
			if f := refusedField(&u.UsageAddParams, int64(run.StatusCode)); f != nil {
				*f++
			}
			switch run.ErrorCode {
			case runs.CodeModelBusy:
				u.RefusedBusy++
			case runs.CodeBudgetExhausted:
				u.RefusedBudget++
			}
		} else {
			u.latency.Add(ms(run.Latency))
		}
		if run.Queue > 0 {
			u.Queued++
			u.QueueMsSum += run.Queue.Milliseconds()
		}
		latency := run.Latency.Milliseconds()
		u.PromptTokens += int64(run.PromptTokens)
		u.CompletionTokens += int64(run.CompletionTokens)
		u.CachedTokens += int64(run.CachedTokens)
		u.LatencySumMs += latency
		*histogramField(&u.UsageAddParams, db.LatencyBucket(latency))++
	}
	return out
}

// refusedField is the refused_* column that counts an error call answered with status, nil for the
// statuses not counted apart (docs/API.md, "Usage"): 401 (a wrong or missing key), 404 (the endpoint
// disabled, or a model it does not serve) and 429 (a rate limit, the endpoint's or the upstream's).
func refusedField(u *dbsqlc.UsageAddParams, status int64) *int64 {
	switch status {
	case 401:
		return &u.Refused401
	case 404:
		return &u.Refused404
	case 429:
		return &u.Refused429
	}
	return nil
}

// histogramField is the lat_* column of a latency bucket (db.LatencyBoundsMs).
func histogramField(u *dbsqlc.UsageAddParams, bucket int) *int64 {
	return [...]*int64{&u.Lat25, &u.Lat50, &u.Lat100, &u.Lat250, &u.Lat500, &u.Lat1000, &u.Lat2500,
		&u.Lat5000, &u.Lat10000, &u.Lat30000, &u.Lat60000, &u.LatInf}[bucket]
}

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

func (r *Recorder) touchLoop() {
	defer r.done.Done()
	ticker := time.NewTicker(r.opts.TouchInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			r.flushTouches()
		case <-r.stop:
			r.flushTouches()
			return
		}
	}
}

// flushTouches writes the pending lastUsedAt values in one transaction. KeyTouch only moves a time
// forward, so overlapping flushes cannot rewind one.
func (r *Recorder) flushTouches() {
	r.mu.Lock()
	pending := r.touched
	if len(pending) == 0 {
		r.mu.Unlock()
		return
	}
	r.touched = map[string]int64{}
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := db.Tx(ctx, r.db, func(tx *sql.Tx) error {
		for id, ms := range pending {
			if err := r.q.KeyTouch(ctx, tx, dbsqlc.KeyTouchParams{ID: id, UsedAt: sql.NullInt64{Int64: ms, Valid: true}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Best effort by design: lastUsedAt is for "used recently?", not for audit.
		r.log.Warn("key lastUsedAt not written", "keys", len(pending), "err", err)
	}
}
