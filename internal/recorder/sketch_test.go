package recorder

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/svcdev/svc/db/storetest"
	"github.com/svcdev/svc/internal/qsketch"
	"github.com/svcdev/svc/internal/runs"
)

// sketchOf reads the latency sketch of a usage row (nil when the row has none).
func sketchOf(t *testing.T, sqldb *sql.DB, query string, args ...any) *qsketch.Sketch {
	t.Helper()
	var blob []byte
	if err := sqldb.QueryRow(storetest.Rebind(sqldb, query), args...).Scan(&blob); err != nil {
		t.Fatal(err)
	}
	if blob == nil {
		return nil
	}
	s, err := qsketch.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The usage rows' sketches hold the latencies of the calls answered, merged across batches of both
// write paths (the recorder's own and an edge's shipped batch, Ingest) into the same row: refused and
// failed calls are counted but never sketched, and the arm rows are kept per canary.
func TestSketchesMergeAnsweredCallsAcrossBatches(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{FlushInterval: time.Hour})
	defer rec.Close()
	hour := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	run := func(i int, status string, code int, latency time.Duration, canary string) runs.Run {
		return runs.Run{DeploymentID: "d1", KeyID: "k1", Model: "m", Status: status, StatusCode: code, Latency: latency, TTFT: latency / 2,
			CreatedAt: hour.Add(time.Duration(i) * time.Second), Arm: "canary", ArmTarget: "m", CanaryID: canary, UsageOnly: true}
	}
	// Batch 1 (Record): 10 answered calls of 255 ms and 4 refused ones of 0 ms.
	for i := range 10 {
		rec.Record(run(i, "ok", 200, 255*time.Millisecond, "cny_a"))
	}
	for i := range 4 {
		rec.Record(run(i, "error", 401, 0, "cny_a"))
	}
	rec.Flush()
	// Batch 2 (Ingest): 11 answered calls of 365 ms under another canary, and a failed one of 30 s.
	var shipped []runs.Shipped
	for i := range 11 {
		shipped = append(shipped, runs.Shipped{ID: fmt.Sprint("s", i), Run: run(20+i, "ok", 200, 365*time.Millisecond, "cny_b")})
	}
	shipped = append(shipped, runs.Shipped{ID: "s-failed", Run: run(40, "error", 502, 30*time.Second, "cny_b")})
	if _, err := rec.Ingest(context.Background(), &runs.Batch{ID: "b1", Runs: runs.RunsOf(shipped)}, hour); err != nil {
		t.Fatal(err)
	}

	key := sketchOf(t, sqldb, `SELECT latency_sketch FROM usage_hourly WHERE deployment_id = 'd1' AND key_id = 'k1' AND hour = ?`, hour.UnixMilli())
	if key == nil || key.Count() != 21 {
		t.Fatalf("the key's row sketches %v calls, want the 21 answered", key)
	}
	// Ranks 0-9 are 255 ms, 10-20 are 365 ms: the median (rank 10) is 365, p25 is 255.
	for q, want := range map[float64]float64{0.25: 255, 0.5: 365, 1: 365} {
		if got, _ := key.Quantile(q); math.Abs(got-want)/want > qsketch.RelativeAccuracy {
			t.Errorf("the key's q%.2f = %.1f ms, want %.0f", q, got, want)
		}
	}
	for canary, want := range map[string]float64{"cny_a": 255, "cny_b": 365} {
		s := sketchOf(t, sqldb, `SELECT latency_sketch FROM usage_arm_hourly WHERE deployment_id = 'd1' AND canary_id = ? AND hour = ?`, canary, hour.UnixMilli())
		got, _ := s.Quantile(0.95)
		if math.Abs(got-want)/want > qsketch.RelativeAccuracy {
			t.Errorf("canary %s: p95 %.1f ms, want %.0f", canary, got, want)
		}
		ttft := sketchOf(t, sqldb, `SELECT ttft_sketch FROM usage_arm_hourly WHERE deployment_id = 'd1' AND canary_id = ? AND hour = ?`, canary, hour.UnixMilli())
		if got, _ := ttft.Quantile(0.5); math.Abs(got-want/2)/(want/2) > qsketch.RelativeAccuracy {
			t.Errorf("canary %s: TTFT p50 %.1f ms, want %.1f", canary, got, want/2)
		}
	}
}
