// Package jsonx scans JSON without decoding it: the fields svc reads of every upstream answer, streamed
// chunk and request body, found in one pass and without allocations. Its input is trusted to be valid
// JSON where its callers say so; on any other input it stops early and never panics (fuzzed against
// encoding/json).
package jsonx

import (
	"bytes"
	"encoding/json"
)

// TopLevelString returns the byte range (quotes included) of the string value of key in the
// top-level object b, or -1, -1.
func TopLevelString(b []byte, key string) (int, int) {
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
			if depth == 1 && keyIs(b[i:end], key) {
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

// keyIs reports whether the JSON string s (quotes included) spells key. Escapes are decoded only when
// present, so a plain key costs one comparison; an escaped one ("\u006dodel") is the same key to JSON.
func keyIs(s []byte, key string) bool {
	inner := s[1 : len(s)-1]
	if len(inner) < len(key) {
		return false // escapes only lengthen a key
	}
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == key
	}
	var k string
	return json.Unmarshal(s, &k) == nil && k == key
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

// valueAt returns the byte range of the value of key in the JSON object obj (top level of obj only),
// or -1, -1. Like RewriteModel it is a single pass without allocations.
func valueAt(obj []byte, key string) (int, int) {
	depth := 0
	for i := 0; i < len(obj); i++ {
		switch obj[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(obj, i)
			if end < 0 {
				return -1, -1
			}
			if depth == 1 {
				j := skipSpace(obj, end)
				if j < len(obj) && obj[j] == ':' {
					if keyIs(obj[i:end], key) {
						v := skipSpace(obj, j+1)
						return v, valueEnd(obj, v)
					}
					// Skip this key's value, so that strings inside it are not taken for keys.
					i = valueEnd(obj, skipSpace(obj, j+1)) - 1
					if i < 0 {
						return -1, -1
					}
					continue
				}
			}
			i = end - 1
		}
	}
	return -1, -1
}

// valueEnd returns the index just past the JSON value starting at b[i] (-1 when malformed).
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
		j++
	}
	return j
}

// EachField calls fn with the name (unescaped) and the value's byte range of each member of the JSON
// object obj, in order, in one pass over obj; it stops at the first malformed member. A reader that
// wants several fields of an object scans it once with eachField instead of once per field.
func EachField(obj []byte, fn func(name []byte, start, end int)) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		ke := stringEnd(obj, i)
		if ke < 0 {
			return
		}
		name := obj[i+1 : ke-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var k string
			if json.Unmarshal(obj[i:ke], &k) != nil {
				return
			}
			name = []byte(k)
		}
		j := skipSpace(obj, ke)
		if j >= len(obj) || obj[j] != ':' {
			return
		}
		vs := skipSpace(obj, j+1)
		ve := valueEnd(obj, vs)
		if ve <= vs {
			return
		}
		fn(name, vs, ve)
		i = skipSpace(obj, ve)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i = skipSpace(obj, i+1)
	}
}

// Field returns the raw value of key in obj, or nil.
func Field(obj []byte, key string) []byte {
	s, e := valueAt(obj, key)
	if s < 0 || e < 0 {
		return nil
	}
	return obj[s:e]
}

// Elements calls fn with each element of the JSON array arr.
func Elements(arr []byte, fn func(elem []byte)) {
	if len(arr) < 2 || arr[0] != '[' {
		return
	}
	i := skipSpace(arr, 1)
	for i < len(arr) && arr[i] != ']' {
		e := valueEnd(arr, i)
		if e <= i {
			// Malformed (a stray '}' or ',' is an empty value): stop rather than loop on it forever.
			return
		}
		fn(arr[i:e])
		i = skipSpace(arr, e)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
}

// String decodes a raw JSON string ("" for null or anything else); strings without escapes,
// the common case for streamed tokens, are sliced without decoding.
func String(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// Int decodes a raw JSON integer (0 for anything else).
func Int(raw []byte) int64 {
	var n int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return n
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// Object returns the members of the JSON object obj, which must be valid JSON (json.Valid), or nil
// when obj is not an object. The values are slices of obj, not copies; a name written twice keeps its
// last value, as encoding/json does.
func Object(obj []byte) map[string]json.RawMessage {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil
	}
	m := make(map[string]json.RawMessage, 8)
	EachField(obj, func(name []byte, s, e int) { m[string(name)] = obj[s:e:e] })
	return m
}
