package edgesync

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// batchSink is a control plane's POST runs: it answers 503 while down, and keeps every batch it takes
// (by batch id, as the control plane applies them once).
type batchSink struct {
	srv     *httptest.Server
	down    atomic.Bool
	mu      sync.Mutex
	batches map[string]edgewire.RunBatchV1
	posts   int
}

func newBatchSink(t *testing.T) *batchSink {
	k := &batchSink{batches: map[string]edgewire.RunBatchV1{}}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		b, err := readTestBatch(r)
		if err != nil {
			http.Error(w, "unreadable: "+err.Error(), http.StatusBadRequest)
			return
		}
		k.mu.Lock()
		k.batches[b.BatchID] = b
		k.posts++
		k.mu.Unlock()
		w.Write([]byte(`{"inserted":1}`))
	}))
	t.Cleanup(k.srv.Close)
	return k
}

// runs returns how often each run id arrived, over the distinct batches.
func (k *batchSink) runs() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]int{}
	for _, b := range k.batches {
		for _, r := range b.Runs {
			out[r.RequestID]++
		}
	}
	return out
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newSpooledShipper(t *testing.T, url, dir string, tune func(*ShipperOptions)) *Shipper {
	t.Helper()
	client := linesClient(t, url)
	o := ShipperOptions{FlushInterval: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, SpoolDir: dir, Logger: quietLog()}
	if tune != nil {
		tune(&o)
	}
	s, err := NewShipper(client, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func record(s *Shipper, id string, size int) {
	s.Record(runs.Run{DeploymentID: "dep_1", Model: "m", RequestID: id, Request: []byte(`{"x":"` + strings.Repeat("r", size) + `"}`), Response: []byte(`{}`)})
}

func segments(t *testing.T, dir string) (n int, bytes int64) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".spool") {
			info, _ := e.Info()
			n++
			bytes += info.Size()
		}
	}
	return n, bytes
}

