package recorder

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/db/storetest"
	"github.com/svcdev/svc/internal/runs"
)

// The recorder's tests run on SQLite, then on PostgreSQL (storetest.Main).
func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fixture opens a fresh database with one project, the deployments "d1" and "d2", and key "k1" on d1.
func fixture(t testing.TB) *sql.DB {
	t.Helper()
	ctx := context.Background()
	sqldb := storetest.Open(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.For(sqldb).OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o1", Slug: "org", CreatedAt: 1}))
	must(db.For(sqldb).ProjectCreate(ctx, sqldb, dbsqlc.ProjectCreateParams{ID: "p1", OrgID: "o1", Slug: "proj", CreatedAt: 1}))
	for _, id := range []string{"d1", "d2"} {
		must(db.For(sqldb).DeploymentCreate(ctx, sqldb, dbsqlc.DeploymentCreateParams{
			ID: id, Slug: "slug-" + id, ProjectID: "p1", TargetKind: "multi_model", AuthMode: "fixed_api_key",
			Enabled: true, RunRetentionMode: "days", RunRetentionDays: 7, CreatedAt: 1, UpdatedAt: 1,
		}))
	}
	must(db.For(sqldb).KeyCreate(ctx, sqldb, dbsqlc.KeyCreateParams{ID: "k1", DeploymentID: "d1", Label: "a", Prefix: "sk-ep-abc", Hash: []byte("h1"), CreatedAt: 1}))
	return sqldb
}

func runsOf(t *testing.T, sqldb *sql.DB, deployment string) []dbsqlc.Run {
	t.Helper()
	rows, err := sqldb.Query(storetest.Rebind(sqldb, `SELECT id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
		created_at, expires_at, request, response FROM runs WHERE deployment_id = ? ORDER BY created_at, id`), deployment)
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

	base := runs.Run{DeploymentID: "d1", KeyID: "k1", Model: "m", Status: "ok", Latency: 42 * time.Millisecond,
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
	r = base
	r.CreatedAt = at.Add(2 * time.Millisecond)
	r.UsageOnly = true
	rec.Record(r) // counted in the usage aggregates, but its transcript is not stored
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
		rec.Record(runs.Run{DeploymentID: "d1", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
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
	lock := []string{"BEGIN IMMEDIATE"}
	if db.EngineOf(sqldb) == db.Postgres {
		lock = []string{"BEGIN", "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(db.WriteLockKey, 10) + ")"}
	}
	for _, stmt := range lock {
		if _, err := conn.ExecContext(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	rec := New(sqldb, Options{BufferSize: 4, BatchSize: 1, FlushInterval: time.Millisecond})
	start := time.Now()
	for i := 0; i < 100; i++ {
		rec.Record(runs.Run{DeploymentID: "d1", Model: "m", ExpiresAt: time.Now().Add(24 * time.Hour), Request: []byte("{}"), Response: []byte("{}")})
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
	rec.Record(runs.Run{DeploymentID: "d1", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	rec.Record(runs.Run{DeploymentID: "gone", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	rec.Record(runs.Run{DeploymentID: "d2", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	rec.Close()
	if len(runsOf(t, sqldb, "d1")) != 1 || len(runsOf(t, sqldb, "d2")) != 1 || rec.Failed() != 1 {
		t.Fatalf("d1=%d d2=%d failed=%d", len(runsOf(t, sqldb, "d1")), len(runsOf(t, sqldb, "d2")), rec.Failed())
	}
}

// Without a spool, a batch the store does not take (here its usage table is away, so the transaction
// fails) is lost whole, never half-written: its runs are counted as dropped and /readyz says so.
func TestWithoutSpoolAFailedBatchIsDroppedAndSeen(t *testing.T) {
	sqldb := fixture(t)
	if _, err := sqldb.Exec(`ALTER TABLE usage_hourly RENAME TO usage_hourly_away`); err != nil {
		t.Fatal(err)
	}
	rec := New(sqldb, Options{FlushInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	defer rec.Close()
	for range 5 {
		rec.Record(runs.Run{DeploymentID: "d1", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	}
	rec.Flush()
	if n := len(runsOf(t, sqldb, "d1")); n != 0 || rec.Dropped() != 5 || rec.Degraded() != "dropping runs" {
		t.Fatalf("stored %d, dropped %d, degraded %q; want 0, 5, \"dropping runs\"", n, rec.Dropped(), rec.Degraded())
	}
}

func TestTouchIsBatchedAndMonotonic(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{TouchInterval: time.Hour})
	defer rec.Close()
	lastUsed := func() sql.NullInt64 {
		k, err := db.For(sqldb).KeyGet(context.Background(), sqldb, dbsqlc.KeyGetParams{ID: "k1", DeploymentID: "d1"})
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

// usageRow is one usage_hourly row as stored.
type usageRow struct {
	requests, errors, prompt, completion, latencySum int64
	hist                                             [12]int64
}

func usageOf(t *testing.T, sqldb *sql.DB, deployment, key string, hour time.Time) (usageRow, bool) {
	t.Helper()
	var u usageRow
	h := &u.hist
	err := sqldb.QueryRow(storetest.Rebind(sqldb, `SELECT requests, errors, prompt_tokens, completion_tokens, latency_sum_ms,
		lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf
		FROM usage_hourly WHERE deployment_id = ? AND key_id = ? AND hour = ?`), deployment, key, hour.UnixMilli()).
		Scan(&u.requests, &u.errors, &u.prompt, &u.completion, &u.latencySum,
			&h[0], &h[1], &h[2], &h[3], &h[4], &h[5], &h[6], &h[7], &h[8], &h[9], &h[10], &h[11])
	if err == sql.ErrNoRows {
		return u, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return u, true
}

// Every run counts in the hourly usage of its deployment and key, written with the runs; with
// retention none the run's transcript is dropped but its usage still counts.
func TestUsageCountsEveryRun(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{FlushInterval: time.Hour})
	defer rec.Close()
	hour := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	run := func(dep, key, status string, minute int, latency time.Duration, prompt, completion int, usageOnly bool) {
		if !rec.Record(runs.Run{DeploymentID: dep, KeyID: key, Model: "m", Status: status, Latency: latency,
			PromptTokens: prompt, CompletionTokens: completion, CreatedAt: hour.Add(time.Duration(minute) * time.Minute),
			Request: []byte(`{"messages":"secret prompt"}`), Response: []byte(`{"answer":1}`), UsageOnly: usageOnly}) {
			t.Fatal("run not queued")
		}
	}
	run("d1", "k1", "ok", 1, 20*time.Millisecond, 3, 5, false)
	run("d1", "k1", "error", 59, 700*time.Millisecond, 4, 0, false)
	run("d1", "k1", "ok", 30, 70*time.Second, 1, 1, true) // retention none: not stored, still counted
	run("d1", "k1", "ok", 61, 30*time.Millisecond, 2, 2, true)
	run("d2", "", "ok", 5, 120*time.Millisecond, 6, 7, true) // a deployment in auth mode none
	rec.Flush()

	if n := len(runsOf(t, sqldb, "d1")); n != 2 {
		t.Fatalf("%d runs stored for d1, want 2 (retention none keeps no transcript)", n)
	}
	if n := len(runsOf(t, sqldb, "d2")); n != 0 {
		t.Fatalf("%d runs stored for d2 under retention none", n)
	}
	u, ok := usageOf(t, sqldb, "d1", "k1", hour)
	want := usageRow{requests: 3, errors: 1, prompt: 8, completion: 6, latencySum: 20 + 700 + 70_000,
		hist: [12]int64{0: 1, 5: 1, 11: 1}}
	if !ok || u != want {
		t.Fatalf("d1/k1 10:00 = %+v (found %v), want %+v", u, ok, want)
	}
	if u, ok := usageOf(t, sqldb, "d1", "k1", hour.Add(time.Hour)); !ok || u.requests != 1 || u.hist[1] != 1 {
		t.Fatalf("d1/k1 11:00 = %+v (found %v)", u, ok)
	}
	if u, ok := usageOf(t, sqldb, "d2", "", hour); !ok || u.requests != 1 || u.prompt != 6 || u.completion != 7 || u.hist[3] != 1 {
		t.Fatalf("d2 without key = %+v (found %v)", u, ok)
	}

	// A later batch adds to the same hour instead of replacing it.
	run("d1", "k1", "ok", 2, 20*time.Millisecond, 1, 1, false)
	rec.Flush()
	if u, _ := usageOf(t, sqldb, "d1", "k1", hour); u.requests != 4 || u.hist[0] != 2 {
		t.Fatalf("after a second batch: %+v", u)
	}
	// No transcript of a none run anywhere.
	var leaked int
	sqldb.QueryRow(`SELECT count(*) FROM runs WHERE request LIKE '%secret%' AND deployment_id = 'd2'`).Scan(&leaked)
	if leaked != 0 {
		t.Fatal("a transcript of a retention-none run was stored")
	}
}

// A batch writes each usage row once (an upsert per deployment, key and hour), not once per run.
func TestUsageIsOneWritePerRowPerBatch(t *testing.T) {
	batch := make([]runs.Run, 0, 100)
	for i := 0; i < 100; i++ {
		batch = append(batch, runs.Run{DeploymentID: "d1", KeyID: "k1", Status: "ok",
			CreatedAt: time.UnixMilli(int64(1_700_000_000_000 + i)), Latency: 10 * time.Millisecond})
	}
	rows := aggregate(batch)
	if len(rows) != 1 {
		t.Fatalf("%d usage rows for 100 runs of one key in one hour, want 1", len(rows))
	}
	for _, u := range rows {
		if u.Requests != 100 || u.Lat25 != 100 {
			t.Fatalf("row %+v", u)
		}
	}
}

// A deployment deleted while its runs wait in a batch loses neither the other runs nor their usage.
func TestUsageOfDeletedDeploymentDoesNotLoseBatch(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{FlushInterval: time.Hour})
	at := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	rec.Record(runs.Run{DeploymentID: "gone", Model: "m", CreatedAt: at, UsageOnly: true})
	rec.Record(runs.Run{DeploymentID: "d2", Model: "m", CreatedAt: at, UsageOnly: true})
	rec.Close()
	if u, ok := usageOf(t, sqldb, "d2", "", at); !ok || u.requests != 1 {
		t.Fatalf("d2 usage %+v (found %v)", u, ok)
	}
}

// Of a row's errors, those answered 401, 404 or 429 are also counted by status (refused_*), what the
// usage card's "Refused" line reads; other errors and answered calls are not.
func TestUsageCountsRefusedCallsByStatus(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{FlushInterval: time.Hour})
	defer rec.Close()
	hour := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	for i, code := range []int{401, 401, 404, 429, 500, 400, 200} {
		status := "error"
		if code == 200 {
			status = "ok"
		}
		if !rec.Record(runs.Run{DeploymentID: "d1", Model: "m", Status: status, StatusCode: code, Latency: time.Millisecond,
			CreatedAt: hour.Add(time.Duration(i) * time.Minute), UsageOnly: true}) {
			t.Fatal("run not queued")
		}
	}
	rec.Flush()
	var requests, errs, r401, r404, r429 int64
	if err := sqldb.QueryRow(`SELECT requests, errors, refused_401, refused_404, refused_429 FROM usage_hourly WHERE deployment_id = 'd1' AND key_id = ''`).
		Scan(&requests, &errs, &r401, &r404, &r429); err != nil {
		t.Fatal(err)
	}
	if requests != 7 || errs != 6 || r401 != 2 || r404 != 1 || r429 != 1 {
		t.Fatalf("requests %d, errors %d, refused 401 %d, 404 %d, 429 %d; want 7, 6, 2, 1, 1", requests, errs, r401, r404, r429)
	}
}

// Of a row's 429s, admission's refusals are counted by code (model_busy, budget_exhausted; a rate
// limit's are neither), and the calls that waited for their model's turn with their wait in all; two
// batches add to one row, on both engines, and the deployment's and the key's listings read them.
func TestUsageCountsAdmissionRefusalsAndWaits(t *testing.T) {
	sqldb := fixture(t)
	q := db.For(sqldb)
	ctx := context.Background()
	rec := New(sqldb, Options{FlushInterval: time.Hour})
	defer rec.Close()
	hour := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	calls := []struct {
		status int
		code   string
		queue  time.Duration
	}{
		{429, runs.CodeModelBusy, 500 * time.Millisecond}, {429, runs.CodeBudgetExhausted, 0}, {429, "rate_limit_exceeded", 0},
		{200, "", 100 * time.Millisecond}, {200, "", 0},
		{429, runs.CodeModelBusy, 500 * time.Millisecond}, {200, "", 300 * time.Millisecond},
	}
	for i, c := range calls {
		status := "ok"
		if c.status != 200 {
			status = "error"
		}
		if !rec.Record(runs.Run{DeploymentID: "d1", KeyID: "k1", Model: "m", Status: status, StatusCode: c.status, ErrorCode: c.code,
			Queue: c.queue, Latency: c.queue + time.Millisecond, CreatedAt: hour.Add(time.Duration(i) * time.Minute), UsageOnly: true}) {
			t.Fatal("run not queued")
		}
		if i == 4 {
			rec.Flush() // the rest is a second batch on the same row
		}
	}
	rec.Flush()
	from, to := hour.UnixMilli(), hour.Add(time.Hour).UnixMilli()
	dep, err := q.UsageListByDeployment(ctx, sqldb, dbsqlc.UsageListByDeploymentParams{DeploymentID: "d1", FromHour: from, ToHour: to})
	if err != nil || len(dep) != 1 {
		t.Fatalf("deployment usage %+v (%v)", dep, err)
	}
	key, err := q.UsageListByKey(ctx, sqldb, dbsqlc.UsageListByKeyParams{DeploymentID: "d1", KeyID: "k1", FromHour: from, ToHour: to})
	if err != nil || len(key) != 1 {
		t.Fatalf("key usage %+v (%v)", key, err)
	}
	for _, got := range [][5]int64{
		{dep[0].Refused429, dep[0].RefusedBusy, dep[0].RefusedBudget, dep[0].Queued, dep[0].QueueMsSum},
		{key[0].Refused429, key[0].RefusedBusy, key[0].RefusedBudget, key[0].Queued, key[0].QueueMsSum},
	} {
		if got != [5]int64{4, 2, 1, 4, 1400} {
			t.Errorf("refused 429, model_busy, budget_exhausted, queued, queue ms: %v; want [4 2 1 4 1400]", got)
		}
	}
}

// A shadow copy is the deployment's usage, never its key's, on both engines: the key's rows, the
// deployment's buckets and the key totals count the calls the key made; the copies' rows count the
// copies apart. And the export's minScore counts a run without feedback as 0.
func TestShadowCopiesCountApartFromTheKey(t *testing.T) {
	sqldb := fixture(t)
	q := db.For(sqldb)
	ctx := context.Background()
	rec := New(sqldb, Options{FlushInterval: time.Hour})
	defer rec.Close()
	hour := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		at := hour.Add(time.Duration(i) * time.Minute)
		primary := runs.Run{ID: "run_p" + strconv.Itoa(i), DeploymentID: "d1", KeyID: "k1", Model: "m", Status: "ok", Latency: time.Millisecond,
			PromptTokens: 2, CompletionTokens: 3, CreatedAt: at, Request: []byte(`{}`), Response: []byte(`{}`), Arm: "primary", ArmTarget: "m"}
		shadow := primary
		shadow.ID, shadow.Arm, shadow.ArmTarget, shadow.ShadowOf, shadow.PromptTokens = "run_s"+strconv.Itoa(i), "canary", "c", primary.ID, 5
		rec.Record(primary)
		rec.Record(shadow)
	}
	rec.Flush()
	from, to := hour.UnixMilli(), hour.Add(time.Hour).UnixMilli()
	mine, err := q.UsageListByKey(ctx, sqldb, dbsqlc.UsageListByKeyParams{DeploymentID: "d1", KeyID: "k1", FromHour: from, ToHour: to})
	if err != nil || len(mine) != 1 || mine[0].Requests != 3 || mine[0].PromptTokens != 6 {
		t.Fatalf("the key's usage %+v (%v), want 3 requests of 6 prompt tokens", mine, err)
	}
	all, err := q.UsageListByDeployment(ctx, sqldb, dbsqlc.UsageListByDeploymentParams{DeploymentID: "d1", FromHour: from, ToHour: to})
	if err != nil || len(all) != 1 || all[0].Requests != 3 {
		t.Fatalf("the deployment's usage %+v (%v), want the key's 3 requests", all, err)
	}
	keys, err := q.UsageTotalsByKey(ctx, sqldb, dbsqlc.UsageTotalsByKeyParams{DeploymentID: "d1", FromHour: from, ToHour: to})
	if err != nil || len(keys) != 1 || keys[0].KeyID != "k1" || keys[0].Requests != 3 {
		t.Fatalf("key totals %+v (%v), want k1 with 3 requests", keys, err)
	}
	copies, err := q.UsageCopiesByDeployment(ctx, sqldb, dbsqlc.UsageCopiesByDeploymentParams{DeploymentID: "d1", FromHour: from, ToHour: to})
	if err != nil || len(copies) != 1 || copies[0].Requests != 3 || copies[0].PromptTokens != 15 {
		t.Fatalf("copies %+v (%v), want 3 of 15 prompt tokens", copies, err)
	}

	// minScore 0 takes the unscored runs and those scored 0 or 1, not those scored -1.
	for id, score := range map[string]int{"run_p0": -1, "run_p1": 1} {
		if _, err := sqldb.Exec(storetest.Rebind(sqldb, `UPDATE runs SET feedback_score = ? WHERE id = ?`), score, id); err != nil {
			t.Fatal(err)
		}
	}
	page, err := q.RunExportPage(ctx, sqldb, dbsqlc.RunExportPageParams{DeploymentID: "d1", Since: 0, Until: to, Now: sql.NullInt64{Int64: to, Valid: true},
		CursorAt: -1, HasMinScore: 1, MinScore: 0, Lim: 10})
	var got []string
	for _, r := range page {
		got = append(got, r.ID)
	}
	if err != nil || strings.Join(got, " ") != "run_p1 run_p2" {
		t.Fatalf("minScore 0 read %v (%v), want run_p1 run_p2", got, err)
	}
}
