package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A run's line reads back as the same run, its transcripts byte for byte whatever they hold: JSON
// carried raw (HTML characters and escapes untouched), pretty-printed JSON, text, invalid UTF-8, NUL
// bytes, a body that starts with the base64 marker.
func TestLineRoundTrips(t *testing.T) {
	at := time.Date(2026, 11, 27, 1, 0, 0, 123456789, time.UTC)
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"<b>&amp; \"q\" \u00e9 \n"}]}`,
		`[1,2,3]`,
		"{\n  \"pretty\": true\n}",
		`{"a": 1}`,
		` {"lead":"space"}`,
		`"a JSON string"`,
		"data: {\"x\":1}\n\ndata: [DONE]\n\n",
		"not json \xff\xfe",
		"nul \x00 byte",
		"\uFFFEsvc-base64:AAAA",
		`{"unterminated":`,
		"",
	} {
		r := Run{ID: "run_1", DeploymentID: "dep", KeyID: "key", Model: "m", Status: "ok", StatusCode: 200, Latency: 1500 * time.Microsecond,
			PromptTokens: 3, CompletionTokens: 4, CreatedAt: at, ExpiresAt: at.Add(time.Hour), Request: Transcript(body), Response: Transcript(body),
			RequestID: "req", TraceID: strings.Repeat("ab", 16), Replica: "10.0.0.2:8000", RetriedFrom: "10.0.0.1:8000", CachedTokens: 2}
		if body == "" {
			r.Request, r.Response = nil, nil
		}
		line, err := AppendLine(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("%q: not one line: %q", body, line)
		}
		got, err := DecodeRun(line[:len(line)-1])
		if err != nil {
			t.Fatalf("%q: %v (line %s)", body, err, line)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%q read back as\n%+v\nwant\n%+v", body, got, r)
		}
	}
}

// JSON bodies travel as themselves, not as escaped strings: the line is about the size of the body.
func TestJSONTranscriptsAreCarriedRaw(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"say \"hi\" <now>"}]}`
	line, _ := AppendLine(nil, &Run{ID: "r", Request: Transcript(body)})
	if !bytes.Contains(line, []byte(`"request":`+body)) {
		t.Fatalf("the request was not carried raw: %s", line)
	}
}

// Lines yields each line without its newline, skips blank lines, reads a last line without a newline,
// and refuses a line past its cap whatever the reader's buffer.
func TestLines(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // past the 64 KiB buffer
	in := "a\r\n\n  \nb\n" + long + "\nlast"
	l := NewLines(strings.NewReader(in), 200<<10)
	var got []string
	for {
		line, err := l.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	if !reflect.DeepEqual(got, []string{"a", "b", long, "last"}) {
		t.Fatalf("lines: %.40q", got)
	}
	for _, max := range []int{10, 80 << 10} {
		l = NewLines(strings.NewReader("short\n"+long+"\n"), max)
		if _, err := l.Next(); err != nil && max > 10 {
			t.Fatal(err)
		}
		if _, err := l.Next(); !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("a line of %d bytes with a cap of %d: %v", len(long), max, err)
		}
	}
}

// FuzzLine holds AppendLine and DecodeRun to each other: any transcripts and labels read back exactly.
func FuzzLine(f *testing.F) {
	f.Add([]byte(`{"a":"<b>"}`), []byte("x\x00\xff"), "m")
	f.Add([]byte("[\n]"), []byte(`"s"`), "\xff")
	f.Fuzz(func(t *testing.T, req, resp []byte, model string) {
		r := Run{ID: "run", DeploymentID: "d", Model: strings.ToValidUTF8(model, "?"), Status: "ok", CreatedAt: time.Unix(1, 0).UTC(),
			Request: req, Response: resp}
		if len(req) == 0 {
			r.Request = nil
		}
		if len(resp) == 0 {
			r.Response = nil
		}
		line, err := AppendLine(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(line, '\n') != len(line)-1 {
			t.Fatalf("not one line: %q", line)
		}
		got, err := DecodeRun(line)
		if err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("read back as\n%+v\nwant\n%+v\nline %q", got, r, line)
		}
	})
}

// FuzzDecodeRun holds DecodeRun to json.Unmarshal on any line: the same run when it reads one, an
// error when it does not.
func FuzzDecodeRun(f *testing.F) {
	at := time.Date(2026, 11, 27, 1, 0, 0, 5, time.UTC)
	r := Run{ID: "run_1", DeploymentID: "d", KeyID: "k", Model: "m", Status: "ok", StatusCode: 200, Latency: 3, PromptTokens: 1,
		CreatedAt: at, ExpiresAt: at, Request: []byte(`{"a":[1,{"b":"<"}]}`), Response: []byte("text \xff")}
	line, _ := AppendLine(nil, &r)
	f.Add(line)
	for _, s := range []string{`{}`, `null`, `[]`, `{"id":1}`, `{"request":5}`, `{"request":"x","Request":{"a":1}}`, `{"ID":"a","id":"b"}`,
		`{"id":"a","id":"b"}`, `{"request":null,"response":[1]}`, `{"createdAt":"yesterday"}`, `{"later":true,"id":"x"}`,
		`{"latencyNs":1.5}`, `{"usageOnly":true,"response":"\u0000"}`, `{"request":{"a":1}`, `{"request":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var want Run
		werr := json.Unmarshal(line, &want)
		got, err := DecodeRun(line)
		if (err == nil) != (werr == nil) {
			t.Fatalf("DecodeRun(%q) error %v, json.Unmarshal %v", line, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeRun(%q) =\n%+v\njson.Unmarshal\n%+v", line, got, want)
		}
	})
}

// BenchmarkDecodeRun reads the line of a short streamed chat's run, as an edge ships it; the
// encoding/json sub-benchmark is json.Unmarshal of the same line, what DecodeRun replaced.
func BenchmarkDecodeRun(b *testing.B) {
	req := `{"model":"bench-llama","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	resp := `{"id":"chatcmpl-8f3a2c1e9b7d4f60","object":"chat.completion","created":1764000000,"model":"mock-model","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("fox ", 16) + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	r := Run{ID: "run_01JDBENCH0000000000000000", DeploymentID: "dep_01JDBENCH00000000000000", KeyID: "key_01JDBENCH000000000000000", Model: "m",
		Status: "ok", StatusCode: 200, Latency: 3 * time.Millisecond, PromptTokens: 12, CompletionTokens: 16, CreatedAt: time.Now().UTC(),
		Request: []byte(req), Response: []byte(resp), RequestID: "req_0123456789abcdef"}
	line, _ := AppendLine(nil, &r)
	line = line[:len(line)-1]
	b.Run("DecodeRun", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			if _, err := DecodeRun(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		for b.Loop() {
			var r Run
			if err := json.Unmarshal(line, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