// Runs sealed while the control plane is down wait in the spool; a shipper that is stopped without
// reaching it leaves them there, and the next one on the same folder sends them, once each; the spool
// is emptied once everything is acknowledged.
func TestSpoolKeepsRunsAcrossRestartsUntilAcknowledged(t *testing.T) {
	k := newBatchSink(t)
	dir := t.TempDir()
	k.down.Store(true)
	s := newSpooledShipper(t, k.srv.URL, dir, func(o *ShipperOptions) { o.BatchRuns = 7 })
	for i := 0; i < 40; i++ {
		record(s, fmt.Sprintf("a-%d", i), 100)
	}
	waitFor(t, func() bool { _, b := segments(t, dir); return b > 40*100 })
	// A second shipper on the same folder is refused while the first holds it.
	client, _ := NewClient(k.srv.URL, testToken)
	if _, err := NewShipper(client, ShipperOptions{SpoolDir: dir}); err == nil || !strings.Contains(err.Error(), "another svc edge") {
		t.Fatalf("a second shipper on a spool in use: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	s.Close(ctx)
	cancel()
	if s.QueueDepth() != 40 || s.Dropped() != 0 {
		t.Fatalf("after stopping with the control plane down: %d held, %d dropped", s.QueueDepth(), s.Dropped())
	}

	// Restarted while the control plane is still down, so that it cannot have sent any yet (with it up,
	// the new shipper sent a batch or two before the count was read, one run in a few under -race).
	s2 := newSpooledShipper(t, k.srv.URL, dir, nil)
	if s2.QueueDepth() != 40 {
		t.Fatalf("the restarted shipper holds %d runs, want the 40 of the spool", s2.QueueDepth())
	}
	k.down.Store(false)
	for i := 0; i < 5; i++ {
		record(s2, fmt.Sprintf("b-%d", i), 100)
	}
	waitFor(t, func() bool { return s2.QueueDepth() == 0 })
	runs := k.runs()
	if len(runs) != 45 {
		t.Fatalf("%d distinct runs arrived, want 45", len(runs))
	}
	for id, n := range runs {
		if n != 1 {
			t.Fatalf("run %s arrived in %d batches", id, n)
		}
	}
	if _, b := segments(t, dir); b != 0 {
		t.Fatalf("the spool holds %d bytes once everything is acknowledged", b)
	}
	s2.Close(context.Background())
}

// A record cut short by a crash (a torn write) ends the spool: what came before is sent, the torn tail
// is cut off, and new records follow it.
func TestSpoolCutsOffATornTail(t *testing.T) {
	k := newBatchSink(t)
	dir := t.TempDir()
	k.down.Store(true)
	s := newSpooledShipper(t, k.srv.URL, dir, func(o *ShipperOptions) { o.BatchRuns = 1 })
	for i := 0; i < 3; i++ {
		record(s, fmt.Sprintf("t-%d", i), 10)
	}
	waitFor(t, func() bool {
		s.pendMu.Lock()
		defer s.pendMu.Unlock()
		return len(s.pending) == 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	s.Close(ctx)
	cancel()
	// Tear the last record: its body loses its last bytes.
	seg := filepath.Join(dir, "runs-0000000000000000.spool")
	info, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, info.Size()-5); err != nil {
		t.Fatal(err)
	}
	// The control plane stays away until the spool was counted: a batch shipped at once would leave the
	// queue before the count (as it did under -race at load 12).
	s2 := newSpooledShipper(t, k.srv.URL, dir, nil)
	if s2.QueueDepth() != 2 {
		t.Fatalf("after a torn tail the spool holds %d runs, want 2", s2.QueueDepth())
	}
	k.down.Store(false)
	record(s2, "t-new", 10)
	waitFor(t, func() bool { return s2.QueueDepth() == 0 })
	runs := k.runs()
	if len(runs) != 3 || runs["t-0"] != 1 || runs["t-1"] != 1 || runs["t-new"] != 1 {
		t.Fatalf("runs that arrived: %v", runs)
	}
	s2.Close(context.Background())
}

// A full spool drops new runs and counts them; requests never wait.
func TestFullSpoolDropsAndCounts(t *testing.T) {
	k := newBatchSink(t)
	k.down.Store(true)
	dir := t.TempDir()
	s := newSpooledShipper(t, k.srv.URL, dir, func(o *ShipperOptions) { o.SpoolBytes = 64 << 10; o.BatchRuns = 1 })
	start := time.Now()
	for i := 0; i < 100; i++ {
		record(s, fmt.Sprintf("f-%d", i), 1000) // about 1.2 KiB a batch: some 50 fit
		time.Sleep(time.Millisecond)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("recording took %v", took)
	}
	// Everything sealed: what is held is in the spool, the rest was dropped.
	waitFor(t, func() bool { return s.mem.Load() == 0 && s.QueueDepth()+int(s.Dropped()) == 100 })
	if s.Dropped() == 0 {
		t.Fatal("a spool of 64 KiB took 120 KiB of runs")
	}
	if _, b := segments(t, dir); b > 64<<10 {
		t.Fatalf("the spool grew to %d bytes past its 64 KiB", b)
	}
	held := s.QueueDepth()
	k.down.Store(false)
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	if got := len(k.runs()); got != held {
		t.Fatalf("%d runs arrived, want the %d the spool held", got, held)
	}
	s.Close(context.Background())
}

// Batches are bounded in bytes by their JSON as sent (escaping included), not by an estimate: runs
// whose text doubles when escaped still make batches of at most BatchBytes.
func TestBatchesAreBoundedByTheirEncodedSize(t *testing.T) {
	k := newBatchSink(t)
	var sizes []int
	var mu sync.Mutex
	inner := k.srv.Config.Handler
	k.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, _ := gzip.NewReader(r.Body)
		b, _ := io.ReadAll(zr)
		mu.Lock()
		sizes = append(sizes, len(b))
		mu.Unlock()
		r.Body = gzipBody(b)
		inner.ServeHTTP(w, r)
	})
	client := linesClient(t, k.srv.URL)
	s, err := NewShipper(client, ShipperOptions{FlushInterval: time.Hour, BatchBytes: 64 << 10, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		// 4 KiB of quotes: 8 KiB once escaped.
		s.Record(runs.Run{DeploymentID: "dep_1", Model: "m", RequestID: fmt.Sprint(i), Request: []byte(strings.Repeat(`"`, 4<<10))})
	}
	s.Close(context.Background())
	if len(k.runs()) != 60 {
		t.Fatalf("%d runs arrived", len(k.runs()))
	}
	for _, n := range sizes {
		if n > 64<<10 {
			t.Fatalf("a batch of %d bytes, over its 64 KiB (batches: %v)", n, sizes)
		}
	}
	if len(sizes) < 8 {
		t.Fatalf("%d batches for 480 KiB of escaped runs: %v", len(sizes), sizes)
	}
}

func gzipBody(b []byte) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		zw.Write(b)
		zw.Close()
		pw.Close()
	}()
	return pr
}

