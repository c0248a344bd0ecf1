package recorder

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// fixture opens a fresh database with one project, the deployments "d1" and "d2", and key "k1" on d1.
func fixture(t *testing.T) *sql.DB {
	t.Helper()
	ctx := context.Background()
	sqldb, err := db.OpenFile(ctx, filepath.Join(t.TempDir(), "svc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqldb.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.Q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o1", Slug: "org", CreatedAt: 1}))
	must(db.Q.ProjectCreate(ctx, sqldb, dbsqlc.ProjectCreateParams{ID: "p1", OrgID: "o1", Slug: "proj", CreatedAt: 1}))
	for _, id := range []string{"d1", "d2"} {
		must(db.Q.DeploymentCreate(ctx, sqldb, dbsqlc.DeploymentCreateParams{
			ID: id, Slug: "slug-" + id, ProjectID: "p1", TargetKind: "multi_model", AuthMode: "fixed_api_key",
			Enabled: true, RunRetentionMode: "days", RunRetentionDays: 7, CreatedAt: 1, UpdatedAt: 1,
		}))
	}
	must(db.Q.KeyCreate(ctx, sqldb, dbsqlc.KeyCreateParams{ID: "k1", DeploymentID: "d1", Label: "a", Prefix: "sk-ep-abc", Hash: []byte("h1"), CreatedAt: 1}))
	return sqldb
}

func runsOf(t *testing.T, sqldb *sql.DB, deployment string) []dbsqlc.Run {
	t.Helper()
	rows, err := sqldb.Query(`SELECT id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
		created_at, expires_at, request, response FROM runs WHERE deployment_id = ? ORDER BY created_at, id`, deployment)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []dbsqlc.Run
	for rows.Next() {
		var r dbsqlc.Run
		if err := rows.Scan(&r.ID, &r.DeploymentID, &r.KeyID, &r.Model, &r.Status, &r.LatencyMs, &r.PromptTokens,
			&r.CompletionTokens, &r.CreatedAt, &r.ExpiresAt, &r.Request, &r.Response); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestRunKeepsTheExpiresAtItWasGiven(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{})
	at := time.UnixMilli(1_700_000_000_000)
	day := int64(24 * time.Hour / time.Millisecond)

	base := Run{DeploymentID: "d1", KeyID: "k1", Model: "m", Status: "ok", Latency: 42 * time.Millisecond,
		PromptTokens: 3, CompletionTokens: 5, CreatedAt: at, Request: []byte(`{"a":1}`), Response: []byte(`{"b":2}`)}

	r := base
	r.ExpiresAt = at.Add(3 * 24 * time.Hour)
	if !rec.Record(r) {
		t.Fatal("run not queued")
	}
	// A zero ExpiresAt keeps the run until deleted.
	r = base
	r.CreatedAt = at.Add(time.Millisecond)
	rec.Record(r)
	rec.Close()

	runs := runsOf(t, sqldb, "d1")
	if len(runs) != 2 {
		t.Fatalf("got %d runs, want 2", len(runs))
	}
	first, second := runs[0], runs[1]
	if !first.ExpiresAt.Valid || first.ExpiresAt.Int64 != at.UnixMilli()+3*day {
		t.Errorf("expiresAt = %v, want created + 3 days", first.ExpiresAt)
	}
	if second.ExpiresAt.Valid {
		t.Errorf("expiresAt of a run given none = %v, want null", second.ExpiresAt)
	}
	if first.KeyID.String != "k1" || first.Model != "m" || first.LatencyMs != 42 || first.PromptTokens != 3 ||
		first.CompletionTokens != 5 || first.Request != `{"a":1}` || first.Response != `{"b":2}` || first.Status != "ok" {
		t.Errorf("run fields not stored as given: %+v", first)
	}
	if !strings.HasPrefix(first.ID, "run_") || first.ID == second.ID {
		t.Errorf("run ids %q %q", first.ID, second.ID)
	}
}

func TestBatchesAndFlush(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{BatchSize: 10, FlushInterval: time.Hour})
	defer rec.Close()
	for i := 0; i < 25; i++ {
		rec.Record(Run{DeploymentID: "d1", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	}
	rec.Flush()
	if n := len(runsOf(t, sqldb, "d1")); n != 25 {
		t.Fatalf("after Flush: %d runs, want 25", n)
	}
}

func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	sqldb := fixture(t)
	// Hold the write lock so that the writer goroutine is stuck in its first transaction.
	conn, err := sqldb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	rec := New(sqldb, Options{BufferSize: 4, BatchSize: 1, FlushInterval: time.Millisecond})
	start := time.Now()
	for i := 0; i < 100; i++ {
		rec.Record(Run{DeploymentID: "d1", Model: "m", ExpiresAt: time.Now().Add(24 * time.Hour), Request: []byte("{}"), Response: []byte("{}")})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Record blocked for %v", d)
	}
	if rec.Dropped() == 0 {
		t.Fatal("nothing dropped with a full buffer")
	}
	conn.ExecContext(context.Background(), "ROLLBACK")
	conn.Close()
	rec.Close()
	stored := int64(len(runsOf(t, sqldb, "d1")))
	if stored+rec.Dropped() != 100 {
		t.Fatalf("stored %d + dropped %d != 100", stored, rec.Dropped())
	}
}

func TestDeletedDeploymentDoesNotLoseBatch(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{FlushInterval: time.Hour})
	rec.Record(Run{DeploymentID: "d1", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	rec.Record(Run{DeploymentID: "gone", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	rec.Record(Run{DeploymentID: "d2", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	rec.Close()
	if len(runsOf(t, sqldb, "d1")) != 1 || len(runsOf(t, sqldb, "d2")) != 1 || rec.Failed() != 1 {
		t.Fatalf("d1=%d d2=%d failed=%d", len(runsOf(t, sqldb, "d1")), len(runsOf(t, sqldb, "d2")), rec.Failed())
	}
}

func TestTouchIsBatchedAndMonotonic(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{TouchInterval: time.Hour})
	defer rec.Close()
	lastUsed := func() sql.NullInt64 {
		k, err := db.Q.KeyGet(context.Background(), sqldb, dbsqlc.KeyGetParams{ID: "k1", DeploymentID: "d1"})
		if err != nil {
			t.Fatal(err)
		}
		return k.LastUsedAt
	}
	rec.Touch("k1", time.UnixMilli(2000))
	rec.Touch("k1", time.UnixMilli(1000)) // older: ignored
	if lastUsed().Valid {
		t.Fatal("lastUsedAt written before a flush: want batched writes")
	}
	rec.Flush()
	if got := lastUsed(); got.Int64 != 2000 {
		t.Fatalf("lastUsedAt = %v, want 2000", got)
	}
	rec.Touch("k1", time.UnixMilli(1500)) // a stale batch cannot rewind it
	rec.Flush()
	if got := lastUsed(); got.Int64 != 2000 {
		t.Fatalf("lastUsedAt = %v after stale touch, want 2000", got)
	}
}
