package edgesync

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdev/svc/internal/batchq"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/logx"
	"github.com/svcdev/svc/internal/runs"
)

// Defaults of ShipperOptions.
const (
	DefaultRunBuffer     = 100_000
	DefaultBatchRuns     = 500
	DefaultBatchBytes    = 4 << 20
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultTouchInterval = 5 * time.Second
	DefaultMaxBackoff    = 30 * time.Second
	DefaultSpoolBytes    = 1 << 30
	// DefaultServerErrors is how many 5xx answers a batch gets before it is split (ShipperOptions).
	DefaultServerErrors = 5
)

// ShipperOptions tune a Shipper; zero values take the defaults.
type ShipperOptions struct {
	// Buffer is how many runs may wait in memory at most (--run-buffer): without a spool, every run not
	// yet acknowledged (beyond it new runs are dropped and counted, and the request goes on unharmed);
	// with one, those not yet written to it: the runs of the next seal, and the batches the spool's disk
	// refused (a full file system), which wait in memory until they are sent. Past Buffer runs or
	// SpoolBytes bytes of those, the oldest are dropped and counted, so that a full disk never grows
	// the process.
	Buffer        int
	BatchRuns     int           // runs per batch at most
	BatchBytes    int           // bytes of a batch's JSON at most (one larger run goes alone)
	FlushInterval time.Duration // how long a run waits to be sealed into a batch (and spooled)
	TouchInterval time.Duration // how often key uses go back when no run carries them
	MaxBackoff    time.Duration // the longest pause between two attempts at a batch
	// ServerErrors is how many 5xx answers a batch gets before it is split in halves, each sent on its
	// own (default 5); a single run past it is set aside once the control plane shows it stores other
	// batches (split.go). Failures to reach the control plane do not count: they are retried for ever.
	ServerErrors int
	// SpoolDir, when set, keeps every sealed batch on disk until the control plane acknowledges it
	// (--spool-dir): synced at each flush, replayed at the next start (spool.go).
	SpoolDir string
	// SpoolBytes caps the spool (default 1 GiB); batches that would pass it are dropped and counted.
	// It caps the bytes of the batches the spool's disk refused, held in memory instead, too.
	SpoolBytes int64
	Logger     *slog.Logger
}

// Shipper replaces the run recorder in an svc edge process: it takes runs and key uses from the edge
// handler without ever blocking, seals them into batches every FlushInterval (written to the spool,
// when there is one), and sends the batches to the control plane in order (POST runs), each retried
// with backoff until answered. Each run gets its id here and each batch keeps its id across retries
// and restarts, so the control plane applies every run once, however often it is sent.
type Shipper struct {
	client *Client
	o      ShipperOptions
	log    *slog.Logger
	fails  *logx.Limiter // failure lines, bounded under storms
	spool  *spool        // nil: batches wait in memory only

	runs     *batchq.Queue[runs.Run]
	held     atomic.Int64 // runs not yet acknowledged: queued, sealed in memory or in the spool
	mem      atomic.Int64 // runs counted against Buffer (see ShipperOptions.Buffer)
	memBytes atomic.Int64 // bytes of the sealed batches held in memory (with a spool: bounded by SpoolBytes)

	dropped   atomic.Int64
	droppedAt atomic.Int64 // Unix ms of the last drop (Degraded)
	// spoolLog bounds the lines of a spool that fails or runs dropped: the first, then one a minute.
	spoolLog     *logx.Limiter
	spoolErrors  atomic.Int64 // appends the spool's disk refused (SpoolWriteErrors)
	spoolFailing atomic.Bool  // the last append failed (Degraded)
	shipped      prometheus.Counter
	retries      prometheus.Counter
	refused      prometheus.Counter

	mu      sync.Mutex
	touched map[string]time.Time

	pendMu  sync.Mutex
	pending []sealed // sealed batches not yet acknowledged, oldest first
	wake    chan struct{}

	stop     chan struct{}
	giveUp   time.Time // Close's deadline for the last batches (zero: none); set before stop closes
	sealDone chan struct{}
	done     chan struct{}
	once     sync.Once
}

