package internalapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// BenchmarkIngest measures what the control plane spends on a run an svc edge ships: its share of a
// gzipped 500-run batch, taken off the wire, decoded and written (make bench's "edge process" row
// pays it on the control plane's CPU, outside the edge's), with make bench's streamed answer as the
// transcript.
func BenchmarkIngest(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	d, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "ingest", Target: cloudapi.Target{Kind: "multi_model"},
		RunRetentionMode: cloudapi.RetentionDays, RunRetentionDays: 7})
	if err != nil {
		b.Fatal(err)
	}
	key, err := e.sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		b.Fatal(err)
	}
	req := `{"model":"bench-llama","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	resp := `{"id":"chatcmpl-8f3a2c1e9b7d4f60","object":"chat.completion","created":1764000000,"model":"mock-model","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("fox ", 16) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	const perBatch = 500
	for _, form := range []string{"lines", "v1"} {
		b.Run(form, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				now := time.Now().UTC()
				batch := edgewire.RunBatchV1{BatchID: fmt.Sprintf("batch_bench_%s_%d_%d", form, b.N, i)}
				data := headerLine(batch.BatchID)
				for j := 0; j < perBatch; j++ {
					r := runs.Run{ID: fmt.Sprintf("run_bench_%s_%d_%d_%d", form, b.N, i, j), DeploymentID: d.ID, KeyID: key.Key.ID, Model: "m",
						Status: "ok", StatusCode: 200, Latency: 3 * time.Millisecond, PromptTokens: 12, CompletionTokens: 16, CreatedAt: now,
						Request: []byte(req), Response: []byte(resp), RequestID: fmt.Sprintf("req_%d_%d", i, j)}
					data, _ = runs.AppendLine(data, &r)
					batch.Runs = append(batch.Runs, edgewire.V1Of(r))
				}
				contentType := edgewire.ContentTypeRuns
				if form == "v1" {
					data, _ = json.Marshal(batch)
					contentType = "application/json"
				}
				var buf bytes.Buffer
				zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
				zw.Write(data)
				zw.Close()
				b.StartTimer()
				r, body := e.do("POST", edgewire.RunsPath, e.token, buf.Bytes(), map[string]string{"Content-Type": contentType, "Content-Encoding": "gzip"})
				if r.StatusCode != 200 {
					b.Fatalf("POST runs: %d %s", r.StatusCode, body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBatch), "ns/run")
		})
	}
}

// headerLine opens a batch in lines.
func headerLine(id string) []byte {
	h, _ := json.Marshal(edgewire.BatchHeader{Batch: id})
	return append(h, '\n')
}
