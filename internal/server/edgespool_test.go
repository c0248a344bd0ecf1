package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgeproc"
	"github.com/svcdev/svc/internal/poll"
)

// fullDisk mounts a 256 KiB tmpfs for an edge's spool folder (it needs root; the test is skipped when
// the mount is refused) and returns the folder and fill, which takes every byte left on it (the spool's
// files, created when the edge starts, stay) and returns the function that frees them again. The mount
// is made before the cluster, so that it is unmounted after the edges stop.
func fullDisk(t *testing.T) (dir string, fill func() (free func())) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for the edge's spool (%v: %s); TestFullSpoolDropsAndCounts (internal/edgesync) covers a spool full by its size", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	// fill takes every page of the disk, and keeps taking the pages the spool frees (it empties its
	// segment once its runs are acknowledged: with a quick control plane, each append found the page
	// the last one freed, and none failed) until free is called.
	fill = func() func() {
		t.Helper()
		name := filepath.Join(dir, "filler")
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 4<<10)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.Write(chunk); err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		}()
		var once sync.Once
		free := func() {
			once.Do(func() {
				close(stop)
				<-done
				f.Close()
				if err := os.Remove(name); err != nil {
					t.Error(err)
				}
			})
		}
		t.Cleanup(free)
		return free
	}
	return dir, fill
}

// edgeReadiness is an edge's /readyz.
type edgeReadiness struct {
	code   int
	Status string
	Checks map[string]string
}

func edgeReady(t *testing.T, e *edgeproc.Edge) edgeReadiness {
	t.Helper()
	code, body := edgeGet(t, e, "/readyz")
	r := edgeReadiness{code: code}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	return r
}