// spoolLogEvery is how often a spool that keeps failing (or runs that keep being dropped) is logged:
// the first line at once, then one line a minute with the count (logx).
const spoolLogEvery = time.Minute

// sealed is a batch ready to send: its id and run count, and its JSON body exactly as sent (in memory,
// or at loc in the spool).
type sealed struct {
	id   string
	runs int
	body []byte
	loc  spoolLoc
}

// NewShipper starts a shipper sending to the control plane through client; with a spool, the batches
// it still holds are sent first. Close it to send what is left.
func NewShipper(client *Client, o ShipperOptions) (*Shipper, error) {
	if o.Buffer <= 0 {
		o.Buffer = DefaultRunBuffer
	}
	if o.BatchRuns <= 0 {
		o.BatchRuns = DefaultBatchRuns
	}
	if o.BatchRuns > edgewire.MaxRunBatchRuns {
		o.BatchRuns = edgewire.MaxRunBatchRuns
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	o.BatchBytes = min(o.BatchBytes, maxBatchBytes)
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.TouchInterval <= 0 {
		o.TouchInterval = DefaultTouchInterval
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.SpoolBytes <= 0 {
		o.SpoolBytes = DefaultSpoolBytes
	}
	if o.ServerErrors <= 0 {
		o.ServerErrors = DefaultServerErrors
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Shipper{
		client: client, o: o, log: o.Logger, fails: logx.New(o.Logger, 0), spoolLog: logx.New(o.Logger, spoolLogEvery),
		runs:    batchq.New[runs.Run](o.Buffer, o.BatchRuns),
		touched: map[string]time.Time{},
		shipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_runs_shipped_total",
			Help: "Runs the control plane has taken from this edge."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_ship_retries_total",
			Help: "Run batches sent again after a failed attempt."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_runs_refused_total",
			Help: "Runs the control plane refused for good: in batches it refused whole (malformed or too large), one by one in its answer (the store could not take them), or alone with 5xx answers past the bound (set aside)."}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), sealDone: make(chan struct{}), done: make(chan struct{}),
	}
	if o.SpoolDir != "" {
		sp, held, err := openSpool(o.SpoolDir, o.SpoolBytes)
		if err != nil {
			return nil, err
		}
		s.spool, s.pending = sp, held
		n := 0
		for _, b := range held {
			n += b.runs
		}
		s.held.Store(int64(n))
		if len(held) > 0 {
			s.log.Info("edge: sending the run batches left in the spool", "batches", len(held), "runs", n, "spool_dir", o.SpoolDir)
		}
	}
	go s.sealLoop()
	go s.sendLoop()
	return s, nil
}

// Register exports the shipper's own metrics on reg (its queue depth and drops are exported as the
// recorder's, through metrics.WatchRecorder).
func (s *Shipper) Register(reg prometheus.Registerer) {
	reg.MustRegister(s.shipped, s.retries, s.refused)
	if s.spool != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_edge_spool_bytes",
			Help: "Bytes of run batches in the edge's spool, waiting for the control plane."},
			func() float64 { return float64(s.spool.bytes()) }))
	}
}

