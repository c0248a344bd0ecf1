package inference

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/svcdev/svc/internal/jsonx"
)

// EncodeObject writes the fields of a JSON object back out, keys sorted. The values are trusted to be
// valid JSON (they came from json.Unmarshal), which saves the re-validation json.Marshal would do.
func EncodeObject(fields map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(fields))
	size := 2
	for k, v := range fields {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
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
		out = append(out, fields[k]...)
	}
	return append(out, '}')
}

// RewriteModel returns b, a JSON object, with the string value of its top-level "model" field replaced
// by model (already JSON-encoded, quotes included). Objects without one come back unchanged. It is a
// single pass over the bytes, cheap enough to run on every streamed chunk.
func RewriteModel(b []byte, model []byte) []byte {
	start, end := jsonx.TopLevelString(b, "model")
	if start < 0 {
		return b
	}
	if bytes.Equal(b[start:end], model) {
		return b
	}
	return spliceModel(make([]byte, 0, len(b)-(end-start)+len(model)), b, [2]int{start, end}, model)
}

// spliceModel appends b to dst with the byte range span of b (its model's JSON string, quotes
// included) replaced by model; with span[0] < 0 (no model to rename) b is appended as it is. The one
// place an answer, a streamed chunk or a passed-through event is renamed for the served model.
func spliceModel(dst, b []byte, span [2]int, model []byte) []byte {
	if span[0] < 0 {
		return append(dst, b...)
	}
	dst = append(dst, b[:span[0]]...)
	dst = append(dst, model...)
	return append(dst, b[span[1]:]...)
}
