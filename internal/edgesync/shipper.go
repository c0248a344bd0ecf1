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
)

// ShipperOptions tune a Shipper; zero values take the defaults.
type ShipperOptions struct {
	// Buffer is how many runs may wait at most, those of the batch being sent included (--run-buffer);
	// beyond it runs are dropped and counted, and the request goes on unharmed.
	Buffer        int
	BatchRuns     int           // runs per batch at most
	BatchBytes    int           // request and response bytes per batch, roughly (one larger run goes alone)
	FlushInterval time.Duration // how long a run waits for its batch to fill
	TouchInterval time.Duration // how often key uses go back when no run carries them
	MaxBackoff    time.Duration // the longest pause between two attempts at a batch
	Logger        *slog.Logger
}

// Shipper replaces the run recorder in an svc edge process: it takes runs and key uses from the edge
// handler without ever blocking, and sends them to the control plane in batches (POST runs), retried
// with backoff until answered. Each run gets its id here and each batch keeps its id across retries,
// so the control plane applies every run once, however often it is sent.
type Shipper struct {
	client *Client
	o      ShipperOptions
	log    *slog.Logger
	fails  *logx.Limiter // failure lines, bounded under storms

	runs *batchq.Queue[edgewire.Run]
	held atomic.Int64 // runs queued, taken or in the batch under way: at most o.Buffer
	// taken are the runs the loop took from the queue; pending, the ones of them not yet in a batch.
	taken, pending []edgewire.Run
	dropped        atomic.Int64
	shipped        prometheus.Counter
	retries        prometheus.Counter
	refused        prometheus.Counter

	mu      sync.Mutex
	touched map[string]time.Time

	stop     chan struct{}
	deadline chan time.Time // Close's deadline for the last batches
	done     chan struct{}
	once     sync.Once
}

// NewShipper starts a shipper sending to the control plane through client. Close it to send what is
// left.
func NewShipper(client *Client, o ShipperOptions) *Shipper {
	if o.Buffer <= 0 {
		o.Buffer = DefaultRunBuffer
	}
	if o.BatchRuns <= 0 {
		o.BatchRuns = DefaultBatchRuns
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.TouchInterval <= 0 {
		o.TouchInterval = DefaultTouchInterval
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Shipper{
		client: client, o: o, log: o.Logger, fails: logx.New(o.Logger, 0),
		runs:    batchq.New[edgewire.Run](o.Buffer, o.BatchRuns),
		touched: map[string]time.Time{},
		shipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_runs_shipped_total",
			Help: "Runs the control plane has taken from this edge."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_ship_retries_total",
			Help: "Run batches sent again after a failed attempt."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_edge_sync_runs_refused_total",
			Help: "Runs in batches the control plane refused for good (malformed or too large)."}),
		stop: make(chan struct{}), deadline: make(chan time.Time, 1), done: make(chan struct{}),
	}
	go s.loop()
	return s
}

// Register exports the shipper's own metrics on reg (its queue depth and drops are exported as the
// recorder's, through metrics.WatchRecorder).
func (s *Shipper) Register(reg prometheus.Registerer) {
	reg.MustRegister(s.shipped, s.retries, s.refused)
}

