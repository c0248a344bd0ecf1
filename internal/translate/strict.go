package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/strictjson"
)

// MaxDepth bounds the nesting of a request body; deeper bodies are refused before any recursion.
const MaxDepth = 200

// checkStrict reports the first duplicate object key in body, invalid JSON, trailing data or too deep
// nesting (internal/strictjson, the rule of every body svc reads). encoding/json keeps the last of two
// duplicate keys silently, which would let a body mean one thing to svc and another to whoever reads it
// next. Null stays allowed: the Messages API reads it as "not given".
func checkStrict(body []byte, checked bool) *Error {
	err := strictjson.CheckWith(body, strictjson.Options{AllowNull: true, MaxDepth: MaxDepth, Checked: checked})
	var se *strictjson.Error
	if errors.As(err, &se) {
		return errorf(se.Field, "%s", se.Reason)
	}
	return nil
}

// members checks a request body (checkStrict) and returns its top-level members: those the caller's
// walker returned (Options.Checked), or the body split here.
func members(body []byte, opts Options) (fields, *Error) {
	if opts.Checked != nil && opts.CheckedDepth > 0 && opts.CheckedDepth <= MaxDepth {
		return opts.Checked, nil // judged whole by the caller's walker, its depth too
	}
	if e := checkStrict(body, opts.Checked != nil); e != nil {
		return nil, e
	}
	if opts.Checked != nil {
		return opts.Checked, nil
	}
	top, e := object(body, "")
	if e != nil {
		return nil, errorf("", "request body must be a JSON object")
	}
	return top, nil
}

// fields is one decoded JSON object, its values kept raw.
type fields map[string]json.RawMessage

// object decodes raw as a JSON object; what names it in errors.
func object(raw json.RawMessage, path string) (fields, *Error) {
	if !isKind(raw, '{') {
		return nil, errorf(path, "must be an object")
	}
	// raw is part of a body checked whole before it is translated (checkStrict, or the edge's one body
	// walker): valid JSON without a repeated name, not judged again at every level it is opened (which
	// cost O(depth x size)). jsonx.Object reads what json.Unmarshal into a map reads.
	if f := jsonx.Object(raw); f != nil {
		return f, nil
	}
	return nil, errorf(path, "must be an object")
}

// member is one member of a JSON object: its name and its value as written.
type member struct {
	name string
	raw  json.RawMessage
}

// node is a nested object of a request (an input item, a content part, a message or content block)
// read without a map: its members in the order written, in room the caller gives (an array on its
// stack), looked up by name (get). A request holds hundreds of these and each has a few members, where
// a map each cost two allocations and most of a translation's time.
type node []member

// readNode reads raw (part of a body checked whole, as object's raw is) as an object into buf's room.
func readNode(raw json.RawMessage, at *loc, buf []member) (node, *Error) {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '{' {
		return nil, errorf(at.String(), "must be an object")
	}
	n := node(buf[:0])
	c.Object(func(name []byte) {
		if s, e := c.Span(); s >= 0 {
			n = append(n, member{jsonx.MemberName(name), raw[s:e:e]})
		}
	})
	if c.Bad() {
		return nil, errorf(at.String(), "must be an object")
	}
	return n, nil
}

// get is the value of the member named name (the last one, as a map keeps it), nil when absent.
func (n node) get(name string) json.RawMessage {
	for i := len(n) - 1; i >= 0; i-- {
		if n[i].name == name {
			return n[i].raw
		}
	}
	return nil
}

// eachElement calls fn with each element of the array raw (part of a body checked whole) and its index,
// until fn returns an error, which it returns with the number of elements; ok is false when raw is not
// an array. (fn makes the element's loc itself: one passed to it would be moved to the heap, with its
// parents.)
func eachElement(raw json.RawMessage, fn func(el json.RawMessage, i int) *Error) (n int, e *Error, ok bool) {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '[' {
		return 0, nil, false
	}
	c.Array(func() {
		s, end := c.Span()
		if e == nil && s >= 0 {
			e = fn(raw[s:end:end], n)
		}
		n++
	})
	if c.Bad() {
		return n, nil, false
	}
	return n, e, true
}

