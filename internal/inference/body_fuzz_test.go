package inference

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/jsonx/jsonxtest"
	"github.com/svcdev/svc/internal/strictjson"
)

// RewriteModel, EncodeObject and the upstream stream reader run on every upstream answer and streamed
// chunk, so their fuzz targets hold them to encoding/json on valid input and to "never panics, always
// ends" on any input (the scanners under them, internal/jsonx, have their own). Seed corpora live in
// testdata/fuzz/<FuzzName>/; run one with
// go test -run '^$' -fuzz '^FuzzUpstreamStream$' -fuzztime 30s ./internal/inference/

func FuzzRewriteModel(f *testing.F) {
	f.Add([]byte(`{"id":"x","model":"up","choices":[{"model":"inner"}]}`), "served")
	f.Fuzz(func(t *testing.T, data []byte, model string) {
		enc, _ := json.Marshal(model)
		out := RewriteModel(data, enc)
		in, ok := jsonxtest.TopLevel(data)
		if !ok || !utf8.ValidString(model) { // served names are valid UTF-8; json.Marshal would replace bytes
			return
		}
		if raw := in["model"]; len(raw) == 0 || raw[0] != '"' {
			// No top-level string "model": nothing to rewrite.
			if !bytes.Equal(out, data) {
				t.Fatalf("RewriteModel(%s) changed an object without a string model: %s", data, out)
			}
			return
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("RewriteModel(%s) = %s: invalid JSON: %v", data, out, err)
		}
		var named string
		if json.Unmarshal(got["model"], &named); named != model {
			t.Fatalf("RewriteModel(%s) = %s: model %q, want %q", data, out, named, model)
		}
		if len(got) != len(in) {
			t.Fatalf("RewriteModel(%s) = %s: %d fields, want %d", data, out, len(got), len(in))
		}
		for k, v := range in {
			if k != "model" && !jsonxtest.Same(got[k], v) {
				t.Fatalf("RewriteModel(%s) = %s: field %q changed", data, out, k)
			}
		}
	})
}

func FuzzEncodeObject(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"\u00e9":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fields map[string]json.RawMessage
		if !utf8.Valid(data) || json.Unmarshal(data, &fields) != nil || fields == nil {
			return
		}
		out := EncodeObject(fields)
		var back map[string]json.RawMessage
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("EncodeObject(%s) = %s: invalid JSON: %v", data, out, err)
		}
		if len(back) != len(fields) {
			t.Fatalf("EncodeObject(%s) = %s: %d fields, want %d", data, out, len(back), len(fields))
		}
		for k, v := range fields {
			if !jsonxtest.Same(back[k], v) {
				t.Fatalf("EncodeObject(%s) = %s: field %q is %s, want %s", data, out, k, back[k], v)
			}
		}
	})
}

// FuzzUpstreamStream feeds any bytes to the reader of upstream streams: it must end without panicking, and every chunk it yields for an event
// that is a valid object with a string model must be valid JSON naming the served model.
func FuzzUpstreamStream(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"c\",\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := streamOf(body, "served")
		for i := 0; ; i++ {
			if i > len(body)+1 {
				t.Fatalf("more chunks than bytes: the reader does not advance")
			}
			ch, err := s.Next()
			if err != nil {
				var e *Error
				if err != io.EOF && !errors.As(err, &e) {
					t.Fatalf("Next: %v, want io.EOF or an *Error", err)
				}
				if _, again := s.Next(); again != io.EOF {
					t.Fatalf("Next after the end: %v, want io.EOF", again)
				}
				return
			}
			m, ok := jsonxtest.TopLevel(ch.JSON)
			if !ok {
				continue // an invalid event is relayed as it came; duplicate keys are not held to encoding/json
			}
			// A string model is rewritten; anything else (null, a number) is relayed as it came.
			var model string
			if raw := m["model"]; len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &model) == nil && model != "served" {
				t.Fatalf("chunk %s names %q, want the served model", ch.JSON, model)
			}
		}
	})
}

// FuzzUsage holds readUsage to encoding/json on valid objects (exact names, no name written twice): the
// counts it reads, and whether it trusts the object at all (every count an integer or null).
func FuzzUsage(f *testing.F) {
	for _, s := range []string{`{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`,
		`{"prompt_tokens":3,"completion_tokens":null,"prompt_tokens_details":{"cached_tokens":1}}`,
		`{"prompt_tokens":1.5}`, `{"prompt_tokens":"3"}`, `{"total_tokens":1e3}`, `{}`, `[]`, `null`,
		`{"completion_tokens":-4}`, `{"prompt_tokens":99999999999999999999}`,
		`{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":"4"},"completion_tokens_details":{"reasoning_tokens":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := readUsage(jsonx.NewCursor(data), &openAIUsage)
		m, valid := jsonxtest.TopLevel(data)
		if !valid {
			return
		}
		var want Usage
		wantOK := true
		for name, count := range map[string]*int{"prompt_tokens": &want.PromptTokens,
			"completion_tokens": &want.CompletionTokens, "total_tokens": &want.TotalTokens} {
			raw, present := m[name]
			if !present || string(raw) == "null" {
				continue
			}
			if raw[0] == '"' || json.Unmarshal(raw, count) != nil {
				wantOK = false
			}
		}
		// The details' counts: a whole number of 0 or more, else 0 (an odd detail does not untrust the rest).
		for name, det := range map[string]struct {
			field string
			count *int
		}{"prompt_tokens_details": {"cached_tokens", &want.CachedTokens}, "completion_tokens_details": {"reasoning_tokens", &want.ReasoningTokens}} {
			var d map[string]json.RawMessage
			if json.Unmarshal(m[name], &d) != nil {
				continue
			}
			var n int
			if raw := d[det.field]; len(raw) > 0 && raw[0] != '"' && json.Unmarshal(raw, &n) == nil && n >= 0 {
				*det.count = n
			}
		}
		if ok != wantOK || ok && got != want {
			t.Fatalf("readUsage(%s) = %+v, %v; encoding/json: %+v, %v", data, got, ok, want, wantOK)
		}
	})
}

// FuzzWithUsage holds WithUsage to what chatBody did before it spliced: stream_options decoded into a
// map, include_usage set to true, encoded again. Same members, same values; only the order may
// differ.
func FuzzWithUsage(f *testing.F) {
	for _, s := range []string{`{"include_usage":false}`, `{}`, ` { } `, `null`, `{"a":1}`, `{"a":[1,{"include_usage":false}],"include_usage":null}`,
		`{"include_usage":true,"x":"y"}`, `{"Include_Usage":false}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var opts map[string]json.RawMessage
		if !utf8.Valid(data) || json.Unmarshal(data, &opts) != nil || strictjson.Duplicate(data) != nil {
			return // the edge refuses such stream_options before a call is made
		}
		if opts == nil {
			opts = map[string]json.RawMessage{}
		}
		opts["include_usage"] = json.RawMessage("true")
		out := WithUsage(data)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("WithUsage(%s) = %s: invalid JSON: %v", data, out, err)
		}
		if len(got) != len(opts) {
			t.Fatalf("WithUsage(%s) = %s: %d members, want %d", data, out, len(got), len(opts))
		}
		for k, v := range opts {
			if !jsonxtest.Same(got[k], v) {
				t.Fatalf("WithUsage(%s) = %s: %q is %s, want %s", data, out, k, got[k], v)
			}
		}
	})
}
