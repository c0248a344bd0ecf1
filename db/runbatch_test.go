package db_test

import (
	"context"
	"database/sql"
	"fmt"
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

func TestInsertRunsOnceEach(t *testing.T) {
	ctx := context.Background()
	sqldb := runsFixture(t)
	e := db.EngineOf(sqldb)
	rows := batchRows(0, 10)
	rows[3].ExpiresAt = sql.NullInt64{Int64: 99, Valid: true}
	rows[4].KeyID = sql.NullString{} // no key: NULL, not ''
	var ins []bool
	if err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
		var err error
		ins, _, err = db.InsertRuns(ctx, e, tx, rows[:6])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, ok := range ins {
		if !ok {
			t.Fatalf("run %d not inserted", i)
		}
	}
	if err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
		var err error
		ins, _, err = db.InsertRuns(ctx, e, tx, rows)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, ok := range ins {
		if ok != (i >= 6) {
			t.Fatalf("run %d inserted %v, want %v", i, ok, i >= 6)
		}
	}
	r, err := db.For(sqldb).RunGet(ctx, sqldb, dbsqlc.RunGetParams{ID: rows[3].ID, DeploymentID: "d1"})
	if err != nil || r.ExpiresAt.Int64 != 99 || r.Request != rows[3].Request {
		t.Fatalf("%+v %v", r, err)
	}
	var nullKeys, noExpiry int
	if err := sqldb.QueryRow(`SELECT count(*) FROM runs WHERE key_id IS NULL`).Scan(&nullKeys); err != nil || nullKeys != 10 {
		t.Fatalf("runs without a key: %d, %v", nullKeys, err)
	}
	if err := sqldb.QueryRow(`SELECT count(*) FROM runs WHERE expires_at IS NULL`).Scan(&noExpiry); err != nil || noExpiry != 9 {
		t.Fatalf("runs without expiry: %d, %v", noExpiry, err)
	}
}

// BenchmarkInsertRuns writes batches of 1,000 runs of a short chat's size in one transaction each.
func BenchmarkInsertRuns(b *testing.B) {
	benchmarkBatches(b, func(ctx context.Context, sqldb *sql.DB, tx *sql.Tx, rows []dbsqlc.RunCreateParams) error {
		_, _, err := db.InsertRuns(ctx, db.EngineOf(sqldb), tx, rows)
		return err
	})
}

// BenchmarkInsertRunsOneByOne is the same batches written as the recorder wrote them before
// InsertRuns: one INSERT (a round trip on PostgreSQL) per run, in one transaction per batch.
func BenchmarkInsertRunsOneByOne(b *testing.B) {
	benchmarkBatches(b, func(ctx context.Context, sqldb *sql.DB, tx *sql.Tx, rows []dbsqlc.RunCreateParams) error {
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
func benchmarkBatches(b *testing.B, write func(context.Context, *sql.DB, *sql.Tx, []dbsqlc.RunCreateParams) error) {
	ctx := context.Background()
	sqldb := runsFixture(b)
	n := 0
	start := time.Now()
	for b.Loop() {
		rows := batchRows(n, 1000)
		n += len(rows)
		if err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error { return write(ctx, sqldb, tx, rows) }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "runs/s")
}
