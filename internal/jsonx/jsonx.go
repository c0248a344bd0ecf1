// Package jsonx scans JSON without decoding it: the fields svc reads of every upstream answer, streamed
// chunk and request body, found in one pass and without allocations; and it writes and reads JSON
// strings by hand, as encoding/json does. Its input is trusted to be valid JSON where its callers say
// so; on any other input it stops early and never panics (fuzzed against encoding/json).
package jsonx

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// TopLevelString returns the byte range (quotes included) of the string value of key in the
// top-level object b, or -1, -1 (also when the first member named key is not a string).
func TopLevelString(b []byte, key string) (int, int) {
	start, end, seen := -1, -1, false
	c := NewCursor(b)
	c.Object(func(name []byte) {
		if seen || string(name) != key {
			return
		}
		seen = true
		if c.Kind() == '"' {
			start, end = c.Span()
		}
	})
	return start, end
}

// stringEnd returns the index just past the closing quote of the string starting at b[i].
func stringEnd(b []byte, i int) int {
	// The first bytes one by one (most strings are short: a name, a role), then the next quote found
	// with bytes.IndexByte (a prompt's text, a tool's description: kilobytes that valueEnd skips),
	// which ends the string unless an odd run of backslashes escapes it.
	j := i + 1
	for n := j + 16; j < len(b) && j < n; j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			j++
		}
	}
	for j < len(b) {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return -1
		}
		q += j
		// A run of backslashes starts where an escape may start (the byte before it is no backslash,
		// in valid JSON): they pair from its start, and an odd run escapes the quote.
		run := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			run++
		}
		if run%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// stringEndEsc is stringEnd, and whether the string holds an escape (so that a reader need not look
// for one again). (Skipping eight bytes at a time was measured slower: most strings of a chunk are
// a few bytes long.)
func stringEndEsc(b []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c == '"' {
			return j + 1, esc
		}
		if c == '\\' {
			esc = true
			j++
		}
	}
	return -1, esc
}

func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' { // the common case, without whitespace
		return i
	}
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// ValueEnd returns the index just past the JSON value that starts at b[i] or after white space
// there; -1, or an index not past i, when there is none. It does not validate the value: it finds
// where a valid one ends.
func ValueEnd(b []byte, i int) int { return valueEnd(b, skipSpace(b, i)) }

// SkipSpace returns the index of the first byte at or after b[i] that is no JSON white space.
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }

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