// The last confirmed snapshots are saved in the state folder: a cache started again while the control
// plane is unreachable serves them (and reports ready) for what remains of MaxStale, and a slug it
// never held is 503, not 404.
func TestSavedSnapshotsServeAcrossARestartWithinMaxStale(t *testing.T) {
	f := newFakeCP(t)
	dir := t.TempDir()
	client, _ := NewClient(f.srv.URL, testToken)
	c := NewCache(client, Options{StateDir: dir, Logger: quietLog(), RetryDown: time.Nanosecond})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		c.Run(ctx)
	}()
	c.onHello(edgewire.Hello{Head: 3, Reset: true}) // what the feed says first (this fake serves none)
	if _, err := c.EdgeDeployment(context.Background(), "kept"); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-ran
	f.srv.Close() // the control plane is gone

	restarted := func(now time.Time) *Cache {
		client, _ := NewClient(f.srv.URL, testToken)
		return NewCache(client, Options{StateDir: dir, Logger: quietLog(), MaxStale: time.Minute, RetryDown: time.Nanosecond,
			Now: func() time.Time { return now }})
	}
	c2 := restarted(time.Now())
	d, err := c2.EdgeDeployment(context.Background(), "kept")
	if err != nil || d.ID != "dep_kept" {
		t.Fatalf("the saved snapshot after a restart: %+v %v", d, err)
	}
	if st := c2.Status(); !st.Ready || st.Snapshots != 1 {
		t.Fatalf("a restarted edge within max-stale: %+v", st)
	}
	if _, err := c2.EdgeDeployment(context.Background(), "never-seen"); err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Fatalf("a slug never held, control plane down: %v", err)
	}
	// Past MaxStale after its confirmation, the saved snapshot no longer serves.
	c3 := restarted(time.Now().Add(2 * time.Minute))
	if _, err := c3.EdgeDeployment(context.Background(), "kept"); err == nil {
		t.Fatal("a snapshot saved longer than max-stale ago still serves")
	}
	if c3.Status().Ready {
		t.Fatal("ready past max-stale")
	}
	info, err := os.Stat(filepath.Join(dir, snapshotsFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the snapshots file: %v %v", info, err)
	}
}