// Record queues a run for shipping (edge.Recorder). It never blocks: when Buffer runs are already
// held, the run is dropped and counted.
func (s *Shipper) Record(run runs.Run) bool {
	if s.held.Add(1) > int64(s.o.Buffer) {
		s.held.Add(-1)
		s.dropped.Add(1)
		return false
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = time.Now()
	}
	status := run.Status
	if status == "" {
		status = "ok"
	}
	id := run.ID
	if id == "" {
		id = runs.NewID(run.CreatedAt)
	}
	w := edgewire.Run{
		ID: id, DeploymentID: run.DeploymentID, KeyID: run.KeyID, Model: run.Model, Status: status,
		StatusCode: run.StatusCode, ErrorCode: run.ErrorCode, LatencyMs: run.Latency.Milliseconds(), PromptTokens: run.PromptTokens, CompletionTokens: run.CompletionTokens,
		CreatedAt: run.CreatedAt.UTC(), Request: string(run.Request), Response: string(run.Response),
		RequestID: run.RequestID, UpstreamRequestID: run.UpstreamRequestID, TraceID: run.TraceID, UsageOnly: run.UsageOnly,
	}
	if run.UsageOnly {
		w.Request, w.Response = "", "" // nothing of a transcript leaves the edge when nothing is stored
	}
	if !run.ExpiresAt.IsZero() {
		t := run.ExpiresAt.UTC()
		w.ExpiresAt = &t
	}
	if !s.runs.Put(w) { // cannot happen while held bounds the queue, but a request must never wait here
		s.held.Add(-1)
		s.dropped.Add(1)
		return false
	}
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

// QueueDepth returns how many runs wait to be shipped, the batch under way included.
func (s *Shipper) QueueDepth() int { return int(s.held.Load()) }

// Dropped returns how many runs were dropped because the buffer was full.
func (s *Shipper) Dropped() int64 { return s.dropped.Load() }

// Close stops taking batches from the buffer once it is empty, or at ctx's deadline, and returns
// when the last batch was answered or given up: runs still held then are lost (and logged).
func (s *Shipper) Close(ctx context.Context) {
	s.once.Do(func() {
		if d, ok := ctx.Deadline(); ok {
			s.deadline <- d
		} else {
			s.deadline <- time.Time{}
		}
		close(s.stop)
	})
	<-s.done
}

// loop builds batches and sends each until it is answered. It wakes when a batch's worth of runs is
// queued, every FlushInterval (so a run waits that long at most), and every TouchInterval for key uses.
func (s *Shipper) loop() {
	defer close(s.done)
	defer s.fails.Flush()
	var giveUp time.Time // zero until Close
	stopping := false
	flush := time.NewTicker(s.o.FlushInterval)
	defer flush.Stop()
	touchTick := time.NewTicker(s.o.TouchInterval)
	defer touchTick.Stop()
	for {
		if !stopping && len(s.pending) == 0 {
			select {
			case <-s.runs.Ready():
			case <-flush.C:
			case <-touchTick.C:
			case <-s.stop:
				stopping, giveUp = true, <-s.deadline
			}
		}
		batch := s.take()
		if batch == nil {
			if stopping {
				return
			}
			continue
		}
		if !s.send(batch, &stopping, &giveUp) {
			if n := s.held.Load(); n > 0 {
				s.log.Warn("edge: runs not shipped before shutdown are lost", "runs", n)
			}
			return
		}
	}
}

// take builds the next batch from the runs taken from the queue (taking them all when none is left):
// up to BatchRuns runs or about BatchBytes, plus the key uses noted so far. nil when there is nothing.
func (s *Shipper) take() *edgewire.RunBatch {
	if len(s.pending) == 0 {
		s.taken = s.runs.Take(s.taken)
		s.pending = s.taken
	}
	b := &edgewire.RunBatch{BatchID: newBatchID()}
	size := 0
	for len(s.pending) > 0 && len(b.Runs) < s.o.BatchRuns && size < s.o.BatchBytes {
		r := s.pending[0]
		s.pending = s.pending[1:]
		b.Runs = append(b.Runs, r)
		size += len(r.Request) + len(r.Response) + 256
	}
	s.mu.Lock()
	for id, at := range s.touched {
		b.Touches = append(b.Touches, edgewire.Touch{KeyID: id, UsedAt: at.UTC()})
	}
	clear(s.touched)
	s.mu.Unlock()
	if len(b.Runs) == 0 && len(b.Touches) == 0 {
		return nil
	}
	return b
}

// send sends one batch until the control plane answers it, pausing longer after each failure. It
// returns false when Close's deadline passed first.
func (s *Shipper) send(b *edgewire.RunBatch, stopping *bool, giveUp *time.Time) bool {
	const minPause = 200 * time.Millisecond
	pause := minPause
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if *stopping && !giveUp.IsZero() {
			ctx, cancel = context.WithDeadline(context.Background(), *giveUp)
		}
		res, err := s.client.PostRuns(ctx, b)
		cancel()
		var pe *permanentError
		switch {
		case err == nil:
			s.held.Add(-int64(len(b.Runs)))
			s.shipped.Add(float64(len(b.Runs)))
			if res.Rejected > 0 {
				s.log.Debug("edge: runs of deleted deployments were dropped by the control plane", "runs", res.Rejected)
			}
			return true
		case errors.As(err, &pe):
			s.held.Add(-int64(len(b.Runs)))
			s.refused.Add(float64(len(b.Runs)))
			s.fails.Log(context.Background(), slog.LevelError, "edge: the control plane refused a run batch; its runs are lost", "",
				slog.Int("runs", len(b.Runs)), slog.Any("err", err))
			return true
		}
		s.fails.Log(context.Background(), slog.LevelWarn, "edge: shipping runs failed; retrying", "",
			slog.Int("runs", len(b.Runs)), slog.Int("attempt", attempt+1), slog.Any("err", err))
		s.retries.Inc()
		if *stopping && !giveUp.IsZero() && time.Now().After(*giveUp) {
			return false
		}
		var deadline <-chan time.Time
		stop := s.stop
		if *stopping {
			stop = nil // already seen
			if !giveUp.IsZero() {
				deadline = time.After(time.Until(*giveUp))
			}
		}
		select {
		case <-time.After(pause/2 + rand.N(pause/2+1)):
		case <-deadline:
			return false
		case <-stop:
			*stopping, *giveUp = true, <-s.deadline
		}
		pause = min(pause*2, s.o.MaxBackoff)
	}
}

// newBatchID returns a batch id: unique, and kept by the batch across its retries.
func newBatchID() string { return "batch_" + runs.NewID(time.Now())[len("run_"):] }