// Record queues a run for shipping (edge.Recorder). It never blocks: without a spool, when Buffer
// runs are already held in memory the run is dropped and counted; with one, only when Buffer runs wait
// for the next seal (the batches the disk refused make room for new runs, oldest first: trim).
func (s *Shipper) Record(run runs.Run) bool {
	if s.mem.Add(1) > int64(s.o.Buffer) && s.spool == nil {
		s.mem.Add(-1)
		s.drop(1, "edge: runs dropped: --run-buffer runs wait for the control plane")
		return false
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = time.Now()
	}
	if run.Status == "" {
		run.Status = "ok"
	}
	if run.ID == "" {
		run.ID = runs.NewID(run.CreatedAt)
	}
	run.CreatedAt = run.CreatedAt.UTC()
	if run.UsageOnly {
		run.Request, run.Response = nil, nil // nothing of a transcript leaves the edge when nothing is stored
	}
	if !run.ExpiresAt.IsZero() {
		run.ExpiresAt = run.ExpiresAt.UTC()
	}
	if !s.runs.Put(run) { // with a spool: Buffer runs wait for the seal; a request must never wait here
		s.mem.Add(-1)
		s.drop(1, "edge: runs dropped: --run-buffer runs wait for the control plane")
		return false
	}
	s.held.Add(1)
	return true
}

// Touch notes that a key was used (edge.Recorder); the time goes back with the next batch.
func (s *Shipper) Touch(keyID string, at time.Time) {
	if keyID == "" {
		return
	}
	s.mu.Lock()
	if at.After(s.touched[keyID]) {
		s.touched[keyID] = at
	}
	s.mu.Unlock()
}

// QueueDepth returns how many runs wait to be acknowledged by the control plane: in memory and in the
// spool.
func (s *Shipper) QueueDepth() int { return int(s.held.Load()) }

// Dropped returns how many runs were dropped because the buffer (or the spool) was full.
func (s *Shipper) Dropped() int64 { return s.dropped.Load() }

// SpoolWriteErrors returns how many appends to the spool its disk refused (a full file system, say):
// their batches wait in memory instead (svc_spool_write_errors_total).
func (s *Shipper) SpoolWriteErrors() int64 { return s.spoolErrors.Load() }

// degradedFor is how long Degraded reports runs dropped after the last drop.
const degradedFor = time.Minute

// Degraded says why runs are at risk ("" when they are not), for /readyz: "spool write failing" while
// the spool's last append failed (the next one that succeeds ends it), "dropping runs" for a minute
// after a run was dropped.
func (s *Shipper) Degraded() string {
	if s.spoolFailing.Load() {
		return "spool write failing"
	}
	if at := s.droppedAt.Load(); at != 0 && time.Now().UnixMilli()-at < degradedFor.Milliseconds() {
		return "dropping runs"
	}
	return ""
}

// drop counts n runs lost, notes when (Degraded) and logs it, a line a minute at most per reason.
func (s *Shipper) drop(n int, why string) {
	total := s.dropped.Add(int64(n))
	s.droppedAt.Store(time.Now().UnixMilli())
	s.spoolLog.Log(context.Background(), slog.LevelError, why, "", slog.Int("runs", n), slog.Int64("dropped_total", total))
}

// Close seals what is queued (into the spool, when there is one), then sends the batches held until
// none is left or ctx's deadline passes, and returns. Without a spool, runs still held then are lost
// (and logged); with one, they wait in it for the next start.
func (s *Shipper) Close(ctx context.Context) {
	s.once.Do(func() {
		if d, ok := ctx.Deadline(); ok {
			s.giveUp = d
		}
		close(s.stop)
	})
	<-s.done
	// The sender may stop first (the control plane down past the deadline, what is sealed safe in the
	// spool) while the sealer still writes its last batch into the spool: closing the spool under it
	// made that write panic.
	<-s.sealDone
	s.spoolLog.Flush()
	if s.spool != nil {
		s.spool.close()
	}
}

// sealLoop seals the queued runs into batches: when a batch's worth is queued, every FlushInterval (so
// a run waits that long at most before it is on disk), and every TouchInterval for key uses alone.
func (s *Shipper) sealLoop() {
	defer close(s.sealDone)
	every := s.o.FlushInterval
	if s.spool != nil {
		// A SIGKILL loses at most FlushInterval of runs: sealing at three quarters of it leaves the
		// rest for the write, on a busy machine.
		every = every * 3 / 4
	}
	flush := time.NewTicker(every)
	defer flush.Stop()
	touchTick := time.NewTicker(s.o.TouchInterval)
	defer touchTick.Stop()
	var spare []runs.Run
	for {
		touches := false
		select {
		case <-s.runs.Ready():
		case <-flush.C:
		case <-touchTick.C:
			touches = true
		case <-s.stop:
			s.seal(&spare, true)
			return
		}
		s.seal(&spare, touches)
	}
}

