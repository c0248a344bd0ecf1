package recorder

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/runs"
)

// benchRun is a run of the size the edge records for a short chat: a 1 KiB request, a 600-byte answer.
func benchRun(i int) runs.Run {
	at := time.UnixMilli(1_700_000_000_000 + int64(i))
	return runs.Run{ID: runs.NewID(at), DeploymentID: "d1", KeyID: "k1", Model: "mock-large", Status: "ok",
		Latency: 12 * time.Millisecond, PromptTokens: 20, CompletionTokens: 40, CreatedAt: at,
		Request:   []byte(`{"model":"mock-large","messages":[{"role":"user","content":"` + strings.Repeat("x", 960) + `"}]}`),
		Response:  []byte(`{"id":"chatcmpl-1","choices":[{"message":{"role":"assistant","content":"` + strings.Repeat("y", 540) + `"}}]}`),
		RequestID: "req-" + fmt.Sprint(i), StatusCode: 200}
}

// BenchmarkRecord measures the recorder's writer on the pass's engine: runs are queued a buffer at a
// time and flushed, so runs/s is what one replica stores at most (its edge's own runs).
func BenchmarkRecord(b *testing.B) {
	sqldb := fixture(b)
	rec := New(sqldb, Options{BufferSize: 8192})
	defer rec.Close()
	start := time.Now()
	queued := 0
	for i := 0; b.Loop(); i++ {
		if !rec.Record(benchRun(i)) {
			b.Fatal("dropped")
		}
		if queued++; queued == 8192 {
			rec.Flush()
			queued = 0
		}
	}
	rec.Flush()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
}

// BenchmarkIngest measures batches of 1,000 runs shipped by edges (Recorder.Ingest) on the pass's
// engine.
func BenchmarkIngest(b *testing.B) {
	sqldb := fixture(b)
	rec := New(sqldb, Options{})
	defer rec.Close()
	const perBatch = 1000
	batch := make([]runs.Shipped, perBatch)
	start := time.Now()
	n := 0
	for i := 0; b.Loop(); i++ {
		for k := range batch {
			r := benchRun(n)
			batch[k] = runs.Shipped{ID: r.ID, Run: r}
			n++
		}
		res, err := rec.Ingest(context.Background(), &runs.Batch{ID: fmt.Sprint("b", i), Runs: runs.RunsOf(batch)}, time.Now())
		if err != nil || res.Inserted != perBatch {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "runs/s")
}

// BenchmarkSpool measures how fast the recorder keeps runs while the store is away: every batch goes
// to the spool (JSON, appended, synced once per batch of 256), so runs/s is what one replica can absorb
// during an outage before its in-memory buffer overflows.
func BenchmarkSpool(b *testing.B) {
	sqldb := fixture(b)
	if _, err := sqldb.Exec(`ALTER TABLE usage_hourly RENAME TO usage_hourly_away`); err != nil {
		b.Fatal(err)
	}
	if _, err := sqldb.Exec(`ALTER TABLE edge_batches RENAME TO edge_batches_away`); err != nil {
		b.Fatal(err)
	}
	rec, err := Open(sqldb, Options{BufferSize: 8192, SpoolDir: b.TempDir(), SpoolRetry: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	start := time.Now()
	queued := 0
	for i := 0; b.Loop(); i++ {
		if !rec.Record(benchRun(i)) {
			b.Fatal("dropped")
		}
		if queued++; queued == 8192 {
			rec.Flush()
			queued = 0
		}
	}
	rec.Flush()
	if rec.Dropped() > 0 {
		b.Fatalf("dropped %d", rec.Dropped())
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
}