// Field returns the raw value of the first member named key in the object obj, or nil.
func Field(obj []byte, key string) []byte {
	var v []byte
	c := NewCursor(obj)
	c.Object(func(name []byte) {
		if v == nil && string(name) == key {
			v = c.Raw()
		}
	})
	return v
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
	if s, ok := Unquote(raw); ok {
		return s
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

// AppendString appends s as a JSON string, byte for byte as encoding/json writes it: <, > and & as
// \u003c, \u003e and \u0026, U+2028 and U+2029 escaped, control characters as \n, \r, \t, \b, \f or
// \u00XX, invalid UTF-8 as \ufffd (FuzzAppendString). It runs for every request, streamed token and
// shipped run, where json.Marshal of a string costs an allocation and a pass through reflection.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainByte[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default: // other control characters, <, > and &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}

const hexDigits = "0123456789abcdef"

// plainByte marks the ASCII bytes a JSON string holds as they are: not a control character, not " or
// \\, and not <, > or & (which encoding/json escapes for HTML).
var plainByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// Unquote decodes the raw JSON string raw (quotes included) as encoding/json decodes it. ok is false
// when raw is not a string token encoding/json accepts, and also (rarely) when raw holds invalid UTF-8,
// which encoding/json replaces and Unquote leaves to it (FuzzUnquote).
func Unquote(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	i := 0
	for i < len(in) && in[i] >= 0x20 && in[i] != '\\' && in[i] != '"' && in[i] < utf8.RuneSelf {
		i++
	}
	if i == len(in) {
		return string(in), true
	}
	if !utf8.Valid(in[i:]) {
		return "", false
	}
	out := make([]byte, i, len(in))
	copy(out, in)
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"' || c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		case i+1 == len(in):
			return "", false
		}
		switch e := in[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r := hex4(in[i+2:])
			if r < 0 {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair is one character; a surrogate alone is U+FFFD, as encoding/json reads it.
				if len(in) >= i+2 && in[i] == '\\' && in[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, hex4(in[i+2:])); dec != utf8.RuneError {
						out = utf8.AppendRune(out, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(out), true
}

// hex4 reads four hex digits at the start of b as a rune, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Integer decodes a raw JSON number as encoding/json decodes it into an int64: an optional minus and
// digits, without fraction or exponent, within range; ok is false for anything else (other kinds
// included). It is for values that must be integers (max_tokens, usage counts), where Int is lenient.
func Integer(raw []byte) (n int64, ok bool) {
	neg := len(raw) > 0 && raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 || len(digits) > 19 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0') // 19 digits cannot overflow a uint64
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// Object returns the members of the JSON object obj, which must be valid JSON (json.Valid), or nil
// when obj is not an object. The values are slices of obj, not copies; a name written twice keeps its
// last value, as encoding/json does.
func Object(obj []byte) map[string]json.RawMessage {
	c := NewCursor(obj)
	if c.Kind() != '{' {
		return nil
	}
	m := make(map[string]json.RawMessage, 8)
	c.Object(func(name []byte) {
		if s, e := c.Span(); s >= 0 {
			m[MemberName(name)] = obj[s:e:e]
		}
	})
	return m
}

// MemberName is name as a string: the names that the requests' objects repeat (a message's, a
// part's, a tool's) without an allocation each, the others copied.
func MemberName(name []byte) string {
	switch string(name) { // compiled to comparisons, no conversion
	case "type":
		return "type"
	case "role":
		return "role"
	case "content":
		return "content"
	case "text":
		return "text"
	case "id":
		return "id"
	case "name":
		return "name"
	case "arguments":
		return "arguments"
	case "call_id":
		return "call_id"
	case "output":
		return "output"
	case "status":
		return "status"
	case "description":
		return "description"
	case "parameters":
		return "parameters"
	case "strict":
		return "strict"
	case "input":
		return "input"
	case "input_schema":
		return "input_schema"
	case "tool_use_id":
		return "tool_use_id"
	case "cache_control":
		return "cache_control"
	case "summary":
		return "summary"
	case "encrypted_content":
		return "encrypted_content"
	case "signature":
		return "signature"
	case "thinking":
		return "thinking"
	case "is_error":
		return "is_error"
	case "source":
		return "source"
	case "media_type":
		return "media_type"
	case "data":
		return "data"
	case "image_url":
		return "image_url"
	case "detail":
		return "detail"
	case "annotations":
		return "annotations"
	case "logprobs":
		return "logprobs"
	case "refusal":
		return "refusal"
	case "citations":
		return "citations"
	}
	return string(name)
}

// Members returns the member names of the JSON object obj in the order written (each once) and their
// values (a name written twice keeps its last value, as encoding/json does), or nil names when obj is
// not an object. Names are decoded as encoding/json decodes them. For what needs the order (a JSON
// Schema's properties, answered in the order they were given), not for the hot path.
func Members(obj []byte) ([]string, map[string]json.RawMessage) {
	props := map[string]json.RawMessage{}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, props
	}
	var names []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		name, _ := t.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		if _, dup := props[name]; !dup {
			names = append(names, name)
		}
		props[name] = v
	}
	return names, props
}

// Cursor reads a JSON text in a single pass: objects member by member and arrays element by element,
// each value read, descended into or skipped as the reader decides. A reader that wants fields at
// several depths (a stream chunk's id, its choices, each choice's delta) visits each byte once, where
// a scan per field would visit a nested value once per level. On input that is not JSON it stops (Bad) and
// never panics.
type Cursor struct {
	b   []byte
	i   int
	bad bool
}

// NewCursor returns a cursor at the start of b.
func NewCursor(b []byte) *Cursor { return &Cursor{b: b} }

// Bad reports whether the cursor met something that is not JSON.
func (c *Cursor) Bad() bool { return c.bad }

// Kind returns the first byte of the next value ('{', '[', '"', 'n', 't', 'f', a digit or '-'), or 0
// at the end of the input.
func (c *Cursor) Kind() byte {
	c.i = skipSpace(c.b, c.i)
	if c.bad || c.i >= len(c.b) {
		return 0
	}
	return c.b[c.i]
}

// Object calls fn with the name (unescaped) of each member of the object at the cursor. fn reads the
// member's value with the cursor's methods, or leaves it to be skipped. A value that is not an object
// is skipped.
func (c *Cursor) Object(fn func(name []byte)) {
	c.compound('{', '}', func() bool {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return false
		}
		ke, esc := stringEndEsc(c.b, c.i)
		if ke < 0 {
			return false
		}
		name := c.b[c.i+1 : ke-1]
		if esc {
			var k string
			if json.Unmarshal(c.b[c.i:ke], &k) != nil {
				return false
			}
			name = []byte(k)
		}
		j := skipSpace(c.b, ke)
		if j >= len(c.b) || c.b[j] != ':' {
			return false
		}
		c.i = skipSpace(c.b, j+1)
		c.member(func() { fn(name) })
		return !c.bad
	})
}

// Array calls fn for each element of the array at the cursor; fn reads the element with the cursor's
// methods, or leaves it to be skipped. A value that is not an array is skipped.
func (c *Cursor) Array(fn func()) {
	c.compound('[', ']', func() bool {
		if !startsValue(c.Kind()) {
			return false // a stray ',', '}' or ']': not an element
		}
		c.member(fn)
		return !c.bad
	})
}

// startsValue reports whether a JSON value can begin with b.
func startsValue(b byte) bool {
	switch b {
	case '{', '[', '"', 'n', 't', 'f', '-':
		return true
	}
	return b >= '0' && b <= '9'
}

// compound walks an object or array: item reads one member or element at the cursor.
func (c *Cursor) compound(open, close byte, item func() bool) {
	if c.Kind() != open {
		c.Raw()
		return
	}
	c.i = skipSpace(c.b, c.i+1)
	if c.i < len(c.b) && c.b[c.i] == close {
		c.i++
		return
	}
	for {
		if !item() {
			c.bad = true
			return
		}
		c.i = skipSpace(c.b, c.i)
		if c.i < len(c.b) && c.b[c.i] == ',' {
			c.i = skipSpace(c.b, c.i+1)
			continue
		}
		if c.i < len(c.b) && c.b[c.i] == close {
			c.i++
			return
		}
		c.bad = true
		return
	}
}

// member runs fn at a value and skips the value if fn left it unread.
func (c *Cursor) member(fn func()) {
	start := c.i
	fn()
	if !c.bad && c.i == start {
		c.Raw()
	}
}

// Raw returns the next value as it is written, and moves past it.
func (c *Cursor) Raw() []byte {
	s, e := c.Span()
	if s < 0 {
		return nil
	}
	return c.b[s:e]
}

// Span returns the byte range of the next value in the input, and moves past it; -1, -1 when there
// is none.
func (c *Cursor) Span() (int, int) {
	s := skipSpace(c.b, c.i)
	e := valueEnd(c.b, s)
	if c.bad || e <= s {
		c.bad = true
		return -1, -1
	}
	c.i = e
	return s, e
}

// String reads the next value as a string ("" for null or any other kind).
func (c *Cursor) String() string {
	if c.Kind() != '"' {
		c.Raw()
		return ""
	}
	e, esc := stringEndEsc(c.b, c.i)
	if e < 0 {
		c.bad = true
		return ""
	}
	raw := c.b[c.i:e]
	c.i = e
	if !esc {
		return string(raw[1 : len(raw)-1])
	}
	return String(raw)
}

// Int reads the next value as a non-negative integer (0 for anything else).
func (c *Cursor) Int() int64 { return Int(c.Raw()) }

// Compact returns valid JSON src without the white space between its tokens, as json.Compact writes
// it, without judging src again (the caller checked it whole): src itself when it has none to leave
// out (no copy), else a new slice (FuzzCompact holds the two to json.Compact).
func Compact(src []byte) []byte {
	i, in := 0, false
	for ; i < len(src); i++ {
		c := src[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		if c == '"' {
			in = true
		} else if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
	}
	if i >= len(src) {
		return src
	}
	out := make([]byte, i, len(src))
	copy(out, src[:i])
	for ; i < len(src); i++ {
		c := src[i]
		if in {
			out = append(out, c)
			switch c {
			case '\\':
				if i+1 < len(src) {
					i++
					out = append(out, src[i])
				}
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			in = true
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out
}