// A spool whose disk is full (a 256 KiB tmpfs, mounted for the test: it needs root) while the control
// plane is down: the batches the disk refuses wait in memory within SpoolBytes (32 KiB here, with room
// for 1,000 runs), the oldest dropped first; each failed append is counted (svc_spool_write_errors_total),
// the shipper says it is degraded, and the log gets one line for the failures and one for the drops,
// not one a seal. Once the disk has room and the control plane answers, the runs held are sent and new
// ones go to the spool again.
func TestFullSpoolDiskBoundsWhatWaitsInMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); TestFullSpoolDropsAndCounts covers a spool full by its size", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	k := newBatchSink(t)
	k.down.Store(true)
	log := lockedWriter{mu: &sync.Mutex{}, b: &strings.Builder{}}
	const bound = 32 << 10
	s := newSpooledShipper(t, k.srv.URL, dir, func(o *ShipperOptions) {
		o.SpoolBytes, o.Buffer, o.BatchRuns = bound, 1000, 1
		o.Logger = slog.New(slog.NewTextHandler(log, nil))
	})
	defer s.Close(context.Background())
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4<<10); ; {
		if _, err := filler.Write(chunk); err != nil {
			break // the disk is full
		}
	}
	filler.Close()
	const n = 60 // about 2.1 KiB a batch: 126 KiB in all, four times the bound
	for i := range n {
		record(s, fmt.Sprintf("f-%d", i), 2000)
		time.Sleep(time.Millisecond)
	}
	waitFor(t, func() bool { return s.runs.Len() == 0 && s.QueueDepth()+int(s.Dropped()) == n })
	if s.memBytes.Load() > bound || s.Dropped() == 0 {
		t.Fatalf("%d bytes held in memory (bound %d), %d runs dropped", s.memBytes.Load(), bound, s.Dropped())
	}
	if s.SpoolWriteErrors() == 0 || s.Degraded() != "spool write failing" {
		t.Fatalf("spool write errors %d, Degraded() = %q", s.SpoolWriteErrors(), s.Degraded())
	}
	log.mu.Lock()
	out := log.b.String()
	log.mu.Unlock()
	if strings.Count(out, "level=ERROR") != 2 || strings.Count(out, `msg="edge: writing the spool failed`) != 1 ||
		strings.Count(out, `msg="edge: runs dropped`) != 1 {
		t.Fatalf("want one ERROR line for %d failed appends and one for %d runs dropped:\n%s", s.SpoolWriteErrors(), s.Dropped(), out)
	}
	held := s.QueueDepth()

	os.Remove(filepath.Join(dir, "filler"))
	k.down.Store(false)
	record(s, "after", 100)
	waitFor(t, func() bool { return s.QueueDepth() == 0 })
	got := k.runs()
	if len(got) != held+1 || got[fmt.Sprintf("f-%d", n-1)] != 1 || got["after"] != 1 {
		t.Fatalf("%d runs arrived, want the %d held (the newest among them) and the one after: %v", len(got), held, got)
	}
	if d := s.Degraded(); d != "dropping runs" {
		t.Fatalf("Degraded() = %q once the spool takes writes, runs dropped within the minute", d)
	}
	t.Logf("%d of %d runs held (%d bytes), %d dropped, %d failed appends", held, n, bound, s.Dropped(), s.SpoolWriteErrors())
}

// Stopped at once with the control plane down, a shipper's sender gives up while its sealer still
// writes the last runs into the spool; Close waits for that write (it closed the spool under it, a
// nil segment's panic), and the next shipper on the folder holds every run.
func TestCloseAtOnceWithTheControlPlaneDownSpoolsTheLastRuns(t *testing.T) {
	k := newBatchSink(t)
	k.down.Store(true)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 40 {
		dir := t.TempDir()
		s := newSpooledShipper(t, k.srv.URL, dir, func(o *ShipperOptions) { o.BatchRuns = 1; o.FlushInterval = time.Hour })
		for j := range 5 {
			record(s, fmt.Sprintf("c-%d-%d", i, j), 10)
		}
		s.Close(gone)
		s2 := newSpooledShipper(t, k.srv.URL, dir, nil)
		if n := s2.QueueDepth(); n != 5 {
			t.Fatalf("round %d: the next shipper holds %d runs, want 5", i, n)
		}
		s2.Close(gone)
	}
}
