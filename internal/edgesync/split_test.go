package edgesync

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/svcdev/svc/internal/edgewire"
)

// poisonPlane is a control plane that answers 500 to every batch holding a run of request id poison
// (as PostgreSQL refusing the whole batch would), 500 to every batch while down is set (a database
// outage), and takes every other batch. It counts what arrives.
type poisonPlane struct {
	poison string
	down   atomic.Bool

	mu      sync.Mutex
	stored  map[string]int // request id -> times stored
	byBatch map[string]int // batch id -> times posted
	empty   int            // batches with no runs
}

func (p *poisonPlane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := readTestBatch(r)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byBatch[b.BatchID]++
	fail := p.down.Load()
	for _, run := range b.Runs {
		fail = fail || run.RequestID == p.poison
	}
	if fail {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":{"status":500,"code":"internal_error","message":"internal error"}}`))
		return
	}
	if len(b.Runs) == 0 {
		p.empty++
	}
	for _, run := range b.Runs {
		p.stored[run.RequestID]++
	}
	json.NewEncoder(w).Encode(edgewire.RunBatchResult{Inserted: len(b.Runs)})
}

func newPoisonPlane(poison string) *poisonPlane {
	return &poisonPlane{poison: poison, stored: map[string]int{}, byBatch: map[string]int{}}
}

// One run the control plane answers 500 for, among 40 in one batch: the batch is split until that run
// is alone, every other run is stored exactly once, the run is set aside (counted, logged by its id,
// never its content), no batch is posted more than the bound (the poisoned run twice it), and a
// restart sends nothing again.
func TestPoisonedRunIsSetAsideAndTheOthersStored(t *testing.T) {
	plane := newPoisonPlane("req_poison")
	srv := httptest.NewServer(plane)
	defer srv.Close()
	dir := t.TempDir()
	logs := &strings.Builder{}
	var logMu sync.Mutex
	s := newSpooledShipper(t, srv.URL, dir, func(o *ShipperOptions) {
		o.FlushInterval = 500 * time.Millisecond // one batch for all 40 runs
		o.ServerErrors = 3
		o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, logs}, nil))
	})
	for i := range 40 {
		if i == 17 {
			record(s, "req_poison", 10)
			continue
		}
		record(s, fmt.Sprintf("req_%02d", i), 10)
	}
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	s.Close(context.Background())

	plane.mu.Lock()
	for i := range 40 {
		id := fmt.Sprintf("req_%02d", i)
		if i == 17 {
			id = "req_poison"
		}
		want := 1
		if i == 17 {
			want = 0
		}
		if got := plane.stored[id]; got != want {
			t.Errorf("%s stored %d times, want %d", id, got, want)
		}
	}
	// The bound for each batch, and twice for the run set aside: once before asking whether the
	// control plane stores anything, once after (an outage that ended in between is no poison).
	twice := 0
	for id, n := range plane.byBatch {
		if n == 6 && twice == 0 {
			twice++
			continue
		}
		if n > 3 {
			t.Errorf("batch %s posted %d times, want at most the bound (3), or twice it for the poisoned run", id, n)
		}
	}
	if plane.empty == 0 {
		t.Error("the run was set aside without asking whether the control plane stores anything")
	}
	posts := 0
	for _, n := range plane.byBatch {
		posts += n
	}
	plane.mu.Unlock()
	var m dto.Metric
	s.refused.Write(&m)
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Fatalf("svc_edge_sync_runs_refused_total = %v, want 1", got)
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if !strings.Contains(out, "set aside") || !strings.Contains(out, "run_id=run_") {
		t.Fatalf("the set-aside run is not logged by its id:\n%s", out)
	}
	if strings.Contains(out, "rrrrrrrrrr") {
		t.Fatalf("a run's content reached the log:\n%s", out)
	}

	s = newSpooledShipper(t, srv.URL, dir, nil)
	if n := s.QueueDepth(); n != 0 {
		t.Fatalf("%d runs back from the spool after a restart", n)
	}
	s.Close(context.Background())
	plane.mu.Lock()
	defer plane.mu.Unlock()
	after := 0
	for _, n := range plane.byBatch {
		after += n
	}
	if after != posts {
		t.Fatalf("%d batches sent again after a restart", after-posts)
	}
}

// A store that is away answers every batch 500 (a database outage): past the bound the batch is split,
// but no run is set aside while the control plane stores nothing, and every run is stored once it is
// back.
func TestStoreOutageSetsNothingAside(t *testing.T) {
	plane := newPoisonPlane("")
	plane.down.Store(true)
	srv := httptest.NewServer(plane)
	defer srv.Close()
	s := newSpooledShipper(t, srv.URL, t.TempDir(), func(o *ShipperOptions) {
		o.FlushInterval = 300 * time.Millisecond
		o.ServerErrors = 2
	})
	for i := range 8 {
		record(s, fmt.Sprintf("req_%d", i), 10)
	}
	waitFor(t, func() bool {
		plane.mu.Lock()
		defer plane.mu.Unlock()
		n := 0
		for _, c := range plane.byBatch {
			n += c
		}
		return n >= 30 // split down to single runs, each retried and asking with an empty batch
	})
	plane.down.Store(false)
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	s.Close(context.Background())
	var m dto.Metric
	s.refused.Write(&m)
	if got := m.GetCounter().GetValue(); got != 0 {
		t.Fatalf("%v runs set aside during a store outage", got)
	}
	plane.mu.Lock()
	defer plane.mu.Unlock()
	for i := range 8 {
		if got := plane.stored[fmt.Sprintf("req_%d", i)]; got != 1 {
			t.Errorf("req_%d stored %d times, want 1", i, got)
		}
	}
}

// A control plane that cannot be reached (the connection closed before any answer) is an outage, not
// a poisoned batch: however many attempts fail, the batch is never split nor set aside, and arrives
// whole once the control plane answers.
func TestUnreachableControlPlaneIsNeverASplit(t *testing.T) {
	plane := newPoisonPlane("")
	var cut atomic.Int32
	cut.Store(8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cut.Add(-1) >= 0 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		plane.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s := newSpooledShipper(t, srv.URL, t.TempDir(), func(o *ShipperOptions) {
		o.FlushInterval = 300 * time.Millisecond
		o.ServerErrors = 2
	})
	for i := range 6 {
		record(s, fmt.Sprintf("req_%d", i), 10)
	}
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	s.Close(context.Background())
	var m dto.Metric
	s.refused.Write(&m)
	plane.mu.Lock()
	defer plane.mu.Unlock()
	if got := m.GetCounter().GetValue(); got != 0 || len(plane.byBatch) != 1 || plane.empty != 0 {
		t.Fatalf("after 8 failed connections: %v runs set aside, %d batches (want the one, whole), %d empty batches", got, len(plane.byBatch), plane.empty)
	}
	for i := range 6 {
		if got := plane.stored[fmt.Sprintf("req_%d", i)]; got != 1 {
			t.Errorf("req_%d stored %d times, want 1", i, got)
		}
	}
}
