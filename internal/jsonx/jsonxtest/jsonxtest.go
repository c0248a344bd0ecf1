// Package jsonxtest holds the oracles that fuzz tests hold svc's hand-written JSON scanners to
// (internal/jsonx, and runtime's model rewriting and stream reading built on it): encoding/json.
package jsonxtest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"unicode/utf8"
)

// TopLevel decodes a JSON object with encoding/json, and reports whether the scanners can be held to
// it: valid UTF-8 (encoding/json replaces invalid bytes, the scanners pass them through) and no key
// written twice (encoding/json keeps the last, the scanners find the first).
func TopLevel(data []byte) (map[string]json.RawMessage, bool) {
	if !utf8.Valid(data) {
		return nil, false
	}
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(data)) == 0 || bytes.TrimSpace(data)[0] != '{' || json.Unmarshal(data, &m) != nil || m == nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.Token() // {
	seen := map[string]bool{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, false
		}
		if seen[k.(string)] {
			return nil, false
		}
		seen[k.(string)] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil, false
		}
	}
	return m, true
}

// Same reports whether a and b are the same JSON value.
func Same(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
