package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/db/storetest"
)

func TestEncodeBodyRoundTrips(t *testing.T) {
	for _, s := range []string{"", "{}", "a\x00b", "\xff", "\xed\xa0\x80", "\uFFFEsvc-base64:", "\uFFFEsvc-base64:!!", "héllo"} {
		enc := db.EncodeBody(s)
		if got := db.DecodeBody(enc); got != s {
			t.Errorf("%q: encoded %q, decoded %q", s, enc, got)
		}
		if strings.IndexByte(enc, 0) >= 0 || !strings.ContainsRune(enc+"x", 'x') {
			t.Errorf("%q: encoded with a NUL: %q", s, enc)
		}
	}
	if db.EncodeBody(`{"a":1}`) != `{"a":1}` {
		t.Error("a valid body is kept as is")
	}
}

// runsFixture is a database with one deployment, d1, for run batches.
func runsFixture(t testing.TB) *sql.DB {
	ctx := context.Background()
	sqldb := storetest.Open(t)
	q := db.For(sqldb)
	for _, err := range []error{
		q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o1", Slug: "org", CreatedAt: 1}),
		q.ProjectCreate(ctx, sqldb, dbsqlc.ProjectCreateParams{ID: "p1", OrgID: "o1", Slug: "proj", CreatedAt: 1}),
		q.DeploymentCreate(ctx, sqldb, dbsqlc.DeploymentCreateParams{ID: "d1", Slug: "d1", ProjectID: "p1", TargetKind: "multi_model",
			AuthMode: "none", Enabled: true, RunRetentionMode: "days", RunRetentionDays: 7, CreatedAt: 1, UpdatedAt: 1}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return sqldb
}

func batchRows(from, n int) []dbsqlc.RunCreateParams {
	out := make([]dbsqlc.RunCreateParams, n)
	for i := range out {
		out[i] = dbsqlc.RunCreateParams{ID: fmt.Sprintf("r%09d", from+i), DeploymentID: "d1", Model: "m", Status: "ok",
			LatencyMs: 12, PromptTokens: 20, CompletionTokens: 40, CreatedAt: time.Now().UnixMilli(),
			Request:  `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 960) + `"}]}`,
			Response: `{"choices":[{"message":{"content":"` + strings.Repeat("y", 540) + `"}}]}`, StatusCode: 200}
	}
	return out
}

// TestInsertRunsOnceEach writes a batch, then a larger one holding it: each run is inserted once and
// reported as inserted once, with a NULL key and expiry where it has none, its request as sent and a
// fleet's replica, retry and cached tokens. On PostgreSQL the first batch is copied; the second, whose
// copy the store refuses (its first runs are there already), goes through the staging table and its
// INSERT … ON CONFLICT. Two sizes, as the recorder's small batches and an edge's large ones.
func TestInsertRunsOnceEach(t *testing.T) {
	for _, n := range []int{10, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { insertOnceEach(t, n) })
	}
}

func insertOnceEach(t *testing.T, n int) {
	ctx := context.Background()
	sqldb := runsFixture(t)
	rows := batchRows(0, n)
	rows[3].ExpiresAt = sql.NullInt64{Int64: 99, Valid: true}
	rows[4].KeyID = sql.NullString{} // no key: NULL, not ''
	rows[2].Request = "a\x00b\xff"   // stored as sent on both engines
	// A fleet's retried call.
	rows[3].Replica, rows[3].RetriedFrom, rows[3].CachedTokens = "10.0.0.2:8000", "10.0.0.1:8000", 16
	rows[5].Arm, rows[5].ArmTarget, rows[5].ShadowOf, rows[5].TtftMs = "canary", "ft-job-step-400", rows[4].ID, 7
	write := func(rows []dbsqlc.RunCreateParams) []bool {
		var ins []bool
		if err := db.Write(ctx, sqldb, func(tx *db.WriteTx) error {
			var err error
			ins, _, err = db.InsertRuns(ctx, tx, rows)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ins
	}
	first := n * 6 / 10
	for i, ok := range write(rows[:first]) {
		if !ok {
			t.Fatalf("run %d not inserted", i)
		}
	}
	for i, ok := range write(rows) {
		if ok != (i >= first) {
			t.Fatalf("run %d inserted %v, want %v", i, ok, i >= first)
		}
	}
	var stored int
	if err := sqldb.QueryRow(`SELECT count(*) FROM runs`).Scan(&stored); err != nil || stored != n {
		t.Fatalf("runs stored: %d, %v", stored, err)
	}
	for _, i := range []int{2, 3, 5} {
		r, err := db.For(sqldb).RunGet(ctx, sqldb, dbsqlc.RunGetParams{ID: rows[i].ID, DeploymentID: "d1"})
		if err != nil || r.ExpiresAt != rows[i].ExpiresAt || r.Request != rows[i].Request || r.Response != rows[i].Response ||
			r.Replica != rows[i].Replica || r.RetriedFrom != rows[i].RetriedFrom || r.CachedTokens != rows[i].CachedTokens ||
			r.Arm != rows[i].Arm || r.ArmTarget != rows[i].ArmTarget || r.ShadowOf != rows[i].ShadowOf || r.TtftMs != rows[i].TtftMs {
			t.Fatalf("run %d: %+v %v", i, r, err)
		}
	}
	// Every read of a run's bodies gives them as sent, on PostgreSQL too (where the odd one is stored
	// encoded): the runs list's request, an eval's reads, the export's page.
	q, odd := db.For(sqldb), rows[2]
	if req, err := q.RunRequest(ctx, sqldb, dbsqlc.RunRequestParams{ID: odd.ID, DeploymentID: "d1"}); err != nil || req != odd.Request {
		t.Fatalf("RunRequest: %q, %v", req, err)
	}
	if r, err := q.RunResponse(ctx, sqldb, dbsqlc.RunResponseParams{ID: odd.ID, DeploymentID: "d1"}); err != nil || r.Request != odd.Request {
		t.Fatalf("RunResponse: %q, %v", r.Request, err)
	}
	if rs, err := q.RunResponsesByIDs(ctx, sqldb, dbsqlc.RunResponsesByIDsParams{DeploymentID: "d1", Ids: `["` + odd.ID + `"]`}); err != nil || len(rs) != 1 || rs[0].Request != odd.Request {
		t.Fatalf("RunResponsesByIDs: %+v, %v", rs, err)
	}
	page, err := q.RunExportPage(ctx, sqldb, dbsqlc.RunExportPageParams{DeploymentID: "d1", Until: 1 << 62, Now: sql.NullInt64{Int64: 1, Valid: true}, Lim: int64(n)})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(page, func(r dbsqlc.RunExportPageRow) bool { return r.ID == odd.ID }); i < 0 || page[i].Request != odd.Request {
		t.Fatalf("RunExportPage: %d runs, the odd one at %d", len(page), i)
	}
	var nullKeys, noExpiry int
	if err := sqldb.QueryRow(`SELECT count(*) FROM runs WHERE key_id IS NULL`).Scan(&nullKeys); err != nil || nullKeys != n {
		t.Fatalf("runs without a key: %d, %v", nullKeys, err)
	}
	if err := sqldb.QueryRow(`SELECT count(*) FROM runs WHERE expires_at IS NULL`).Scan(&noExpiry); err != nil || noExpiry != n-1 {
		t.Fatalf("runs without expiry: %d, %v", noExpiry, err)
	}
}

// BenchmarkInsertRuns writes batches of 1,000 runs of a short chat's size in one transaction each.
func BenchmarkInsertRuns(b *testing.B) {
	benchmarkBatches(b, func(ctx context.Context, sqldb *sql.DB, tx *db.WriteTx, rows []dbsqlc.RunCreateParams) error {
		_, _, err := db.InsertRuns(ctx, tx, rows)
		return err
	})
}

// BenchmarkInsertRunsOneByOne is the same batches written as the recorder wrote them before
// InsertRuns: one INSERT (a round trip on PostgreSQL) per run, in one transaction per batch.
func BenchmarkInsertRunsOneByOne(b *testing.B) {
	benchmarkBatches(b, func(ctx context.Context, sqldb *sql.DB, tx *db.WriteTx, rows []dbsqlc.RunCreateParams) error {
		q := db.For(sqldb)
		for _, r := range rows {
			if err := q.RunCreate(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchmarkBatches writes batches of 1,000 runs with write, one transaction each, and reports runs/s.
func benchmarkBatches(b *testing.B, write func(context.Context, *sql.DB, *db.WriteTx, []dbsqlc.RunCreateParams) error) {
	ctx := context.Background()
	sqldb := runsFixture(b)
	n := 0
	start := time.Now()
	for b.Loop() {
		rows := batchRows(n, 1000)
		n += len(rows)
		if err := db.Write(ctx, sqldb, func(tx *db.WriteTx) error { return write(ctx, sqldb, tx, rows) }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "runs/s")
}

// The columns a batch is copied into, found from dbsqlc.RunCreateParams' field names, are the runs
// table's, on the engine that copies.
func TestRunColumnsAreTheTable(t *testing.T) {
	sqldb := runsFixture(t)
	if db.EngineOf(sqldb) != db.Postgres {
		t.Skip("only PostgreSQL copies batches")
	}
	rows, err := sqldb.Query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	table := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		table[c] = true
	}
	cols := db.RunColumns()
	if len(cols) < 19 {
		t.Fatalf("columns %v", cols)
	}
	for _, c := range cols {
		if !table[c] {
			t.Errorf("column %q is not one of the runs table's %v", c, table)
		}
	}
}
