package edgesync

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/svcdev/svc/internal/edgewire"
)

// A control plane that answers 500 once, then takes the batch but refuses one of its runs: the edge
// logs the 500 as an answer (not as "unreachable"), counts and logs the refused run by its id, and
// never sends it again, not even after a restart on the same spool.
func TestRefusedRunsAreCountedLoggedAndNeverResent(t *testing.T) {
	var mu sync.Mutex
	posts, failOnce := 0, true
	sent := map[string]int{} // request id -> times it arrived
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := readBatch(t, r)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		posts++
		if failOnce {
			failOnce = false
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":{"status":500,"code":"internal_error","message":"internal error"}}`))
			return
		}
		res := edgewire.RunBatchResult{}
		for _, run := range b.Runs {
			sent[run.RequestID]++
			if run.RequestID == "req_bad" {
				res.Refused = append(res.Refused, edgewire.RefusedRun{ID: run.ID, Reason: "the store refused it"})
			} else {
				res.Inserted++
			}
		}
		json.NewEncoder(w).Encode(res)
	}))
	defer srv.Close()

	dir := t.TempDir()
	logs := &strings.Builder{}
	var logMu sync.Mutex
	s := newSpooledShipper(t, srv.URL, dir, func(o *ShipperOptions) {
		o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, logs}, nil))
	})
	record(s, "req_good", 10)
	record(s, "req_bad", 10)
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	s.Close(context.Background())

	mu.Lock()
	if sent["req_good"] != 1 || sent["req_bad"] != 1 {
		t.Fatalf("runs arrived %v times, want each once", sent)
	}
	mu.Unlock()
	var m dto.Metric
	s.refused.Write(&m)
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Fatalf("svc_edge_sync_runs_refused_total = %v, want 1", got)
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if !strings.Contains(out, "the control plane refused a run") || !strings.Contains(out, "run_id=run_") || !strings.Contains(out, "the store refused it") {
		t.Fatalf("the refused run is not logged by its id and reason:\n%s", out)
	}
	if strings.Contains(out, "unreachable") || !strings.Contains(out, "answered 500") {
		t.Fatalf("a 500 answer is logged as something else:\n%s", out)
	}
	if strings.Contains(out, "rrrrrrrrrr") {
		t.Fatalf("a run's content reached the log:\n%s", out)
	}

	// A restart on the same spool sends nothing again.
	mu.Lock()
	before := posts
	mu.Unlock()
	s = newSpooledShipper(t, srv.URL, dir, nil)
	if n := s.QueueDepth(); n != 0 {
		t.Fatalf("%d runs back from the spool after a restart", n)
	}
	s.Close(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if posts != before {
		t.Fatalf("%d batches sent again after a restart", posts-before)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
