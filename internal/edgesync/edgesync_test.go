package edgesync

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

const testToken = "svc-edge-test-token"

// fakeCP is a control plane that answers snapshots as the test says, counting fetches.
type fakeCP struct {
	srv      *httptest.Server
	fetches  atomic.Int32
	changeID atomic.Int64  // the changeId of the snapshots it answers
	gate     chan struct{} // when set, snapshot answers wait for it
	mu       sync.Mutex
}

func newFakeCP(t *testing.T) *fakeCP {
	f := &fakeCP{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		slug, ok := strings.CutPrefix(r.URL.Path, edgewire.DeploymentsPath)
		if !ok {
			http.NotFound(w, r)
			return
		}
		f.fetches.Add(1)
		f.mu.Lock()
		gate := f.gate
		f.mu.Unlock()
		if gate != nil {
			<-gate
		}
		json.NewEncoder(w).Encode(edgewire.Snapshot{ChangeID: f.changeID.Load(), Deployment: edgewire.Deployment{
			ID: "dep_" + slug, Slug: slug, AuthMode: edgemodel.AuthNone, Target: edgewire.Target{Kind: edgemodel.TargetMultiModel},
			RunRetentionMode: edgemodel.RetentionDays, RunRetentionDays: 7}})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCP) hold() func() {
	g := make(chan struct{})
	f.mu.Lock()
	f.gate = g
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.gate = nil
		f.mu.Unlock()
		close(g)
	}
}

func newTestCache(t *testing.T, url string, now *time.Time, mu *sync.Mutex) *Cache {
	t.Helper()
	client, err := NewClient(url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryDown: time.Nanosecond}
	if now != nil {
		o.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return *now }
	}
	return NewCache(client, o)
}

// A change that arrives while the slug's snapshot is being fetched must not be undone by the fetch: a
// snapshot read before the change is not cached, and later requests fetch anew.
func TestChangeDuringAFetchIsNotUndone(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		snapshotID int64 // the changeId of the snapshot the fetch returns
		refetch    bool
	}{
		{"snapshot read before the change", 4, true},
		{"snapshot that already reflects the change", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCP(t)
			c := newTestCache(t, f.srv.URL, nil, nil)
			f.changeID.Store(tc.snapshotID)
			release := f.hold()
			done := make(chan error, 1)
			go func() {
				_, err := c.EdgeDeployment(ctx, "racy")
				done <- err
			}()
			for f.fetches.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			c.drop("racy", 5) // change 5 arrives on the feed while the fetch is under way
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := c.EdgeDeployment(ctx, "racy"); err != nil {
				t.Fatal(err)
			}
			if refetched := f.fetches.Load() == 2; refetched != tc.refetch {
				t.Fatalf("fetches %d; want a second fetch: %v", f.fetches.Load(), tc.refetch)
			}
		})
	}
}

func TestFeedDropsOnlyWhatItMustAndResetsDropOlderSnapshots(t *testing.T) {
	ctx := context.Background()
	f := newFakeCP(t)
	c := newTestCache(t, f.srv.URL, nil, nil)
	f.changeID.Store(7)
	for _, slug := range []string{"a", "b"} {
		if _, err := c.EdgeDeployment(ctx, slug); err != nil {
			t.Fatal(err)
		}
	}
	c.onChange(edgewire.Change{ID: 7, Slug: "a"}) // already reflected by a's snapshot
	c.onChange(edgewire.Change{ID: 8, Slug: "b"})
	c.EdgeDeployment(ctx, "a")
	c.EdgeDeployment(ctx, "b")
	if n := f.fetches.Load(); n != 3 {
		t.Fatalf("fetches %d, want 3 (b again only)", n)
	}
	f.changeID.Store(9) // b's new snapshot
	c.onChange(edgewire.Change{ID: 9, Slug: "b"})
	c.EdgeDeployment(ctx, "b")
	c.onHello(edgewire.Hello{Head: 9, Reset: true}) // a (7) is doubtful, b (9) is not
	c.EdgeDeployment(ctx, "a")
	c.EdgeDeployment(ctx, "b")
	if n := f.fetches.Load(); n != 5 {
		t.Fatalf("fetches %d, want 5 (b after its change, a after the reset)", n)
	}
	c.onChange(edgewire.Change{ID: 10, Slug: ""}) // every slug
	c.EdgeDeployment(ctx, "a")
	c.EdgeDeployment(ctx, "b")
	if n := f.fetches.Load(); n != 7 {
		t.Fatalf("fetches %d, want 7", n)
	}
}

