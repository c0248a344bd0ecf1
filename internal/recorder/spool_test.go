package recorder

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/storetest"
	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/spool"
)

// storeAway makes every write of runs and usage fail, as a store that does not answer does: the usage
// and batch tables are renamed away (each batch, written or replayed, updates one of them, so its
// transaction fails whole). back undoes it.
func storeAway(t *testing.T, sqldb *sql.DB) (back func()) {
	t.Helper()
	exec := func(stmts ...string) {
		t.Helper()
		for _, stmt := range stmts {
			if _, err := sqldb.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	exec(`ALTER TABLE usage_hourly RENAME TO usage_hourly_away`, `ALTER TABLE edge_batches RENAME TO edge_batches_away`)
	return func() {
		t.Helper()
		exec(`ALTER TABLE usage_hourly_away RENAME TO usage_hourly`, `ALTER TABLE edge_batches_away RENAME TO edge_batches`)
	}
}

// waitDrained waits until the spool is empty.
func waitDrained(t *testing.T, rec *Recorder) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for rec.Spooled() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the spool still holds %d runs", rec.Spooled())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func spoolOptions(dir string) Options {
	return Options{BatchSize: 7, FlushInterval: 5 * time.Millisecond, SpoolDir: dir, SpoolRetry: 20 * time.Millisecond}
}

// record records n runs of d1/k1 in hour at, every third one usage only, and returns the stored ones' ids.
func record(t *testing.T, rec *Recorder, n int, at time.Time) []string {
	t.Helper()
	var ids []string
	for i := range n {
		run := runs.Run{ID: runs.NewID(at), DeploymentID: "d1", KeyID: "k1", Model: "m", Status: "ok", Latency: 30 * time.Millisecond,
			PromptTokens: 2, CompletionTokens: 3, CreatedAt: at.Add(time.Duration(i) * time.Millisecond),
			Request: []byte(`{"n":"` + string(rune('a'+i%26)) + `"}`), Response: []byte(`{}`), UsageOnly: i%3 == 2}
		if !rec.Record(run) {
			t.Fatal("run dropped")
		}
		if !run.UsageOnly {
			ids = append(ids, run.ID)
		}
	}
	return ids
}

// checkStoredOnce asserts that exactly the runs ids are stored, once each, and that the usage of
// the hour counts calls runs, each once.
func checkStoredOnce(t *testing.T, sqldb *sql.DB, ids []string, calls int64, hour time.Time) {
	t.Helper()
	stored := runsOf(t, sqldb, "d1")
	seen := map[string]int{}
	for _, r := range stored {
		seen[r.ID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("run %s stored %d times, want once", id, seen[id])
		}
	}
	if len(stored) != len(ids) {
		t.Errorf("%d runs stored, want %d", len(stored), len(ids))
	}
	u, ok := usageOf(t, sqldb, "d1", "k1", hour)
	if !ok || u.requests != calls || u.prompt != 2*calls || u.completion != 3*calls {
		t.Errorf("usage = %+v (found %v), want %d requests, each counted once", u, ok, calls)
	}
}

// While the store does not take writes, runs go to the spool instead of being lost; when it answers
// again they are all stored, once, and the usage aggregates count each run once.
func TestStoreAwayLosesNothing(t *testing.T) {
	sqldb := fixture(t)
	rec, err := Open(sqldb, spoolOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	hour := time.UnixMilli(1_700_000_000_000).Truncate(time.Hour)

	ids := record(t, rec, 20, hour)
	rec.Flush()
	back := storeAway(t, sqldb)
	ids = append(ids, record(t, rec, 50, hour.Add(time.Minute))...)
	rec.Flush()
	if got := rec.Spooled(); got != 50 {
		t.Fatalf("spooled %d runs while the store was away, want 50", got)
	}
	if n := len(runsOf(t, sqldb, "d1")); n != 14 {
		t.Fatalf("%d runs stored while the store was away, want the 14 written before", n)
	}
	back()
	// Runs recorded while the spool drains go after it, and are not lost either.
	ids = append(ids, record(t, rec, 10, hour.Add(2*time.Minute))...)
	waitDrained(t, rec)
	rec.Flush()
	checkStoredOnce(t, sqldb, ids, 80, hour)
	if rec.Dropped() != 0 || rec.Failed() != 0 {
		t.Errorf("dropped %d, failed %d; want none", rec.Dropped(), rec.Failed())
	}
}

// A spool left by a process that stopped while the store was away is replayed by the next one; and a
// spool replayed again (the process died after writing a batch, before noting it) stores and counts
// nothing twice: each batch keeps its id, which the store applies once.
func TestSpoolIsReplayedAfterARestartOnce(t *testing.T) {
	sqldb := fixture(t)
	dir := t.TempDir()
	hour := time.UnixMilli(1_700_000_000_000).Truncate(time.Hour)

	rec, err := Open(sqldb, spoolOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	back := storeAway(t, sqldb)
	ids := record(t, rec, 40, hour)
	rec.Close() // with the store away, Close leaves the runs in the spool
	if n := len(runsOf(t, sqldb, "d1")); n != 0 {
		t.Fatalf("%d runs stored while the store was away", n)
	}
	// A copy of the spool as it was: what a process killed before noting the batches written leaves.
	copied := filepath.Join(t.TempDir(), "copy")
	copyDir(t, dir, copied)
	back()

	// The spool itself, then its copy replayed again: each stores and counts nothing twice.
	for _, folder := range []string{dir, copied} {
		// Counted before the recorder opens it: its replay starts at once, and a batch applied before
		// is acknowledged in a moment.
		if n := spooledRuns(t, folder); n != 40 {
			t.Fatalf("spool %s holds %d runs on reopening, want 40", folder, n)
		}
		rec, err = Open(sqldb, spoolOptions(folder))
		if err != nil {
			t.Fatal(err)
		}
		waitDrained(t, rec)
		rec.Close()
		checkStoredOnce(t, sqldb, ids, 40, hour)
	}
}

// When the spool is full, a batch that does not fit is dropped and counted, as a full buffer drops.
func TestFullSpoolDrops(t *testing.T) {
	sqldb := fixture(t)
	o := spoolOptions(t.TempDir())
	o.SpoolMaxBytes = 12000
	rec, err := Open(sqldb, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	back := storeAway(t, sqldb)
	defer back()
	record(t, rec, 70, time.UnixMilli(1_700_000_000_000))
	rec.Flush()
	if rec.Spooled() == 0 || rec.Dropped() == 0 || rec.Spooled()+rec.Dropped() != 70 {
		t.Errorf("spooled %d, dropped %d: want some of each, 70 in all", rec.Spooled(), rec.Dropped())
	}
	if got := rec.Degraded(); got != "dropping runs" {
		t.Errorf("Degraded() = %q, want \"dropping runs\"", got)
	}
}

// lines is a logger's output, safe for the recorder's goroutines.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// Runs dropped because the buffer is full are never dropped in silence: the first drop is an ERROR
// line, the next ones within the interval only counted (logx), and the recorder reports itself
// degraded (/readyz) for a minute.
func TestDropsAreLoggedAndDegraded(t *testing.T) {
	sqldb := fixture(t)
	var log lines
	rec := New(sqldb, Options{BufferSize: 4, BatchSize: 1000, FlushInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	defer rec.Close()
	if rec.Degraded() != "" {
		t.Fatalf("degraded before any drop: %q", rec.Degraded())
	}
	at := time.UnixMilli(1_700_000_000_000)
	for i := range 100 {
		rec.Record(runs.Run{DeploymentID: "d1", Model: "m", CreatedAt: at.Add(time.Duration(i))})
	}
	if rec.Dropped() != 96 {
		t.Errorf("dropped %d of 100 runs with a buffer of 4, want 96", rec.Dropped())
	}
	if n := log.count("level=ERROR msg=\"runs dropped"); n != 1 {
		t.Errorf("%d ERROR lines for 96 drops, want 1:\n%s", n, log.b.String())
	}
	if got := rec.Degraded(); got != "dropping runs" {
		t.Errorf("Degraded() = %q, want \"dropping runs\"", got)
	}
}

// A spool whose disk is full (a 256 KiB tmpfs, mounted for the test: it needs root) while the store is
// away: the runs that do not fit are dropped and counted, each failed append is counted
// (SpoolWriteErrors, svc_spool_write_errors_total), the recorder reports itself degraded, and the log
// gets a line, not one per batch.
func TestFullSpoolDiskIsDegraded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); TestFullSpoolDrops covers a full spool by its size", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	sqldb := fixture(t)
	var log lines
	o := spoolOptions(dir)
	o.Logger = slog.New(slog.NewTextHandler(&log, nil))
	rec, err := Open(sqldb, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	back := storeAway(t, sqldb)
	defer back()
	at := time.UnixMilli(1_700_000_000_000)
	const n = 2000 // about 500 KiB of lines: twice what the disk holds
	for i := range n {
		run := benchRun(i)
		run.CreatedAt = at
		if !rec.Record(run) {
			t.Fatalf("run %d refused by the buffer", i)
		}
		if i%100 == 99 {
			rec.Flush()
		}
	}
	rec.Flush()
	if rec.SpoolWriteErrors() == 0 || rec.Dropped() == 0 || rec.Spooled() == 0 || rec.Spooled()+rec.Dropped() != n {
		t.Errorf("spool write errors %d, spooled %d, dropped %d: want some of each, %d runs in all",
			rec.SpoolWriteErrors(), rec.Spooled(), rec.Dropped(), n)
	}
	if got := rec.Degraded(); got != "spool write failing" {
		t.Errorf("Degraded() = %q, want \"spool write failing\"", got)
	}
	if e := log.count("level=ERROR"); e != 1 {
		t.Errorf("%d ERROR lines for %d failed appends, want 1:\n%s", e, rec.SpoolWriteErrors(), log.b.String())
	}
}

// Two processes never share one spool.
func TestSpoolIsOneProcesss(t *testing.T) {
	sqldb := fixture(t)
	dir := t.TempDir()
	rec, err := Open(sqldb, spoolOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if other, err := Open(sqldb, spoolOptions(dir)); err == nil {
		other.Close()
		t.Fatal("a second recorder opened a spool in use")
	}
}

// spooledRuns is how many runs the spool in dir holds.
func spooledRuns(t *testing.T, dir string) int {
	t.Helper()
	disk, held, err := spool.Open(dir, 1<<30, "a recorder")
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	n := 0
	for _, b := range held {
		n += b.Runs
	}
	return n
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "lock" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// On PostgreSQL, the database itself goes away: its connections are cut and new ones refused
// (ALLOW_CONNECTIONS false), as while the server is stopped. Runs recorded meanwhile are spooled, and
// stored once each, counted once, when it takes connections again.
func TestPostgresAwayLosesNothing(t *testing.T) {
	pg := storetest.PostgresOnly(t)
	sqldb := fixture(t)
	var name string
	if err := sqldb.QueryRow(`SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(sqldb, spoolOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	hour := time.UnixMilli(1_700_000_000_000).Truncate(time.Hour)
	ids := record(t, rec, 20, hour)
	rec.Flush()

	pg.Exec(t, `ALTER DATABASE "`+name+`" ALLOW_CONNECTIONS false`)
	pg.Exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name)
	ids = append(ids, record(t, rec, 50, hour.Add(time.Minute))...)
	rec.Flush()
	if got := rec.Spooled(); got != 50 {
		t.Errorf("spooled %d runs while PostgreSQL refused connections, want 50", got)
	}
	pg.Exec(t, `ALTER DATABASE "`+name+`" ALLOW_CONNECTIONS true`)
	waitDrained(t, rec)
	checkStoredOnce(t, sqldb, ids, 70, hour)
	if rec.Dropped() != 0 || rec.Failed() != 0 {
		t.Errorf("dropped %d, failed %d; want none", rec.Dropped(), rec.Failed())
	}
}

// A store slower than the traffic (here SQLite's write lock held by another connection, so that the
// recorder's writer waits in its transaction) no longer drops the runs that find the buffer full: they
// go to the spool, off the request path, and are stored once the store answers, each once.
func TestSlowStoreSpoolsInsteadOfDropping(t *testing.T) {
	sqldb := fixture(t)
	o := spoolOptions(t.TempDir())
	o.BufferSize = 16
	rec, err := Open(sqldb, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	hour := time.UnixMilli(1_700_000_000_000).Truncate(time.Hour)

	ctx := context.Background()
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lock := []string{"BEGIN IMMEDIATE"} // SQLite: the write lock
	if db.EngineOf(sqldb) == db.Postgres {
		lock = []string{"BEGIN", "LOCK TABLE usage_hourly IN ACCESS EXCLUSIVE MODE"}
	}
	for _, stmt := range lock {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range 20 { // 200 runs, more than the buffer holds while the lock is held
		ids = append(ids, record(t, rec, 10, hour.Add(time.Duration(i)*time.Second))...)
		// Traffic the spool can take: the next 10 come once the overflow buffer is empty again (each of
		// its batches is synced to disk, which a loaded machine can take tens of milliseconds to do).
		for deadline := time.Now().Add(5 * time.Second); rec.overflow.Len() > 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if rec.Spooled() == 0 {
		t.Fatal("nothing was spooled while the store was stuck")
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	waitDrained(t, rec)
	rec.Flush()
	checkStoredOnce(t, sqldb, ids, 200, hour)
	if rec.Dropped() != 0 {
		t.Errorf("dropped %d runs; want none", rec.Dropped())
	}
}
