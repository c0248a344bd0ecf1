package db_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/db/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// replicas opens n handles on one fresh PostgreSQL database, as n replicas of svc server would.
func replicas(t *testing.T, n int) []*sql.DB {
	t.Helper()
	url := storetest.PostgresOnly(t).NewDatabase(t)
	out := make([]*sql.DB, n)
	for i := range out {
		sqldb, err := db.OpenPostgres(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sqldb.Close() })
		out[i] = sqldb
	}
	return out
}

// leaders runs RunAsLeader on each handle and returns, per handle, whether its fn runs now, and the
// cancel of each.
func leaders(t *testing.T, dbs []*sql.DB) ([]*atomic.Bool, []context.CancelFunc) {
	t.Helper()
	leading := make([]*atomic.Bool, len(dbs))
	cancels := make([]context.CancelFunc, len(dbs))
	for i, sqldb := range dbs {
		leading[i] = new(atomic.Bool)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		cancels[i] = func() { cancel(); <-done }
		t.Cleanup(cancels[i])
		go func() {
			defer close(done)
			db.RunAsLeader(ctx, sqldb, quiet, func(ctx context.Context) {
				leading[i].Store(true)
				<-ctx.Done()
				leading[i].Store(false)
			})
		}()
	}
	return leading, cancels
}

// waitLeader waits until exactly one handle leads and returns it.
func waitLeader(t *testing.T, leading []*atomic.Bool, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		who, n := -1, 0
		for i, l := range leading {
			if l.Load() {
				who, n = i, n+1
			}
		}
		if n > 1 {
			t.Fatalf("%d replicas lead at once", n)
		}
		if n == 1 {
			return who
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica leads after %v", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One replica at a time runs the background work; when it stops, or its connection dies, another takes
// over within seconds.
func TestOneReplicaLeadsAndAnotherTakesOver(t *testing.T) {
	dbs := replicas(t, 3)
	leading, cancels := leaders(t, dbs)
	first := waitLeader(t, leading, 5*time.Second)
	// Still exactly one a little later.
	time.Sleep(3 * db.LeaderRetry)
	if again := waitLeader(t, leading, 0); again != first {
		t.Fatalf("the lead moved from %d to %d with nobody gone", first, again)
	}

	// The leader stops (a replica shut down): another leads.
	start := time.Now()
	cancels[first]()
	second := waitLeader(t, leading, 5*time.Second)
	t.Logf("takeover after a clean stop: %v", time.Since(start))
	if second == first {
		t.Fatal("a stopped replica still leads")
	}

	// The leader's connection dies (its process was killed, say): PostgreSQL releases the lock, the
	// leader notices and stops, and the other takes over.
	var pid int
	if err := dbs[0].QueryRow(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND ((classid::bigint << 32) | objid::bigint) = $1`, db.LeaderLockKey).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := dbs[0].Exec(`SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for leading[second].Load() || !leading[3-first-second].Load() {
		if time.Now().After(deadline) {
			t.Fatalf("after the leader's connection died: leading %v %v %v", leading[0].Load(), leading[1].Load(), leading[2].Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("takeover after the leader's connection died: %v", time.Since(start))
	waitLeader(t, leading, 0)
}

// On SQLite there is one process: it leads at once.
func TestSQLiteAlwaysLeads(t *testing.T) {
	sqldb, err := db.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	leading, _ := leaders(t, []*sql.DB{sqldb})
	waitLeader(t, leading, time.Second)
}

// A replica that LISTENs is woken by a change committed through another.
func TestListenWakesOnChangesOfOtherReplicas(t *testing.T) {
	dbs := replicas(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := db.Listen(ctx, dbs[0], quiet, db.EdgeChangesChannel)
	select {
	case <-wake: // connected
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up once listening")
	}
	select {
	case <-wake:
		t.Fatal("woken with no change")
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	q := db.For(dbs[1])
	if err := db.Tx(ctx, dbs[1], func(tx *sql.Tx) error {
		return q.EdgeChangeAdd(ctx, tx, dbsqlc.EdgeChangeAddParams{Slug: "s", CreatedAt: 1})
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
		t.Logf("woken %v after the commit", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("a change committed by another replica did not wake this one")
	}
}

// Replicas that start together on an empty database migrate it once: each waits for the lock, then
// finds the schema up to date.
func TestReplicasMigrateTogether(t *testing.T) {
	url := storetest.PostgresOnly(t).NewEmptyDatabase(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			sqldb, err := db.OpenPostgres(context.Background(), url)
			if err == nil {
				sqldb.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	sqldb, err := db.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	var applied, distinct int
	if err := sqldb.QueryRow(`SELECT count(*), count(DISTINCT version) FROM svc_schema_migrations`).Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir("migrations/postgres")
	if applied != len(entries) || distinct != len(entries) {
		t.Fatalf("%d migrations recorded (%d distinct), want each of the %d once", applied, distinct, len(entries))
	}
}