// An svc edge whose spool is on a full disk (a 256 KiB tmpfs, filled once the edge started) while the
// control plane answers: every call is answered, its run shipped from memory; /readyz says degraded
// (200, "recorder":"spool write failing"), svc_spool_write_errors_total counts the failed appends, and
// the log gets one ERROR line for all of them, not one a seal. Once the disk has room again, the next
// seal writes the spool: /readyz is ok, and every run is stored once.
func TestFullEdgeSpoolDiskIsDegradedUntilItHasRoom(t *testing.T) {
	dir, fill := fullDisk(t)
	c := newCluster(t)
	var logs syncBuffer
	e := c.edge("", func(cfg *edgeproc.Config) {
		cfg.SpoolDir = dir
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	d, key := c.deploy("fulldisk", "fixed_api_key")
	var want []string
	send := func(prefix string, n int) {
		for i := range n {
			content := fmt.Sprintf("%s-%d", prefix, i)
			if got := call(t, e, "fulldisk", key, content); got.status != 200 {
				t.Fatalf("%s: %d %s", content, got.status, got.body)
			}
			want = append(want, content)
			time.Sleep(20 * time.Millisecond) // a seal (every 15 ms) for nearly each run
		}
	}
	send("before", 2)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) { // synced
		r := edgeReady(t, e)
		if r.code == 200 && r.Status == "ok" && r.Checks["recorder"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz before the disk is full: %+v", r)
		}
	}

	free := fill()
	send("full", 20)
	// The seals are the shipper's, every 15 ms: on a loaded machine the last ones come after the calls.
	var failed float64
	poll.Until(t, 10*time.Second, "svc_spool_write_errors_total at 5 or more after 20 runs on a full disk (one per seal)", func() bool {
		failed = edgeMetric(t, e, "svc_spool_write_errors_total")
		return failed >= 5
	})
	if r := edgeReady(t, e); r.code != 200 || r.Status != "degraded" || r.Checks["recorder"] != "spool write failing" ||
		r.Checks["controlPlane"] != "connected" {
		t.Fatalf("/readyz with the spool's disk full: %+v", r)
	}
	if n := strings.Count(logs.String(), `level=ERROR msg="edge: writing the spool failed`); n != 1 {
		t.Fatalf("%d ERROR lines for %v failed appends, want 1:\n%s", n, failed, logs.String())
	}
	if v := edgeMetric(t, e, "svc_recorder_runs_dropped_total"); v != 0 {
		t.Fatalf("svc_recorder_runs_dropped_total = %v: the control plane takes the runs from memory", v)
	}

	free()
	send("room", 3)
	if r := edgeReady(t, e); r.code != 200 || r.Status != "ok" || r.Checks["recorder"] != "ok" {
		t.Fatalf("/readyz once the disk has room: %+v\n%s", r, logs.String())
	}
	if !strings.Contains(logs.String(), "edge: the spool takes writes again") {
		t.Fatalf("no line says the spool recovered:\n%s", logs.String())
	}
	waitRuns(t, c, d.ID, want)
	t.Logf("%d runs stored once each; %v appends failed while the disk was full, one ERROR line", len(want), failed)
	if v := edgeMetric(t, e, "svc_spool_write_errors_total"); v != failed {
		t.Fatalf("svc_spool_write_errors_total moved from %v to %v once the disk had room", failed, v)
	}
}

// An svc edge whose spool's disk is full while the control plane does not take its runs: the runs it
// holds in memory instead stay within --run-buffer (5 here), the oldest dropped first (all but the
// batch in flight) and counted, requests never wait, and /readyz says degraded. Once the control plane
// takes runs again, the newest arrive.
func TestFullEdgeSpoolDiskKeepsTheNewestRunsWithinTheBuffer(t *testing.T) {
	dir, fill := fullDisk(t)
	c := newCluster(t)
	p := newProxy(t, c.cp.BaseURL)
	const buffer = 5
	var logs syncBuffer
	e := c.edge(p.url, func(cfg *edgeproc.Config) {
		cfg.SpoolDir, cfg.RunBuffer = dir, buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	d, key := c.deploy("bounded", "fixed_api_key")
	if got := call(t, e, "bounded", key, "warm"); got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	waitRuns(t, c, d.ID, []string{"warm"})
	fill()
	release := p.holdRuns()
	t.Cleanup(release) // before the edge's own cleanup, which ships what it holds
	const n = 30
	for i := range n {
		got := call(t, e, "bounded", key, fmt.Sprintf("r-%d", i))
		if got.status != 200 || got.took > 2*time.Second {
			t.Fatalf("request %d: %d in %v %s", i, got.status, got.took, got.body)
		}
		time.Sleep(20 * time.Millisecond) // on purpose: the runs come over many seals (every 15 ms)
	}
	deadline := time.Now().Add(5 * time.Second)
	for edgeMetric(t, e, "svc_recorder_queue_depth")+edgeMetric(t, e, "svc_recorder_runs_dropped_total") != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue depth %v + dropped %v, want the %d runs", edgeMetric(t, e, "svc_recorder_queue_depth"),
				edgeMetric(t, e, "svc_recorder_runs_dropped_total"), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held := int(edgeMetric(t, e, "svc_recorder_queue_depth"))
	if held > buffer || held == 0 {
		t.Fatalf("%d runs held in memory with --run-buffer %d", held, buffer)
	}
	if r := edgeReady(t, e); r.code != 200 || r.Status != "degraded" || r.Checks["recorder"] != "spool write failing" {
		t.Fatalf("/readyz with the spool's disk full: %+v", r)
	}
	if edgeMetric(t, e, "svc_spool_write_errors_total") == 0 {
		t.Fatal("svc_spool_write_errors_total did not move")
	}
	if n := strings.Count(logs.String(), `level=ERROR msg="edge: runs dropped`); n != 1 {
		t.Fatalf("%d ERROR lines for %d runs dropped, want 1:\n%s", n, 30-held, logs.String())
	}

	release()
	deadline = time.Now().Add(10 * time.Second)
	var got []string
	for {
		got = runContents(t, c, d.ID)
		if len(got) == 1+held || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var idx []int
	for _, g := range got {
		if g == "warm" {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(g, "r-"))
		if err != nil {
			t.Fatalf("a run nobody sent: %q", g)
		}
		idx = append(idx, i)
	}
	slices.Sort(idx)
	if len(idx) != held || idx[len(idx)-1] != n-1 {
		t.Fatalf("runs stored %v, want the %d held, the newest (r-%d) among them", idx, held, n-1)
	}
	// The first batch was in flight; past it, what is kept is the newest: no gap after the first gap.
	gaps := 0
	for i := 1; i < len(idx); i++ {
		if idx[i] != idx[i-1]+1 {
			gaps++
		}
	}
	if gaps > 1 {
		t.Fatalf("runs stored %v: the oldest were not the ones dropped", idx)
	}
	t.Logf("held %d of %d runs (stored: %v), dropped %d, %v failed appends", held, n, idx, n-held, edgeMetric(t, e, "svc_spool_write_errors_total"))
	if r := edgeReady(t, e); r.code != 200 || r.Status != "degraded" || r.Checks["recorder"] != "spool write failing" {
		t.Fatalf("/readyz after the drops, disk still full: %+v", r)
	}
}
