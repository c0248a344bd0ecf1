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

func decodeWith(src []byte, contentType string) decoded {
	b := &runs.Batch{Touches: map[string]time.Time{}}
	var d decoded
	for run, err := range decodeBatch(bytes.NewReader(src), contentType, b) {
		if err != nil {
			d.Err = err.Error()
			break
		}
		d.Runs = append(d.Runs, run)
	}
	d.ID, d.Touches = b.ID, b.Touches
	return d
}

// linesBatch is a batch in lines, as an edge packs it.
func linesBatch(t testing.TB, id string, rs []runs.Run, touches []edgewire.Touch) []byte {
	h, _ := json.Marshal(edgewire.BatchHeader{Batch: id, Touches: touches})
	b := append(h, '\n')
	for i := range rs {
		var err error
		if b, err = runs.AppendLine(b, &rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func sampleRuns() ([]runs.Run, []edgewire.Touch) {
	at := time.Date(2026, 11, 26, 18, 0, 0, 5, time.UTC)
	return []runs.Run{
		{ID: "run_1", DeploymentID: "dep_1", KeyID: "key_1", Model: "m", Status: "ok", StatusCode: 200, Latency: 3 * time.Millisecond, PromptTokens: 12,
			CompletionTokens: 16, CreatedAt: at, ExpiresAt: at.Add(time.Hour), Request: []byte(`{"messages":[{"role":"user","content":"a \"b\" <c>\u00e9"}]}`),
			Response: []byte(`{"choices":[]}`), RequestID: "req_1", TraceID: strings.Repeat("0f", 16)},
		{ID: "run_2", DeploymentID: "dep_1", Model: "m", Status: "error", StatusCode: 400, ErrorCode: "invalid_request", CreatedAt: at,
			Request: []byte("not json \xff\x00"), Response: []byte("{\n  \"pretty\": true\n}")},
	}, []edgewire.Touch{{KeyID: "key_1", UsedAt: at}, {KeyID: "key_1", UsedAt: at.Add(-time.Second)}}
}

// A batch in lines reads back as the runs the edge packed, transcripts byte for byte (raw JSON, a
// pretty-printed body, invalid UTF-8 and a NUL byte alike), and the latest use of each key.
func TestBatchInLinesReadsBackAsPacked(t *testing.T) {
	rs, touches := sampleRuns()
	got := decodeWith(linesBatch(t, "batch_1", rs, touches), edgewire.ContentTypeRuns+"; charset=utf-8")
	if got.Err != "" || got.ID != "batch_1" || len(got.Runs) != 2 {
		t.Fatalf("read %+v", got)
	}
	for i, r := range got.Runs {
		if r.ID != rs[i].ID || !reflect.DeepEqual(r.Run, rs[i]) {
			t.Fatalf("run %d read as\n%+v\nwant\n%+v", i, r.Run, rs[i])
		}
	}
	if want := touches[0].UsedAt; !got.Touches["key_1"].Equal(want) || len(got.Touches) != 1 {
		t.Fatalf("touches %v, want key_1 at %v", got.Touches, want)
	}
}

// A batch of the first form (an edge of the previous release) is still read, as it was.
func TestFirstFormBatchesAreStillRead(t *testing.T) {
	rs, touches := sampleRuns()
	v1 := edgewire.RunBatchV1{BatchID: "batch_v1", Touches: touches}
	for _, r := range rs {
		v1.Runs = append(v1.Runs, edgewire.V1Of(r))
	}
	data, _ := json.Marshal(v1)
	got := decodeWith(data, "application/json")
	if got.Err != "" || got.ID != "batch_v1" || len(got.Runs) != 2 || string(got.Runs[0].Request) != string(rs[0].Request) ||
		got.Runs[0].Latency != 3*time.Millisecond || !got.Runs[0].ExpiresAt.Equal(rs[0].ExpiresAt) {
		t.Fatalf("read %+v", got)
	}
}

// Malformed batches in lines are refused whole, saying what is wrong and where.
func TestMalformedBatchesInLinesAreRefused(t *testing.T) {
	rs, _ := sampleRuns()
	good := linesBatch(t, "b", rs, nil)
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "", "the body is empty"},
		{"no header", `{"id":"run_1"}` + "\n", "batch (the batch id) is required"},
		{"header not JSON", "{\n", "line 1 is not a batch header"},
		{"run not JSON", `{"batch":"b"}` + "\n{\"id\":\n", "line 2 is not a run"},
		{"run without id", `{"batch":"b"}` + "\n" + `{"deploymentId":"d","status":"ok","createdAt":"2026-01-01T00:00:00Z"}` + "\n", "runs[0].id is required"},
		{"bad status", strings.Replace(string(good), `"status":"ok"`, `"status":"fine"`, 1), `runs[0].status must be "ok" or "error"`},
		{"bad transcript", `{"batch":"b"}` + "\n" + `{"id":"r","deploymentId":"d","status":"ok","createdAt":"2026-01-01T00:00:00Z","request":12}` + "\n", "a transcript is a JSON object, array or string"},
		{"touch without key", `{"batch":"b","touches":[{"usedAt":"2026-01-01T00:00:00Z"}]}` + "\n", "touches[0] needs keyId and usedAt"},
	} {
		got := decodeWith([]byte(tc.body), edgewire.ContentTypeRuns)
		if !strings.Contains(got.Err, tc.want) {
			t.Errorf("%s: error %q, want it to say %q", tc.name, got.Err, tc.want)
		}
	}
}

// A run line past edgewire.MaxRunBytes is refused with the run cap's error, without holding it
// whole; a read that fails mid-body fails the batch.
func TestLongLinesAndBrokenReads(t *testing.T) {
	long := `{"batch":"b"}` + "\n" + `{"id":"r","request":"` + strings.Repeat("x", edgewire.MaxRunBytes) + `"}` + "\n"
	if got := decodeWith([]byte(long), edgewire.ContentTypeRuns); got.Err != errRunTooLarge.Error() {
		t.Fatalf("a line over the cap: %q", got.Err)
	}
	rs, _ := sampleRuns()
	data := linesBatch(t, "b", rs, nil)
	broken := errors.New("the wire broke")
	b := &runs.Batch{Touches: map[string]time.Time{}}
	var err error
	for _, e := range decodeBatch(&failingReader{data: data[:len(data)-10], err: broken}, edgewire.ContentTypeRuns, b) {
		if e != nil {
			err = e
		}
	}
	if err == nil || !strings.Contains(err.Error(), "the wire broke") {
		t.Fatalf("a read that failed: %v", err)
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
