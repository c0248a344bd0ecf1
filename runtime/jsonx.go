package runtime

import (
	"bytes"
	"encoding/json"
	"sort"
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
		kb, _ := json.Marshal(k)
		out = append(out, kb...)
		out = append(out, ':')
		out = append(out, fields[k]...)
	}
	return append(out, '}')
}

// RewriteModel returns b, a JSON object, with the string value of its top-level "model" field replaced
// by model (already JSON-encoded, quotes included). Objects without one come back unchanged. It is a
// single pass over the bytes, cheap enough to run on every streamed chunk.
func RewriteModel(b []byte, model []byte) []byte {
	start, end := findTopLevelString(b, "model")
	if start < 0 {
		return b
	}
	if bytes.Equal(b[start:end], model) {
		return b
	}
	out := make([]byte, 0, len(b)-(end-start)+len(model))
	out = append(out, b[:start]...)
	out = append(out, model...)
	return append(out, b[end:]...)
}

// findTopLevelString returns the byte range (quotes included) of the string value of key in the
// top-level object b, or -1, -1.
func findTopLevelString(b []byte, key string) (int, int) {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(b, i)
			if end < 0 {
				return -1, -1
			}
			if depth == 1 && end-i-2 == len(key) && string(b[i+1:end-1]) == key {
				j := skipSpace(b, end)
				if j < len(b) && b[j] == ':' {
					j = skipSpace(b, j+1)
					if j < len(b) && b[j] == '"' {
						if e := stringEnd(b, j); e > 0 {
							return j, e
						}
					}
					return -1, -1
				}
			}
			i = end - 1
		}
	}
	return -1, -1
}

// stringEnd returns the index just past the closing quote of the string starting at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
