package inference

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/svcdev/svc/internal/jsonx"
)

// Request bodies as they go upstream, and the renaming of the model in answers as they come back.

// chatBody renders a chat request for the upstream: its model name, and usage always requested on
// streams so that runs are counted even when the client did not ask for usage. The members are the
// call's as the edge read them (or as a translation wrote them), written once: stream_options is not
// decoded again, include_usage is spliced into it (WithUsage).
func (o *openAI) chatBody(c *Call) []byte {
	model := jsonx.AppendString(nil, o.upstreamModel(c))
	if !c.Stream {
		return encodeWith(c.Body, "model", model, "", nil)
	}
	opts := WithUsage(c.Body["stream_options"])
	if c.PromptUsage && o.cfg.ContinuousUsage {
		// WithUsage's object opens with its first member or include_usage: continuous_usage_stats goes first.
		opts = append([]byte(`{"continuous_usage_stats":true,`), bytes.TrimPrefix(opts, []byte("{"))...)
	}
	return encodeWith(c.Body, "model", model, "stream_options", opts)
}

// WithUsage returns stream_options (a JSON object as the edge checked it, null or absent) asking the
// upstream for usage: include_usage set to true where it is written, or added first.
func WithUsage(opts []byte) []byte {
	c := jsonx.NewCursor(opts)
	if c.Kind() != '{' {
		return []byte(`{"include_usage":true}`)
	}
	s, e, n := -1, -1, 0
	c.Object(func(name []byte) {
		n++
		if s < 0 && string(name) == "include_usage" {
			s, e = c.Span()
		}
	})
	switch {
	case c.Bad():
		return []byte(`{"include_usage":true}`)
	case s >= 0 && string(opts[s:e]) == "true":
		return opts
	case s >= 0:
		return append(append(append(make([]byte, 0, len(opts)+4), opts[:s]...), "true"...), opts[e:]...)
	case n == 0:
		return []byte(`{"include_usage":true}`)
	}
	i := bytes.IndexByte(opts, '{') + 1
	return append(append(append(make([]byte, 0, len(opts)+22), opts[:i]...), `"include_usage":true,`...), opts[i:]...)
}

// encodeWith is EncodeObject of fields with the members k1 and k2 (each when not "") set to v1 and v2,
// without copying fields.
func encodeWith(fields map[string]json.RawMessage, k1 string, v1 []byte, k2 string, v2 []byte) []byte {
	keys := make([]string, 0, len(fields)+2)
	size := 2 + len(k1) + len(v1) + len(k2) + len(v2) + 8
	set := func(k string) bool { return k != "" && (k == k1 || k == k2) }
	for k, v := range fields {
		if !set(k) {
			keys = append(keys, k)
			size += len(k) + len(v) + 4
		}
	}
	for _, k := range []string{k1, k2} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonx.AppendString(out, k)
		out = append(out, ':')
		switch {
		case k1 != "" && k == k1:
			out = append(out, v1...)
		case k2 != "" && k == k2:
			out = append(out, v2...)
		default:
			out = append(out, fields[k]...)
		}
	}
	return append(out, '}')
}

// passBody renders a passed-through request for the upstream: as sent, but for the model's name.
func (o *openAI) passBody(c *Call) []byte {
	return encodeWith(c.Body, "model", jsonx.AppendString(nil, o.upstreamModel(c)), "", nil)
}

// passHeaders are the request headers a passed-through surface forwards upstream.
var passHeaders = map[Surface][]string{
	SurfaceMessages: {"Anthropic-Version", "Anthropic-Beta"},
}

// passHeader returns the headers of a passed-through request: the surface's own, as the client sent
// them, and the upstream's credentials the surface's way.
func (o *openAI) passHeader(s Surface, header http.Header) http.Header {
	h := http.Header{}
	for _, k := range passHeaders[s] {
		if v := header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	if s == SurfaceMessages {
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", "2023-06-01")
		}
		if o.key != "" {
			h.Set("X-Api-Key", o.key) // Anthropic-style upstreams read this one; vLLM reads Authorization
		}
	}
	return h
}

// EncodeObject writes the fields of a JSON object back out, keys sorted. The values are trusted to be
// valid JSON (they came from json.Unmarshal), which saves the re-validation json.Marshal would do.
func EncodeObject(fields map[string]json.RawMessage) []byte {
	return encodeWith(fields, "", nil, "", nil)
}

// spliceModel appends b to dst with the byte range span of b (its model's JSON string, quotes
// included) replaced by model; with span[0] < 0 (no model to rename) b is appended as it is. The one
// place an answer, a streamed chunk or a passed-through event is renamed for the served model.
func spliceModel(dst, b []byte, span [2]int, model []byte) []byte {
	return splice(dst, b, span, model, [2]int{-1, -1}, nil)
}

// splice appends b to dst with the byte ranges a and m of b (two JSON strings, either unset: -1)
// replaced by av and mv: a chat answer's id and model, rewritten in one copy.
func splice(dst, b []byte, a [2]int, av []byte, m [2]int, mv []byte) []byte {
	if a[0] >= 0 && m[0] >= 0 && m[0] < a[0] {
		a, m, av, mv = m, a, mv, av
	}
	if a[0] < 0 {
		a, av = m, mv
		m[0] = -1
	}
	if a[0] < 0 {
		return append(dst, b...)
	}
	dst = append(dst, b[:a[0]]...)
	dst = append(dst, av...)
	if m[0] < 0 {
		return append(dst, b[a[1]:]...)
	}
	dst = append(dst, b[a[1]:m[0]]...)
	dst = append(dst, mv...)
	return append(dst, b[m[1]:]...)
}
