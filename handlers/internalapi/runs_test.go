package internalapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// decoded is what a decoder made of a batch body: its id, key uses and runs, or its error.
type decoded struct {
	ID      string
	Touches map[string]time.Time
	Runs    []runs.Shipped
	Err     string
}

func decodeWith(decode func(*runs.Batch) func(func(runs.Shipped, error) bool)) decoded {
	b := &runs.Batch{Touches: map[string]time.Time{}}
	var d decoded
	for run, err := range decode(b) {
		if err != nil {
			d.Err = err.Error()
			break
		}
		d.Runs = append(d.Runs, run)
	}
	d.ID, d.Touches = b.ID, b.Touches
	return d
}

// edgeBatch is a batch as an edge packs it (edgesync's pack: AppendJSON per run, json.Marshal of the
// touches).
func edgeBatch(t testing.TB, id string, rs []edgewire.Run, touches []edgewire.Touch) []byte {
	b := []byte(`{"batchId":"` + id + `","runs":[`)
	for i := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = rs[i].AppendJSON(b); err != nil {
			t.Fatal(err)
		}
	}
	tj, _ := json.Marshal(touches)
	return append(append(append(b, `],"touches":`...), tj...), '}')
}

func sampleBatch(t testing.TB) []byte {
	at := time.Date(2026, 11, 26, 18, 0, 0, 5, time.UTC)
	exp := at.Add(time.Hour)
	return edgeBatch(t, "batch_1", []edgewire.Run{
		{ID: "run_1", DeploymentID: "dep_1", KeyID: "key_1", Model: "m", Status: "ok", StatusCode: 200, LatencyMs: 3, PromptTokens: 12,
			CompletionTokens: 16, CreatedAt: at, ExpiresAt: &exp, Request: `{"messages":[{"role":"user","content":"a \"b\" <c>\n\u00e9"}]}`,
			Response: `{"choices":[]}`, RequestID: "req_1", TraceID: strings.Repeat("0f", 16)},
		{ID: "run_2", DeploymentID: "dep_1", Model: "m", Status: "error", StatusCode: 400, ErrorCode: "invalid_request", CreatedAt: at,
			Request: "not json \xff", UsageOnly: true},
	}, []edgewire.Touch{{KeyID: "key_1", UsedAt: at}, {KeyID: "key_1", UsedAt: at.Add(-time.Second)}})
}

// An edge's batch is read in one pass, to what encoding/json reads of it: were it left to
// encoding/json, the control plane would spend three times the CPU on it (BenchmarkIngest).
func TestEdgeBatchesAreReadInOnePass(t *testing.T) {
	data := sampleBatch(t)
	b := &runs.Batch{Touches: map[string]time.Time{}}
	if _, ok := decodeWhole(data, b); !ok {
		t.Fatalf("decodeWhole left an edge's batch to encoding/json: %s", data)
	}
	whole := decodeWith(func(b *runs.Batch) func(func(runs.Shipped, error) bool) { return decodeBatch(bytes.NewReader(data), b) })
	stream := decodeWith(func(b *runs.Batch) func(func(runs.Shipped, error) bool) {
		return decodeStream(bytes.NewReader(data), b)
	})
	if whole.Err != "" || len(whole.Runs) != 2 || !reflect.DeepEqual(whole, stream) {
		t.Fatalf("one pass read\n%+v\nencoding/json\n%+v", whole, stream)
	}
	if whole.Runs[0].ExpiresAt.IsZero() || string(whole.Runs[1].Request) != "not json \ufffd" || !whole.Runs[1].UsageOnly {
		t.Fatalf("runs read: %+v", whole.Runs)
	}
}

// A body over wholeBatchBytes, and a read that fails past the start, go to encoding/json.
func TestLargeOrBrokenBodiesAreStreamed(t *testing.T) {
	data := sampleBatch(t)
	padded := append([]byte(`{"pad":"`+strings.Repeat("x", wholeBatchBytes)+`",`), data[1:]...)
	got := decodeWith(func(b *runs.Batch) func(func(runs.Shipped, error) bool) {
		return decodeBatch(bytes.NewReader(padded), b)
	})
	if got.Err != "" || got.ID != "batch_1" || len(got.Runs) != 2 {
		t.Fatalf("a batch over %d bytes: %+v", wholeBatchBytes, got)
	}
	broken := errors.New("the wire broke")
	src := &failingReader{data: data[:len(data)/2], err: broken}
	got = decodeWith(func(b *runs.Batch) func(func(runs.Shipped, error) bool) { return decodeBatch(src, b) })
	if !strings.Contains(got.Err, "the wire broke") {
		t.Fatalf("a read that failed: %+v", got)
	}
}

type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// FuzzDecodeBatch holds the one-pass reading to encoding/json's: on any body it reads, it reads the
// same id, key uses and runs, and encoding/json finds nothing wrong.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(sampleBatch(f))
	f.Add([]byte(`{"batchId":"b","runs":null,"touches":[]}`))
	f.Add([]byte(`{"runs":[{"id":"r","deploymentId":"d","status":"ok","createdAt":"2026-01-01T00:00:00Z","latencyMs":-0}],"batchId":"b\u0041"} `))
	f.Add([]byte(`{"batchId":"b","runs":[{"id":"r","deploymentId":"d","status":"ok","createdAt":"2026-01-01T00:00:00Z","ID":"x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &runs.Batch{Touches: map[string]time.Time{}}
		rs, ok := decodeWhole(data, b)
		if !ok {
			return // encoding/json reads it
		}
		whole := decoded{ID: b.ID, Touches: b.Touches, Runs: rs}
		stream := decodeWith(func(b *runs.Batch) func(func(runs.Shipped, error) bool) {
			return decodeStream(bytes.NewReader(data), b)
		})
		if !reflect.DeepEqual(whole, stream) {
			t.Fatalf("%s\none pass read\n%+v\nencoding/json\n%+v", data, whole, stream)
		}
	})
}
