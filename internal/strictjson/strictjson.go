// Package strictjson reads request bodies strictly: one JSON object, no unknown, duplicate or null
// fields, no trailing data, and errors that name the field. encoding/json alone takes the last of two
// duplicate keys (so {"authMode":"fixed_api_key","authMode":"none"} would read as "none") and matches
// keys case-insensitively; a request read two ways is a request nobody can review.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds nesting; management API bodies are a few levels deep.
const maxDepth = 32

// Error is a body that was refused. Field is the path of the offending field ("target.step",
// "checkpoints[1].artifact"), "" when the problem is the body as a whole.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("field %q %s", e.Field, e.Reason)
}

// Decode reads data, which must hold exactly one JSON object, into v (a pointer to a struct).
// Besides what encoding/json checks, it refuses keys that appear twice (case-insensitively, as
// encoding/json matches them), null values (leave a field out to mean "not given"), fields v does not
// have, and anything after the object. Every failure is an *Error.
//
// nullable names the fields (as paths: "limits", "limits.requestsPerMinute") where null is a value of
// its own, such as "clear this limit"; their Go types must tell null from absent themselves (an
// UnmarshalJSON method, which may return an *Error naming the field).
func Decode(data []byte, v any, nullable ...string) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return &Error{Reason: "request body must be a JSON object"}
	}
	if err := check(data, Options{Nullable: nullable}); err != nil {
		return err
	}
	if err := validUTF8(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	return nil
}

// validUTF8 refuses a body whose strings are not valid UTF-8 text (RFC 8259): raw bytes that are not
// UTF-8, or a \u escape of half a surrogate pair ("\ud800" alone), which encoding/json would each read
// as U+FFFD, storing text the caller never sent. It names the top-level field whose value holds it.
// data is valid JSON (check ran first).
func validUTF8(data []byte) error {
	if validText(data) {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) == nil {
		for name, raw := range fields {
			if !validText(raw) {
				return &Error{Field: name, Reason: "must be valid UTF-8 text (no lone surrogate escapes)"}
			}
		}
	}
	return &Error{Reason: "request body must be valid UTF-8 text (no lone surrogate escapes)"}
}

// validText reports whether the JSON text data is valid UTF-8 with no \u escape of a lone surrogate.
// Backslashes stand only inside strings in valid JSON, so no string boundaries need tracking.
func validText(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	for i := bytes.IndexByte(data, '\\'); i >= 0 && i+1 < len(data); {
		if data[i+1] != 'u' {
			i += 2
		} else {
			r, ok := hex4(data[i+2:])
			switch {
			case !ok:
				return false
			case r >= 0xD800 && r <= 0xDBFF: // a high surrogate: a low one must follow
				lo, ok := hex4(data[min(i+8, len(data)):])
				if i+7 >= len(data) || data[i+6] != '\\' || data[i+7] != 'u' || !ok || lo < 0xDC00 || lo > 0xDFFF {
					return false
				}
				i += 12
			case r >= 0xDC00 && r <= 0xDFFF:
				return false
			default:
				i += 6
			}
		}
		if i >= len(data) {
			break
		}
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			break
		}
		i += j
	}
	return true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

// Options adjust CheckWith for bodies of another shape than the management API's.
type Options struct {
	// Nullable names the paths where null is a value of its own; AllowNull lets null stand anywhere
	// (bodies whose format reads null as "not given", such as the Messages API's).
	Nullable  []string
	AllowNull bool
	// MaxDepth bounds nesting (32 when 0).
	MaxDepth int
	// Checked says that the caller has judged data already as json.Valid and Duplicate do (the edge
	// reads every body so before it translates it): with AllowNull, only its depth is judged again.
	Checked bool
}

// CheckWith validates the syntax of one JSON value and refuses duplicate names (Duplicate), nulls
// (unless o allows them), nesting deeper than o.MaxDepth and trailing data.
//
// Where null may stand anywhere (the edge's translated bodies, read on every request), a body that is
// valid and shallow enough is judged without decoding it: encoding/json's scanner (json.Valid) and a
// count of brackets, a tenth of the walk's cost. Only a body that fails them is walked token by token,
// for the error that names the field; both ways refuse the same bodies.
func CheckWith(data []byte, o Options) error {
	if o.MaxDepth <= 0 {
		o.MaxDepth = maxDepth
	}
	if o.AllowNull && (o.Checked || json.Valid(data)) && depth(data) <= o.MaxDepth {
		if o.Checked {
			return nil
		}
		if e := Duplicate(data); e != nil {
			return e
		}
		return nil
	}
	return check(data, o)
}

// depth returns the deepest nesting of objects and arrays in data, valid JSON.
func depth(data []byte) int {
	d, deepest := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if d++; d > deepest {
				deepest = d
			}
		case '}', ']':
			d--
		}
	}
	return deepest
}

func check(data []byte, o Options) error {
	if o.MaxDepth <= 0 {
		o.MaxDepth = maxDepth
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walk(dec, "", 0, &o); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: "request body has data after the JSON object"}
	}
	if e := Duplicate(data); e != nil {
		return e
	}
	return nil
}

// walk reads one JSON value; path names it in errors, depth counts the objects and arrays around it.
// Duplicate names are Duplicate's to judge, once the text is known to be valid.
func walk(dec *json.Decoder, path string, depth int, o *Options) error {
	tok, err := dec.Token()
	if err != nil {
		return syntax(err)
	}
	switch t := tok.(type) {
	case nil:
		if o.AllowNull || slices.Contains(o.Nullable, path) {
			return nil
		}
		return &Error{Field: path, Reason: "must not be null; leave the field out instead"}
	case json.Delim:
		if depth >= o.MaxDepth {
			return &Error{Field: path, Reason: fmt.Sprintf("is nested more than %d levels deep", o.MaxDepth)}
		}
		switch t {
		case '{':
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return syntax(err)
				}
				key, _ := kt.(string)
				field := key
				if path != "" {
					field = path + "." + key
				}
				if err := walk(dec, field, depth+1, o); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(dec, path+"["+strconv.Itoa(i)+"]", depth+1, o); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return syntax(err)
		}
	}
	return nil
}

func syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &Error{Reason: fmt.Sprintf("request body is not valid JSON (syntax error at byte %d)", se.Offset)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Reason: "request body is not valid JSON (it ends early)"}
	}
	return &Error{Reason: "request body is not valid JSON"}
}

// describe turns encoding/json's errors into ones that name the field; an *Error of a field's own
// UnmarshalJSON passes as it is.
func describe(err error) error {
	var te *json.UnmarshalTypeError
	var own *Error
	switch {
	case errors.As(err, &own):
		return own
	case errors.As(err, &te):
		if te.Field != "" {
			return &Error{Field: te.Field, Reason: fmt.Sprintf("must be %s, not %s", kind(te.Type.Kind().String()), te.Value)}
		}
		return &Error{Reason: fmt.Sprintf("request body must be %s, not %s", kind(te.Type.Kind().String()), te.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return &Error{Field: name, Reason: "is not a field of this request"}
	}
	return syntax(err)
}

func kind(goKind string) string {
	switch goKind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	}
	return "a number"
}
