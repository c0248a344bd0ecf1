package edgesync

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/svcdev/svc/internal/runs"
)

// BenchmarkShipBatch measures what the edge spends on a run between the request and the wire: its
// share of a 500-run batch's JSON (pack) and of the batch's gzip (PostRunBatch's compressor), with
// make bench's streamed answer as the transcript.
func BenchmarkShipBatch(b *testing.B) {
	req := `{"model":"bench-llama","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	resp := `{"id":"chatcmpl-8f3a2c1e9b7d4f60","object":"chat.completion","created":1764000000,"model":"mock-model","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("fox ", 16) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	now := time.Now()
	batch := make([]runs.Run, 500)
	for i := range batch {
		batch[i] = runs.Run{ID: "run_01JBENCH" + strings.Repeat("0", 10), DeploymentID: "dep_bench", KeyID: "key_bench", Model: "bench-llama",
			Status: "ok", StatusCode: 200, Latency: 3 * time.Millisecond, PromptTokens: 12, CompletionTokens: 16, CreatedAt: now, Request: []byte(req), Response: []byte(resp),
			RequestID: "req_0123456789abcdef"}
	}
	s := &Shipper{o: ShipperOptions{BatchRuns: 500, BatchBytes: DefaultBatchBytes}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b.Run("pack", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.pack(batch, nil)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/run")
	})
	body := s.pack(batch, nil)[0].body
	b.Logf("a batch of %d runs: %d bytes", len(batch), len(body))
	b.Run("gzip", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for i := 0; i < b.N; i++ {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
			zw.Write(body)
			zw.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/run")
	})
}