// Through an outage, a snapshot serves for MaxStale after it was last confirmed, and a feed that kept
// delivering confirms every snapshot it did not drop.
func TestMaxStaleCountsFromTheLastConfirmation(t *testing.T) {
	ctx := context.Background()
	f := newFakeCP(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newTestCache(t, f.srv.URL, &now, &mu)
	c.onHello(edgewire.Hello{Head: 0, Reset: true}) // synced
	if _, err := c.EdgeDeployment(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	advance(5 * time.Minute)
	c.onHeartbeat() // the feed was alive 5 minutes after the fetch
	f.srv.Close()   // then the control plane went away
	advance(DefaultMaxStale - time.Minute)
	if _, err := c.EdgeDeployment(ctx, "kept"); err != nil {
		t.Fatalf("14 minutes after the fetch, 9 after the feed last spoke: %v", err)
	}
	if !c.Status().Ready {
		t.Fatal("not ready within max-stale")
	}
	if _, err := c.EdgeDeployment(ctx, "never-seen"); edgemodel.CodeOf(err) != edgemodel.CodeUnavailable {
		t.Fatalf("an unseen slug during the outage: %v", err)
	}
	advance(2 * time.Minute)
	if _, err := c.EdgeDeployment(ctx, "kept"); edgemodel.CodeOf(err) != edgemodel.CodeUnavailable {
		t.Fatalf("past max-stale: %v", err)
	}
	if c.Status().Ready {
		t.Fatal("ready past max-stale")
	}
}

// A batch that failed is sent again with the same id and the same runs; one the control plane refuses
// for good is given up and counted, and the shipper goes on.
func TestShipperRetriesTheSameBatchAndGivesUpOnRefusals(t *testing.T) {
	var mu sync.Mutex
	var seen []edgewire.RunBatchV1
	var status []int // what to answer, in turn; 200 when exhausted
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := readTestBatch(r)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		seen = append(seen, b)
		code := 200
		if len(status) > 0 {
			code, status = status[0], status[1:]
		}
		mu.Unlock()
		w.WriteHeader(code)
		w.Write([]byte(`{"error":{"status":` + strconv.Itoa(code) + `,"code":"x","message":"x"}}`))
	}))
	defer srv.Close()
	client, _ := NewClient(srv.URL, testToken)
	status = []int{503, 502, 200, 400}
	s, err := NewShipper(client, ShipperOptions{FlushInterval: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Record(runs.Run{DeploymentID: "dep_1", Model: "m", Request: []byte(`{}`), Response: []byte(`{}`)})
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	s.Record(runs.Run{DeploymentID: "dep_1", Model: "m"})
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	s.Close(context.Background())

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("%d attempts, want 3 for the first batch and 1 for the refused one", len(seen))
	}
	for _, b := range seen[1:3] {
		if b.BatchID != seen[0].BatchID || len(b.Runs) != 1 || b.Runs[0].ID != seen[0].Runs[0].ID {
			t.Fatalf("a retry changed the batch: %+v then %+v", seen[0], b)
		}
	}
	if seen[3].BatchID == seen[0].BatchID || seen[3].Runs[0].ID == seen[0].Runs[0].ID {
		t.Fatal("the second batch reused the first one's ids")
	}
	if s.Dropped() != 0 {
		t.Fatalf("dropped %d", s.Dropped())
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
