package edgesync

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// replica is a control-plane replica on loopback that answers snapshot lookups with "no such slug"
// at its own change id, and run batches with what it read; down makes it answer 503, as a proxy in
// front of a replica that is gone does.
type replica struct {
	srv      *httptest.Server
	changeID int
	down     atomic.Bool
	calls    atomic.Int64
	runs     atomic.Int64 // runs read from batches
}

func newReplica(t *testing.T, changeID int) *replica {
	r := &replica{changeID: changeID}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.calls.Add(1)
		if r.down.Load() {
			http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
			return
		}
		if req.Method == http.MethodPost {
			b, err := readTestBatch(req)
			if err != nil {
				http.Error(w, "unreadable", http.StatusBadRequest)
				return
			}
			r.runs.Add(int64(len(b.Runs)))
			json.NewEncoder(w).Encode(edgewire.RunBatchResult{})
			return
		}
		w.Header().Set(edgewire.ChangeIDHeader, strconv.Itoa(r.changeID))
		http.Error(w, "not found", http.StatusNotFound)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// An edge given several replicas of its control plane uses one while it answers, moves to the next
// when it is gone (refused connections) or failing (503), within the same call, and stays there.
func TestClientMovesToTheNextReplicaWhenOneFails(t *testing.T) {
	ctx := context.Background()
	a, b := newReplica(t, 1), newReplica(t, 2)
	c, err := NewClient(a.srv.URL+", "+b.srv.URL+"/", "svc-edge-test")
	if err != nil {
		t.Fatal(err)
	}
	snap := func() int64 {
		t.Helper()
		s, err := c.Snapshot(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		return s.changeID
	}
	if got := snap(); got != 1 || b.calls.Load() != 0 {
		t.Fatalf("first call answered by change id %d (b called %d times), want a's", got, b.calls.Load())
	}
	a.down.Store(true)
	if got := snap(); got != 2 {
		t.Fatalf("with a failing: answered by %d, want b's", got)
	}
	a.down.Store(false)
	aCalls := a.calls.Load()
	if got := snap(); got != 2 || a.calls.Load() != aCalls {
		t.Fatalf("after moving to b, a call went to a again (answer %d)", got)
	}
	// b is gone for good (its listener closed): a run batch, body and all, reaches a in the same call.
	b.srv.Close()
	rb := headerLine(nil, "batch-1", nil)
	for _, id := range []string{"r1", "r2"} {
		rb, _ = runs.AppendLine(rb, &runs.Run{ID: id, DeploymentID: "d", Status: "ok", CreatedAt: time.Now()})
	}
	if _, err := c.PostRunBatch(ctx, rb); err != nil {
		t.Fatalf("run batch with b gone: %v", err)
	}
	if a.runs.Load() != 2 {
		t.Fatalf("a read %d runs, want 2", a.runs.Load())
	}
	// Every replica failing is "unreachable": the edge serves what it holds, for --max-stale.
	a.down.Store(true)
	if _, err := c.Snapshot(ctx, "x"); !isUnreachable(err) {
		t.Fatalf("all replicas failing: %v, want unreachable", err)
	}
}

func TestClientRefusesABadReplicaURL(t *testing.T) {
	if _, err := NewClient("http://a:1,ftp://b", "svc-edge-test"); err == nil {
		t.Fatal("ftp://b accepted")
	}
}
