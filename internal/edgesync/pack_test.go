package edgesync

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgewire"
)

// A run whose JSON passes the control plane's cap on one run (edgewire.MaxRunBytes) is shipped with
// its usage and without its transcript, so that its batch is never refused; a run under the cap keeps
// its transcript.
func TestRunPastTheCapShipsItsUsageOnly(t *testing.T) {
	var mu sync.Mutex
	got := map[string]edgewire.RunV1{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := readBatch(t, r)
		if !ok {
			return
		}
		mu.Lock()
		for _, run := range b.Runs {
			got[run.RequestID] = run
		}
		mu.Unlock()
		json.NewEncoder(w).Encode(edgewire.RunBatchResult{Inserted: len(b.Runs)})
	}))
	defer srv.Close()
	s := newSpooledShipper(t, srv.URL, t.TempDir(), nil)
	record(s, "req_big", edgewire.MaxRunBytes)
	record(s, "req_under", edgewire.MaxRunBytes-4<<10)
	// Encoding 8 MiB twice takes seconds under -race: wait longer than waitFor does.
	for deadline := time.Now().Add(time.Minute); s.QueueDepth() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
	s.Close(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if big := got["req_big"]; !big.UsageOnly || big.Request != "" || big.Model != "m" {
		t.Fatalf("a run past the cap arrived as usageOnly=%v with %d bytes of request", big.UsageOnly, len(big.Request))
	}
	if under := got["req_under"]; under.UsageOnly || !strings.HasPrefix(under.Request, `{"x":"rrr`) {
		t.Fatalf("a run under the cap lost its transcript (usageOnly=%v, %d bytes)", under.UsageOnly, len(under.Request))
	}
}

// readBatch decodes a POST runs body as the control plane reads it (gzipped JSON); false, with the error
// reported, for a body that is not one.
func readBatch(t *testing.T, r *http.Request) (edgewire.RunBatchV1, bool) {
	t.Helper()
	b, err := readTestBatch(r)
	if err != nil {
		t.Error(err)
		return b, false
	}
	return b, true
}