// seal takes every queued run, packs them into batches with the key uses noted so far, writes the
// batches to the spool (synced once) and hands them to the sender.
func (s *Shipper) seal(spare *[]runs.Run, touchesDue bool) {
	taken := s.runs.Take(*spare)
	*spare = taken
	var touches []edgewire.Touch
	if len(taken) > 0 || touchesDue {
		s.mu.Lock()
		for id, at := range s.touched {
			touches = append(touches, edgewire.Touch{KeyID: id, UsedAt: at.UTC()})
		}
		clear(s.touched)
		s.mu.Unlock()
	}
	if len(taken) == 0 && len(touches) == 0 {
		return
	}
	batches := s.pack(taken, touches)
	if s.spool == nil {
		for _, b := range batches {
			s.memBytes.Add(int64(len(b.body)))
		}
	} else {
		kept, err := s.spool.append(batches)
		refused := 0 // runs of the batches the disk refused: they wait in memory
		for _, b := range batches[kept:] {
			if errors.Is(err, errSpoolFull) {
				s.held.Add(-int64(b.runs))
				continue
			}
			refused += b.runs
			s.memBytes.Add(int64(len(b.body)))
		}
		s.mem.Add(-int64(len(taken) - refused))
		switch {
		case errors.Is(err, errSpoolFull):
			s.droppedAt.Store(time.Now().UnixMilli())
			lost := 0
			for _, b := range batches[kept:] {
				lost += b.runs
			}
			s.dropped.Add(int64(lost))
			s.spoolLog.Log(context.Background(), slog.LevelWarn, "edge: the spool is full; new runs are dropped until the control plane takes what it holds", "",
				slog.String("spool_dir", s.o.SpoolDir), slog.Int64("spool_bytes", s.o.SpoolBytes), slog.Int("runs", lost))
			batches = batches[:kept]
		case err != nil:
			s.spoolErrors.Add(1)
			s.spoolFailing.Store(true)
			s.spoolLog.Log(context.Background(), slog.LevelError, "edge: writing the spool failed; runs wait in memory until they are sent", "",
				slog.String("spool_dir", s.o.SpoolDir), slog.Int("runs", refused), slog.Any("err", err))
		default:
			if s.spoolFailing.Swap(false) {
				s.log.Info("edge: the spool takes writes again", "spool_dir", s.o.SpoolDir, "write_errors_total", s.spoolErrors.Load())
			}
		}
	}
	s.pendMu.Lock()
	s.pending = append(s.pending, batches...)
	if s.spool != nil {
		s.trim()
	}
	s.pendMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// trim drops the oldest batches held in memory (those the spool's disk refused) while they pass the
// bounds, Buffer runs (counting those queued for the next seal) and SpoolBytes bytes, and counts their
// runs dropped. The batch being sent (the first) stays. Call with pendMu held.
func (s *Shipper) trim() {
	over := func() bool { return s.mem.Load() > int64(s.o.Buffer) || s.memBytes.Load() > s.o.SpoolBytes }
	if len(s.pending) < 2 || !over() {
		return
	}
	lost := 0
	kept := s.pending[:1]
	for _, b := range s.pending[1:] {
		if b.body != nil && over() {
			s.held.Add(-int64(b.runs))
			s.mem.Add(-int64(b.runs))
			s.memBytes.Add(-int64(len(b.body)))
			lost += b.runs
			continue
		}
		kept = append(kept, b)
	}
	clear(s.pending[len(kept):])
	s.pending = kept
	if lost > 0 {
		s.drop(lost, "edge: runs dropped: the spool's disk refuses writes and the runs held in memory passed their bound; the oldest go first")
	}
}

// maxBatchBytes is the most a batch may weigh: the control plane's cap, less room for the header.
const maxBatchBytes = edgewire.MaxRunBatchBytes - 1<<20

// pack encodes runs into batches in lines (batch.go) of at most BatchRuns runs and BatchBytes bytes (a
// run larger than BatchBytes goes alone), with the key uses in the first. A run past the control plane's
// cap on one run (edgewire.MaxRunBytes) keeps its usage and loses its transcript (logged).
func (s *Shipper) pack(batch []runs.Run, touches []edgewire.Touch) []sealed {
	var out []sealed
	var body []byte
	n, id, next := 0, "", 0
	open := func() {
		// A batch's body is sized once, from its runs' transcripts, and handed over as it is.
		size := 256
		for _, r := range batch[next:min(next+s.o.BatchRuns, len(batch))] {
			if size += len(r.Request) + len(r.Response) + 512; size > s.o.BatchBytes {
				break
			}
		}
		id, n = newBatchID(), 0
		body = headerLine(make([]byte, 0, min(size, s.o.BatchBytes)), id, touches)
		touches = nil
	}
	closeBatch := func() { out = append(out, sealed{id: id, runs: n, body: body}) }
	open()
	var enc []byte
	for i := range batch {
		next = i
		var err error
		enc, err = runs.AppendLine(enc[:0], &batch[i])
		if err == nil && len(enc) > edgewire.MaxRunBytes {
			s.log.Warn("edge: a run is too large to ship; its usage is kept, its transcript is not", "deployment", batch[i].DeploymentID,
				"request_id", batch[i].RequestID, "bytes", len(enc))
			r := batch[i]
			r.Request, r.Response, r.UsageOnly = nil, nil, true
			enc, err = runs.AppendLine(enc[:0], &r)
		}
		if err != nil {
			continue // a time outside the years 0-9999: cannot happen, runs are stamped with the clock
		}
		if n > 0 && (n == s.o.BatchRuns || len(body)+len(enc) > s.o.BatchBytes) {
			closeBatch()
			open()
		}
		body = append(body, enc...)
		n++
	}
	closeBatch()
	return out
}

// sendLoop sends the sealed batches in order, each until the control plane answers it.
func (s *Shipper) sendLoop() {
	defer close(s.done)
	defer s.fails.Flush()
	stopping, sealing := false, true
	for {
		s.pendMu.Lock()
		var b sealed
		have := len(s.pending) > 0
		if have {
			b = s.pending[0]
		}
		s.pendMu.Unlock()
		if !have {
			if !sealing {
				return // stopping, and everything sealed was sent
			}
			select {
			case <-s.wake:
			case <-s.sealDone:
				sealing, stopping = false, true
			}
			continue
		}
		body := b.body
		if body == nil {
			var err error
			if body, err = s.spool.read(b.loc); err != nil {
				s.log.Error("edge: a spooled run batch cannot be read; its runs are lost", "runs", b.runs, "err", err)
				s.ack(b)
				continue
			}
		}
		if lines, err := batchLines(body); err != nil { // a first-form batch of an older edge's spool
			s.log.Error("edge: a spooled run batch cannot be read; its runs are lost", "runs", b.runs, "err", err)
			s.ack(b)
			continue
		} else {
			body = lines
		}
		if !s.deliver(b, body, b.body == nil, &stopping) {
			if n := s.held.Load(); n > 0 {
				if lost := s.mem.Load(); s.spool != nil && lost > 0 {
					s.log.Warn("edge: runs not shipped before shutdown that the spool's disk refused are lost; the others wait in the spool for the next start",
						"lost", lost, "runs", n, "spool_dir", s.o.SpoolDir)
				} else if s.spool != nil {
					s.log.Info("edge: runs not shipped before shutdown wait in the spool for the next start", "runs", n, "spool_dir", s.o.SpoolDir)
				} else {
					s.log.Warn("edge: runs not shipped before shutdown are lost", "runs", n)
				}
			}
			return
		}
		s.ack(b)
	}
}

// ack forgets the oldest batch: the control plane took it (or refused it for good).
func (s *Shipper) ack(b sealed) {
	s.pendMu.Lock()
	s.pending = s.pending[1:]
	s.pendMu.Unlock()
	s.held.Add(-int64(b.runs))
	if s.spool != nil && b.body == nil {
		s.spool.ack(b.loc)
	} else {
		s.mem.Add(-int64(b.runs))
		s.memBytes.Add(-int64(len(b.body)))
	}
}

// send sends one batch until the control plane answers it, pausing longer after each failure. It
// returns false when Close's deadline passed first (done false), or, with poisoned set, when the
// control plane answered it 5xx ServerErrors times: the caller splits it. spooled says the batch is
// safe in the spool, so that shutting down need not wait for it.
func (s *Shipper) send(b sealed, body []byte, spooled bool, stopping *bool) (done, poisoned bool) {
	pause := min(minPause, s.o.MaxBackoff)
	serverErrors := 0
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if *stopping && !s.giveUp.IsZero() {
			ctx, cancel = context.WithDeadline(context.Background(), s.giveUp)
		}
		res, err := s.client.PostRunBatch(ctx, body)
		cancel()
		var pe *permanentError
		switch {
		case err == nil:
			s.shipped.Add(float64(b.runs))
			if res.Rejected > 0 {
				s.log.Debug("edge: runs of deleted deployments were dropped by the control plane", "runs", res.Rejected)
			}
			s.setAside(res.Refused)
			return true, false
		case errors.As(err, &pe):
			s.refused.Add(float64(b.runs))
			s.fails.Log(context.Background(), slog.LevelError, "edge: the control plane refused a run batch; its runs are lost", "",
				slog.Int("runs", b.runs), slog.Any("err", err))
			return true, false
		case serverError(err):
			if serverErrors++; serverErrors >= s.o.ServerErrors {
				return false, true
			}
		}
		s.fails.Log(context.Background(), slog.LevelWarn, "edge: shipping runs failed; retrying", "",
			slog.Int("runs", b.runs), slog.Int("attempt", attempt+1), slog.Any("err", err))
		s.retries.Inc()
		if *stopping && spooled {
			return false, false // shutting down, and the batch is safe in the spool: no need to wait
		}
		if *stopping && !s.giveUp.IsZero() && time.Now().After(s.giveUp) {
			return false, false
		}
		var deadline <-chan time.Time
		stop := s.stop
		if *stopping {
			stop = nil // already seen
			if !s.giveUp.IsZero() {
				deadline = time.After(time.Until(s.giveUp))
			}
		}
		select {
		case <-time.After(pause/2 + rand.N(pause/2+1)):
		case <-deadline:
			return false, false
		case <-stop:
			*stopping = true
		}
		pause = min(pause*2, s.o.MaxBackoff)
	}
}

// setAside counts and logs the runs the control plane refused one by one in its answer (the store
// could not take them; the rest of the batch was written). The batch is then acknowledged like any
// other, so that they leave the spool and are never sent again. The lines are bounded (logx) and name
// the run id and the control plane's reason, never the run's content.
func (s *Shipper) setAside(refused []edgewire.RefusedRun) {
	if len(refused) == 0 {
		return
	}
	s.refused.Add(float64(len(refused)))
	for _, f := range refused {
		s.fails.Log(context.Background(), slog.LevelError, "edge: the control plane refused a run; it is not sent again", "",
			slog.String("run_id", f.ID), slog.String("reason", f.Reason))
	}
}

// minPause is the first pause after a failed attempt at a batch (at most MaxBackoff).
const minPause = 200 * time.Millisecond

// newBatchID returns a batch id: unique, and kept by the batch across its retries.
func newBatchID() string { return "batch_" + runs.NewID(time.Now())[len("run_"):] }
