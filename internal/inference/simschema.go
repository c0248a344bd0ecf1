package inference

import (
	"bytes"
	"encoding/json"
	"github.com/svcdev/svc/internal/jsonx"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Structured output in the simulator: response_format json_schema gets a JSON value valid against
// the schema, so that structured-output helpers (openai's .parse, Vercel's generateObject,
// LangChain's withStructuredOutput, the Agents SDK's outputType) parse it. It covers what those
// helpers generate: objects (every property, in the schema's order), arrays (minItems, at least one
// item, at most maxItems), strings (enum, const, formats, length bounds), numbers and integers
// (bounds, multipleOf), booleans, null, nullable types, anyOf/oneOf/allOf and $ref into $defs or
// definitions. Strings carry the answer's text. json_object without a schema gets {"answer": text}.

// schemaValue returns a JSON value valid against schema (JSON text), with text in its strings.
func schemaValue(schema json.RawMessage, text string) []byte {
	var b bytes.Buffer
	if len(schema) == 0 {
		b.WriteString(`{"answer":`)
		writeString(&b, text)
		b.WriteByte('}')
		return b.Bytes()
	}
	g := &schemaGen{text: text}
	json.Unmarshal(schema, &g.root)
	g.value(&b, schema, 0, 0)
	return b.Bytes()
}

type schemaGen struct {
	root map[string]json.RawMessage // the whole schema, for $ref
	text string
}

// maxSchemaDepth bounds recursion through $ref (a schema that refers to itself); past shallowDepth,
// arrays hold only the items they must.
const (
	maxSchemaDepth = 48
	shallowDepth   = 8
)

// keywords decodes a schema object; a schema that is not an object (true, false) allows anything.
func keywords(raw json.RawMessage) map[string]json.RawMessage {
	var k map[string]json.RawMessage
	if json.Unmarshal(raw, &k) != nil {
		return nil
	}
	return k
}

// value writes a value for schema raw; salt tells items of one array apart (uniqueItems).
func (g *schemaGen) value(b *bytes.Buffer, raw json.RawMessage, depth, salt int) {
	k := keywords(raw)
	if depth > maxSchemaDepth {
		b.WriteString("null")
		return
	}
	if ref, ok := k["$ref"]; ok {
		if target := g.resolve(ref); target != nil {
			g.value(b, target, depth+1, salt)
			return
		}
	}
	if c, ok := k["const"]; ok {
		b.Write(compactJSON(c))
		return
	}
	if e, ok := k["enum"]; ok {
		var values []json.RawMessage
		if json.Unmarshal(e, &values) == nil && len(values) > 0 {
			b.Write(compactJSON(values[salt%len(values)]))
			return
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if opts, ok := k[key]; ok {
			var list []json.RawMessage
			if json.Unmarshal(opts, &list) == nil && len(list) > 0 {
				pick := list[0]
				for _, o := range list {
					if typeOf(keywords(o)) != "null" {
						pick = o
						break
					}
				}
				g.value(b, merge(raw, pick), depth+1, salt)
				return
			}
		}
	}
	if all, ok := k["allOf"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(all, &list) == nil {
			merged := raw
			for _, part := range list {
				if ref, ok := keywords(part)["$ref"]; ok {
					if target := g.resolve(ref); target != nil {
						part = target
					}
				}
				merged = merge(merged, part)
			}
			g.value(b, merged, depth+1, salt)
			return
		}
	}
	switch typeOf(k) {
	case "object":
		g.object(b, k, depth, salt)
	case "array":
		g.array(b, k, depth, salt)
	case "integer":
		b.WriteString(strconv.FormatInt(int64(number(k, salt, true)), 10))
	case "number":
		b.WriteString(strconv.FormatFloat(number(k, salt, false), 'f', -1, 64))
	case "boolean":
		b.WriteString("true")
	case "null":
		b.WriteString("null")
	default:
		writeString(b, g.str(k, salt))
	}
}

// typeOf returns a schema's type: its type (the first besides null of a list), or what its keywords
// imply.
func typeOf(k map[string]json.RawMessage) string {
	if raw, ok := k["type"]; ok {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			return one
		}
		var list []string
		if json.Unmarshal(raw, &list) == nil {
			for _, t := range list {
				if t != "null" {
					return t
				}
			}
			if len(list) > 0 {
				return list[0]
			}
		}
	}
	switch {
	case k["properties"] != nil || k["required"] != nil:
		return "object"
	case k["items"] != nil || k["prefixItems"] != nil:
		return "array"
	}
	return "string"
}

// resolve follows a local $ref ("#", "#/$defs/x", "#/definitions/x", any JSON pointer into the schema).
func (g *schemaGen) resolve(ref json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(ref, &s) != nil || !strings.HasPrefix(s, "#") {
		return nil
	}
	cur, _ := json.Marshal(g.root)
	for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(s, "#"), "/"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		next, ok := keywords(cur)[part]
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// merge returns schema a with the keywords of b added (b's properties after a's; required joined).
func merge(a, b json.RawMessage) json.RawMessage {
	ka, kb := keywords(a), keywords(b)
	if ka == nil {
		return b
	}
	out := map[string]json.RawMessage{}
	for k, v := range ka {
		if k != "anyOf" && k != "oneOf" && k != "allOf" {
			out[k] = v
		}
	}
	for k, v := range kb {
		switch k {
		case "properties":
			if pa, ok := out["properties"]; ok {
				out[k] = joinObjects(pa, v)
				continue
			}
		case "required":
			var ra, rb []string
			json.Unmarshal(out["required"], &ra)
			json.Unmarshal(v, &rb)
			joined, _ := json.Marshal(append(ra, rb...))
			out[k] = joined
			continue
		}
		out[k] = v
	}
	m, _ := json.Marshal(out)
	return m
}

// joinObjects writes the members of two JSON objects into one, in order (a's first).
func joinObjects(a, b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	for _, obj := range []json.RawMessage{a, b} {
		names, props := jsonx.Members(obj)
		for _, name := range names {
			if n > 0 {
				buf.WriteByte(',')
			}
			writeString(&buf, name)
			buf.WriteByte(':')
			buf.Write(props[name])
			n++
		}
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

func (g *schemaGen) object(b *bytes.Buffer, k map[string]json.RawMessage, depth, salt int) {
	names, props := jsonx.Members(k["properties"])
	var required []string
	json.Unmarshal(k["required"], &required)
	for _, r := range required {
		if _, ok := props[r]; !ok {
			names = append(names, r)
			props[r] = json.RawMessage(`{}`)
		}
	}
	b.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, name)
		b.WriteByte(':')
		g.value(b, props[name], depth+1, salt)
	}
	b.WriteByte('}')
}

func (g *schemaGen) array(b *bytes.Buffer, k map[string]json.RawMessage, depth, salt int) {
	var prefix []json.RawMessage
	json.Unmarshal(k["prefixItems"], &prefix)
	// One item, unless deep inside a recursive schema, where arrays stay as short as allowed so
	// that the value ends.
	n := 1
	if depth > shallowDepth {
		n = 0
	}
	if min := intKeyword(k, "minItems"); min > n {
		n = min
	}
	if len(prefix) > n {
		n = len(prefix)
	}
	if max, ok := k["maxItems"]; ok {
		if m, err := strconv.Atoi(string(max)); err == nil && m < n {
			n = m
		}
	}
	if n > 64 {
		n = 64
	}
	items := k["items"]
	if len(items) == 0 || string(items) == "true" || string(items) == "false" {
		items = json.RawMessage(`{}`)
	}
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < len(prefix) {
			g.value(b, prefix[i], depth+1, salt+i)
		} else {
			g.value(b, items, depth+1, salt+i)
		}
	}
	b.WriteByte(']')
}

func intKeyword(k map[string]json.RawMessage, name string) int {
	n, _ := strconv.Atoi(string(k[name]))
	return n
}

func floatKeyword(k map[string]json.RawMessage, name string) (float64, bool) {
	raw, ok := k[name]
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil
}

// number picks a number within the schema's bounds: 1 (plus salt), moved into the bounds and onto
// multipleOf.
func number(k map[string]json.RawMessage, salt int, integer bool) float64 {
	v := float64(1 + salt)
	lo, hi := math.Inf(-1), math.Inf(1)
	if f, ok := floatKeyword(k, "minimum"); ok {
		lo = f
	}
	if f, ok := floatKeyword(k, "exclusiveMinimum"); ok {
		if integer {
			lo = math.Max(lo, math.Floor(f)+1)
		} else {
			lo = math.Max(lo, f+0.5)
		}
	}
	if f, ok := floatKeyword(k, "maximum"); ok {
		hi = f
	}
	if f, ok := floatKeyword(k, "exclusiveMaximum"); ok {
		if integer {
			hi = math.Min(hi, math.Ceil(f)-1)
		} else {
			hi = math.Min(hi, f-0.5)
		}
	}
	if integer {
		lo, hi = math.Ceil(lo), math.Floor(hi)
	}
	if v < lo {
		v = lo + float64(salt)
	}
	if v > hi {
		v = hi
	}
	if m, ok := floatKeyword(k, "multipleOf"); ok && m > 0 {
		v = math.Ceil(v/m) * m
		if v > hi {
			v = math.Floor(hi/m) * m
		}
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		v = 0
	}
	return v
}

// str picks a string: a value of its format, else the answer's text, within its length bounds.
func (g *schemaGen) str(k map[string]json.RawMessage, salt int) string {
	var format string
	json.Unmarshal(k["format"], &format)
	s := map[string]string{
		"date": "2026-01-01", "date-time": "2026-01-01T00:00:00Z", "time": "00:00:00Z", "duration": "P1D",
		"email": "user@example.com", "idn-email": "user@example.com", "hostname": "example.com", "idn-hostname": "example.com",
		"ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "uri": "https://example.com/", "url": "https://example.com/",
		"iri": "https://example.com/", "uri-reference": "/", "uuid": "00000000-0000-4000-8000-000000000000",
	}[format]
	if s == "" {
		s = g.text
		if s == "" {
			s = "text"
		}
		if salt > 0 {
			s += " " + strconv.Itoa(salt+1)
		}
	}
	if max := intKeyword(k, "maxLength"); max > 0 && utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max])
	}
	if min := intKeyword(k, "minLength"); utf8.RuneCountInString(s) < min {
		s += strings.Repeat("x", min-utf8.RuneCountInString(s))
	}
	return s
}

func writeString(b *bytes.Buffer, s string) {
	out, _ := json.Marshal(s)
	b.Write(out)
}

func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
