package edgewire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/jsonx"
)

// The transcripts a run carries, as an edge records them: JSON with quotes, escapes, HTML characters,
// non-ASCII text, U+2028, and (a request refused for it) invalid UTF-8.
const (
	chatRequest  = `{"model":"m","messages":[{"role":"user","content":"Say \"hi\" <b>&</b>\n caf\u00e9 \u2028 \ud83d\ude00"}],"max_tokens":64}`
	chatResponse = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"fox fox\tfox"},"finish_reason":"stop"}]}`
)

func sampleRuns() []Run {
	at := time.Date(2026, 11, 26, 17, 30, 1, 123456789, time.UTC)
	exp := at.Add(7 * 24 * time.Hour).In(time.FixedZone("", 5*3600+30*60))
	return []Run{
		{ID: "run_1", DeploymentID: "dep_1", KeyID: "key_1", Model: "llama", Status: "ok", StatusCode: 200, LatencyMs: 12,
			PromptTokens: 9, CompletionTokens: 16, CreatedAt: at, ExpiresAt: &exp, Request: chatRequest, Response: chatResponse,
			RequestID: "req_1", UpstreamRequestID: "up-1", TraceID: strings.Repeat("ab", 16)},
		// Retention none: no transcripts, and every omitempty member left out.
		{ID: "run_2", DeploymentID: "dep_1", Model: "llama", Status: "error", CreatedAt: at.Truncate(time.Second), UsageOnly: true},
		{ID: "run_3", DeploymentID: "dep_\u00e9", Model: "m<1>", Status: "error", StatusCode: 400, ErrorCode: "invalid_request_error",
			LatencyMs: -1, PromptTokens: -5, CreatedAt: at.In(time.FixedZone("", -8*3600)), Request: "{\"bad\xff\x00\x1f\b\f\r", Response: ""},
	}
}

func TestRunAppendJSONWritesAsMarshal(t *testing.T) {
	for i, r := range sampleRuns() {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.AppendJSON([]byte("x"))
		if err != nil || string(got) != "x"+string(want) {
			t.Fatalf("run %d:\n got %s (%v)\nwant %s", i, got, err, want)
		}
	}
	// A time json.Marshal refuses is refused too.
	r := sampleRuns()[1]
	r.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := json.Marshal(&r); err == nil {
		t.Fatal("json.Marshal took the year 10000")
	}
	if b, err := r.AppendJSON([]byte("x")); err == nil {
		t.Fatalf("AppendJSON wrote %s for the year 10000", b)
	}
}

// readRun reads one run with ReadJSON, checking that the cursor stops right after it.
func readRun(data []byte) (Run, bool) {
	var r Run
	c := jsonx.NewCursor(append(data, `,"after"`...))
	if !r.ReadJSON(c) {
		return Run{}, false
	}
	return r, c.Kind() == ','
}

func TestRunReadJSONReadsAsUnmarshal(t *testing.T) {
	for i, r := range sampleRuns() {
		data, _ := json.Marshal(&r)
		var want Run
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := readRun(data)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: ReadJSON(%s) = %+v, %v\nwant %+v", i, data, got, ok, want)
		}
	}
	// What an edge never writes is left to encoding/json: it may decode it (a name in other case, an
	// unknown member, a float) or refuse it (a string where a number goes); ReadJSON reads neither.
	for _, data := range []string{
		`{"ID":"run_1","deploymentId":"d","status":"ok","createdAt":"2026-11-26T00:00:00Z"}`,
		`{"id":"run_1","newField":1}`,
		`{"id":"run_1","latencyMs":1.5}`,
		`{"id":"run_1","latencyMs":"1"}`,
		`{"id":"run_1","usageOnly":1}`,
		`{"id":"run_1","createdAt":"yesterday"}`,
		`{"id":"run_1","request":"bad \xff"}`,
		`{"id":"run_1",}`,
		`["run_1"]`,
	} {
		if r, ok := readRun([]byte(data)); ok {
			t.Errorf("ReadJSON(%s) read %+v; it should leave it to encoding/json", data, r)
		}
	}
	// A member written twice keeps its last value; null leaves a member as it was, as encoding/json does.
	for _, data := range []string{`{"usageOnly":true,"usageOnly":false,"latencyMs":5,"latencyMs":-0}`, `{"usageOnly":true,"usageOnly":null}`} {
		var want Run
		json.Unmarshal([]byte(data), &want)
		if got, ok := readRun([]byte(data)); !ok || got != want {
			t.Fatalf("ReadJSON(%s) = %+v, %v; want %+v", data, got, ok, want)
		}
	}
	got, ok := readRun([]byte(`{"id":"run_1","id":null,"latencyMs":null,"expiresAt":"2026-11-26T00:00:00Z","expiresAt":null,"usageOnly":null}`))
	if !ok || got.ID != "run_1" || got.ExpiresAt != nil {
		t.Fatalf("nulls: %+v, %v", got, ok)
	}
}

// FuzzRunJSON holds both directions to encoding/json: AppendJSON writes any run as json.Marshal does,
// ReadJSON reads it back as json.Unmarshal does; and on any bytes, what ReadJSON reads is what
// json.Unmarshal reads.
func FuzzRunJSON(f *testing.F) {
	for _, r := range sampleRuns() {
		f.Add(r.ID, r.Status, r.Request, r.Response, r.StatusCode, r.LatencyMs, r.CreatedAt.UnixNano(), 3600, r.UsageOnly, []byte(nil))
	}
	f.Add("", "", "", "", 0, int64(0), int64(0), 0, false, []byte(`{"id":"a\u0041","latencyMs":-0,"createdAt":"2026-01-01T00:00:00.5+01:00","expiresAt":null}`))
	f.Add("", "", "", "", 0, int64(0), int64(0), 0, false, []byte(`{"usageOnly":true,"usageOnly":false,"statusCode":null,"keyId":"k","traceId":""}`))
	f.Fuzz(func(t *testing.T, id, status, request, response string, code int, latency, nanos int64, offset int, usageOnly bool, data []byte) {
		at := time.Unix(0, nanos).In(time.FixedZone("", offset%(24*3600)))
		r := Run{ID: id, DeploymentID: id + "d", Model: status, Status: status, StatusCode: code, LatencyMs: latency, CreatedAt: at,
			ExpiresAt: &at, Request: request, Response: response, ErrorCode: response, UsageOnly: usageOnly}
		want, wantErr := json.Marshal(&r)
		got, err := r.AppendJSON(nil)
		if (err != nil) != (wantErr != nil) || err == nil && string(got) != string(want) {
			t.Fatalf("AppendJSON(%+v) = %s, %v; json.Marshal: %s, %v", r, got, err, want, wantErr)
		}
		if wantErr == nil {
			var back Run
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatal(err)
			}
			read, ok := readRun(want)
			if !ok || !reflect.DeepEqual(read, back) {
				t.Fatalf("ReadJSON(%s) = %+v, %v; json.Unmarshal: %+v", want, read, ok, back)
			}
		}
		read, ok := readRun(data)
		if !ok {
			return // left to encoding/json
		}
		var back Run
		if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(read, back) {
			t.Fatalf("ReadJSON(%s) = %+v; json.Unmarshal: %+v, %v", data, read, back, err)
		}
	})
}