// only is onlyKeys for a node.
func (n node) only(at *loc, what string, allowed []string, info *RequestInfo) *Error {
	var bad []string
	for _, m := range n {
		if m.name == "cache_control" && info != nil {
			at.ignore(info, ".cache_control")
			continue
		}
		if !contains(allowed, m.name) {
			bad = append(bad, m.name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return notAllowed(bad, at.String(), what, allowed)
}

// loc is where a value stands in a request body ("input[3].content[1]"), written out only when an
// error or an ignored field names it: a request read without either builds no path. A loc is a
// member's name, and an element's index under it when index >= 0, below up (nil at the top).
type loc struct {
	up    *loc
	name  string
	index int
}

// String is the path, as the errors name it: "input[3].content[1]", "messages[0].content[2].source".
func (l *loc) String() string {
	if l == nil {
		return ""
	}
	return string(l.append(nil))
}

func (l *loc) append(b []byte) []byte { return l.appendAs(b, false) }

// appendAs appends the path, its indexes written as [] when unindexed (as RequestInfo.Ignored names
// them).
func (l *loc) appendAs(b []byte, unindexed bool) []byte {
	if l.up != nil {
		b = append(l.up.appendAs(b, unindexed), '.')
	}
	b = append(b, l.name...)
	switch {
	case l.index < 0:
	case unindexed:
		b = append(b, "[]"...)
	default:
		b = append(append(append(b, '['), strconv.Itoa(l.index)...), ']')
	}
	return b
}

// ignore is info.ignore of the path at l followed by suffix (".cache_control", ":thinking"), written
// in room on the stack and kept only the first time: what agents send on every turn (cache_control)
// costs no allocation once named.
func (l *loc) ignore(info *RequestInfo, suffix string) {
	var buf [128]byte
	b := append(l.appendAs(buf[:0], true), suffix...)
	for _, n := range info.Ignored {
		if n == string(b) {
			return
		}
	}
	info.Ignored = append(info.Ignored, string(b))
}

// key is the path of the member named name of the value at l: join(l.String(), name).
func (l *loc) key(name string) string { return join(l.String(), name) }

// only refuses any key of f outside allowed, except cache_control, which every Anthropic block, tool,
// message and system part may carry: a prompt caching hint that changes what an answer costs on
// Anthropic's side, never what it says, and that agents send on every request. It is accepted and
// named in the translation's Ignored list. allowed lists what may be sent, for the message.
func (t *translator) only(f fields, path, what string, allowed ...string) *Error {
	return onlyKeys(f, path, what, allowed, &t.info)
}

// onlyKeys is only for any surface: cache_control is accepted (and named in info) only when info is
// not nil.
func onlyKeys(f fields, path, what string, allowed []string, info *RequestInfo) *Error {
	var bad []string
	for k := range f {
		if k == "cache_control" && info != nil {
			info.ignore(join(path, k))
			continue
		}
		if !contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return notAllowed(bad, path, what, allowed)
}

// notAllowed is the error of an object holding keys outside allowed: it names the first of them.
func notAllowed(bad []string, path, what string, allowed []string) *Error {
	sort.Strings(bad)
	return errorf(join(path, bad[0]), "cannot be translated to chat completions for this model; %s may hold %s",
		what, strings.Join(allowed, ", "))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// isNull reports an absent or null value.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// isKind reports whether raw starts as a JSON value of the kind opened by c ('{', '[', '"').
func isKind(raw json.RawMessage, c byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == c
}

func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

// elements splits a JSON array (part of a body already checked whole, as object's raw is) into its
// elements, sharing raw's bytes; false when raw is not an array.
func elements(raw json.RawMessage) ([]json.RawMessage, bool) {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '[' {
		return nil, false
	}
	list := []json.RawMessage{}
	c.Array(func() {
		if s, e := c.Span(); s >= 0 {
			list = append(list, raw[s:e:e])
		}
	})
	if c.Bad() {
		return nil, false
	}
	return list, true
}

// str decodes a JSON string.
func str(raw json.RawMessage, path string) (string, *Error) {
	if s, ok := unquote(raw); ok {
		return s, nil
	}
	return "", errorf(path, "must be a string")
}

// str is str for the member name of the value at l: the path is written only for the error.
func (l *loc) str(raw json.RawMessage, name string) (string, *Error) {
	if s, ok := unquote(raw); ok {
		return s, nil
	}
	return "", errorf(l.key(name), "must be a string")
}

// word is unquote for the values a request repeats in every item, part and block (a type, a role): the
// ones svc reads are constants, not a copy each.
func word(raw json.RawMessage) (string, bool) {
	if len(raw) > 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		switch string(raw[1 : len(raw)-1]) { // compiled to comparisons, no conversion
		case "message":
			return "message", true
		case "function_call":
			return "function_call", true
		case "function_call_output":
			return "function_call_output", true
		case "reasoning":
			return "reasoning", true
		case "input_text":
			return "input_text", true
		case "output_text":
			return "output_text", true
		case "user":
			return "user", true
		case "assistant":
			return "assistant", true
		case "system":
			return "system", true
		case "developer":
			return "developer", true
		case "text":
			return "text", true
		case "tool_use":
			return "tool_use", true
		case "tool_result":
			return "tool_result", true
		case "thinking":
			return "thinking", true
		case "image":
			return "image", true
		case "base64":
			return "base64", true
		}
	}
	return unquote(raw)
}

// word is str for the member name of the value at l, by word's reading.
func (l *loc) word(raw json.RawMessage, name string) (string, *Error) {
	if s, ok := word(raw); ok {
		return s, nil
	}
	return "", errorf(l.key(name), "must be a string")
}

// unquote decodes a JSON string as json.Unmarshal does; false for anything else.
func unquote(raw json.RawMessage) (string, bool) {
	if plainString(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	if s, ok := jsonx.Unquote(raw); ok {
		return s, true
	}
	var s string
	if !isKind(raw, '"') || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// plainString reports whether raw is a JSON string that decodes to the bytes between its quotes: no
// escapes, no control characters, valid UTF-8 (which json.Unmarshal would replace). Most strings of a
// request are, and str takes them without encoding/json's reflection.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return c >= utf8.RuneSelf && plainUTF8(in)
		}
	}
	return true
}

// plainUTF8 is plainString's slow path, for strings with non-ASCII characters.
func plainUTF8(in []byte) bool {
	if !utf8.Valid(in) {
		return false
	}
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// boolean checks that raw is a JSON boolean (the caller has ruled out null).
func boolean(raw json.RawMessage, path string) *Error {
	if string(raw) != "true" && string(raw) != "false" {
		return errorf(path, "must be true or false")
	}
	return nil
}

// compact returns raw without insignificant whitespace.
func compact(raw json.RawMessage) []byte {
	return jsonx.Compact(raw) // raw is part of a body checked whole (object)
}

// elementsInto is elements into *list, for the readers written as json.Unmarshal's `!= nil` checks.
func elementsInto(raw json.RawMessage, list *[]json.RawMessage) bool {
	l, ok := elements(raw)
	*list = l
	return ok
}
