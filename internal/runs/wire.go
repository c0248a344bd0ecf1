package runs

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/strictjson"
)

// A run travels, and waits in a spool, as one line of JSON (newline-delimited JSON: AppendLine,
// Lines): the Run's own fields by their json tags, its transcripts as the JSON they almost always
// are. An svc edge's run batch is a header line and one line per run (docs/API.md, "Internal API for
// edge processes"); the recorder's spool keeps the same lines. DecodeRun reads every line, of a
// batch of any size, one at a time, as encoding/json reads it.

// Transcript is a request or response body, byte for byte. In a run's JSON it is the body itself when
// the body is a JSON object or array on one line (valid, valid UTF-8, no newline): what an SDK sends and
// an upstream answers, carried without escaping. Any other body is a JSON string of its text
// (EncodeText: base64 behind a marker when it is not valid UTF-8 or holds a NUL byte). Either form
// reads back as the same bytes.
type Transcript []byte

// MarshalJSON writes the transcript's form. encoding/json compacts and HTML-escapes what a Marshaler
// returns, which would change the bytes of a raw body: AppendLine writes transcripts with
// AppendTranscript instead, and this is for the other encoders a run may meet (tests, tools).
func (t Transcript) MarshalJSON() ([]byte, error) {
	return json.Marshal(EncodeText(string(t)))
}

// UnmarshalJSON reads either form.
func (t *Transcript) UnmarshalJSON(data []byte) error {
	switch {
	case len(data) == 0:
		return errors.New("empty transcript")
	case data[0] == '{' || data[0] == '[':
		*t = bytes.Clone(data)
	case data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*t = Transcript(DecodeText(s))
	case string(data) == "null":
		*t = nil
	default:
		return fmt.Errorf("a transcript is a JSON object, array or string, not %.20s", data)
	}
	return nil
}

// AppendTranscript appends a transcript's form to dst: raw when it may be, else its text as a string.
func AppendTranscript(dst []byte, t []byte) []byte {
	if raw(t) {
		return append(dst, t...)
	}
	s, _ := json.Marshal(EncodeText(string(t))) // a string: cannot fail
	return append(dst, s...)
}

// raw reports whether a body is carried as the JSON it is: an object or an array with nothing before
// or after it, on one line, valid UTF-8.
func raw(t []byte) bool {
	if len(t) < 2 {
		return false
	}
	last := t[len(t)-1]
	return (t[0] == '{' && last == '}' || t[0] == '[' && last == ']') &&
		bytes.IndexByte(t, '\n') < 0 && utf8.Valid(t) && strictjson.Valid(t)
}

// textPrefix opens a body that is carried (and stored on PostgreSQL) in base64. U+FFFE is a
// noncharacter that no JSON encoder writes; a body that starts with it anyway is encoded too, so
// decoding is exact.
const textPrefix = "\uFFFEsvc-base64:"

// EncodeText returns a body as text that every JSON reader and PostgreSQL's TEXT accept: unchanged
// when it is valid UTF-8 without NUL bytes, otherwise textPrefix and its base64.
func EncodeText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && !strings.HasPrefix(s, textPrefix) {
		return s
	}
	return textPrefix + base64.StdEncoding.EncodeToString([]byte(s))
}

// DecodeText undoes EncodeText.
func DecodeText(s string) string {
	if !strings.HasPrefix(s, textPrefix) {
		return s
	}
	b, err := base64.StdEncoding.DecodeString(s[len(textPrefix):])
	if err != nil {
		return s
	}
	return string(b)
}

// AppendLine appends a run's line, its JSON and a newline, to dst. The fields but the transcripts are
// encoding/json's; the transcripts go raw where they may (AppendTranscript). It fails as json.Marshal
// does, on a time outside the years 0-9999.
func AppendLine(dst []byte, r *Run) ([]byte, error) {
	e := lineEncoders.Get().(*lineEncoder)
	defer lineEncoders.Put(e)
	e.buf.Reset()
	meta := *r
	meta.Request, meta.Response = nil, nil
	if err := e.enc.Encode(&meta); err != nil {
		return dst, err
	}
	j := e.buf.Bytes()
	dst = append(dst, j[:len(j)-2]...) // without its closing brace and newline; the id is always there before it
	if len(r.Request) > 0 {
		dst = AppendTranscript(append(dst, `,"request":`...), r.Request)
	}
	if len(r.Response) > 0 {
		dst = AppendTranscript(append(dst, `,"response":`...), r.Response)
	}
	return append(dst, '}', '\n'), nil
}

// lineEncoder writes a run's fields but its transcripts; kept across runs, as encoding/json's
// Encoder reuses its buffer.
type lineEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var lineEncoders = sync.Pool{New: func() any {
	e := new(lineEncoder)
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// ErrLineTooLong is a line longer than a Lines reader takes.
var ErrLineTooLong = errors.New("a line of the run batch is over the size cap")

// Lines reads newline-delimited JSON one line at a time, each of at most max bytes (without its
// newline), so that a body of any size is read in bounded memory. Blank lines are skipped.
type Lines struct {
	r   *bufio.Reader
	max int
	buf []byte // a line longer than the reader's buffer, gathered
}

// NewLines reads lines of at most max bytes from r.
func NewLines(r io.Reader, max int) *Lines {
	return &Lines{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next line (valid until the next call), io.EOF after the last, ErrLineTooLong for
// a line past the cap, or the reader's error.
func (l *Lines) Next() ([]byte, error) {
	for {
		line, err := l.readLine()
		if err != nil && (err != io.EOF || len(line) == 0) {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			if err == io.EOF {
				return nil, io.EOF
			}
			continue // a blank line
		}
		return line, nil
	}
}

// readLine returns the bytes up to and with the next newline (or to the end: io.EOF with them).
func (l *Lines) readLine() ([]byte, error) {
	part, err := l.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		if len(part) > l.max+2 { // the newline, and a \r before it
			return nil, ErrLineTooLong
		}
		return part, err // in the reader's buffer: no copy
	}
	l.buf = append(l.buf[:0], part...)
	for err == bufio.ErrBufferFull {
		part, err = l.r.ReadSlice('\n')
		if len(l.buf)+len(part) > l.max+2 {
			return nil, ErrLineTooLong
		}
		l.buf = append(l.buf, part...)
	}
	return l.buf, err
}

// DecodeRun reads one run line as encoding/json reads it into a Run, in one walk of the line: the
// walker (strictjson.Members, which judges JSON as json.Valid does) hands over each member, and the
// member is set in its field by the field's kind, as encoding/json sets it (runFields: a string, an
// integer, a bool, or a type's own UnmarshalJSON, such as Transcript's and time.Time's). The fields
// are read from the Run's json tags, so that a field added to a Run is read without a change here. A
// line with a name that is not exactly one of a Run's (a later version's field, a name in other case,
// which encoding/json matches) or a field of a kind not listed is read by encoding/json whole, as is
// a line that is not JSON, so that the answer and its error are always encoding/json's:
// FuzzDecodeRun holds it to json.Unmarshal on any line.
func DecodeRun(line []byte) (Run, error) {
	var r Run
	buf := memberBufs.Get().(*[]strictjson.Member)
	members, ok := strictjson.Members((*buf)[:0], line)
	defer func() {
		clear(members) // holds nothing of the line
		*buf = members[:0]
		memberBufs.Put(buf)
	}()
	if !ok || len(line) == 0 || line[0] != '{' {
		return r, json.Unmarshal(line, &r)
	}
	rv := reflect.ValueOf(&r).Elem()
	for _, m := range members {
		f, ok := runFields[string(m.Name)]
		if !ok {
			var whole Run
			err := json.Unmarshal(line, &whole)
			return whole, err
		}
		if err := f.set(rv.Field(f.index), m.Value); err != nil {
			return Run{}, err
		}
	}
	return r, nil
}

// memberBufs hold the members of a line while DecodeRun reads it (slices of the line, set aside
// before the buffer goes back).
var memberBufs = sync.Pool{New: func() any { b := make([]strictjson.Member, 0, 32); return &b }}

// A runField is how DecodeRun sets one field of a Run: its index and the kind it is read as.
type runField struct {
	index int
	kind  fieldKind
}

type fieldKind uint8

const (
	kindUnmarshaler fieldKind = iota // the field's own UnmarshalJSON, called with the raw value, null included
	kindString
	kindInt
	kindBool
)

// runFields are a Run's fields by json name, each of a kind DecodeRun sets itself.
var runFields = func() map[string]runField {
	out := map[string]runField{}
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	t := reflect.TypeFor[Run]()
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" || !sf.IsExported() {
			continue // not read by a name DecodeRun sees: a member that names it goes to encoding/json
		}
		switch {
		case reflect.PointerTo(sf.Type).Implements(unmarshaler):
			out[name] = runField{i, kindUnmarshaler}
		case sf.Type.Kind() == reflect.String:
			out[name] = runField{i, kindString}
		case sf.Type.Kind() >= reflect.Int && sf.Type.Kind() <= reflect.Int64:
			out[name] = runField{i, kindInt}
		case sf.Type.Kind() == reflect.Bool:
			out[name] = runField{i, kindBool}
		}
	}
	return out
}()

// set sets v from a member's raw value as encoding/json does: null leaves a string, integer or bool
// as it is; a value of another JSON type is an error.
func (f runField) set(v reflect.Value, raw []byte) error {
	if f.kind == kindUnmarshaler {
		return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw)
	}
	if string(raw) == "null" {
		return nil
	}
	switch f.kind {
	case kindString:
		if raw[0] == '"' {
			s, ok := jsonx.Unquote(raw)
			if !ok {
				if err := json.Unmarshal(raw, &s); err != nil {
					return err
				}
			}
			v.SetString(s)
			return nil
		}
	case kindInt:
		if c := raw[0]; c == '-' || c >= '0' && c <= '9' {
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil || v.OverflowInt(n) {
				return &json.UnmarshalTypeError{Value: "number " + string(raw), Type: v.Type()}
			}
			v.SetInt(n)
			return nil
		}
	case kindBool:
		if string(raw) == "true" || string(raw) == "false" {
			v.SetBool(string(raw) == "true")
			return nil
		}
	}
	return &json.UnmarshalTypeError{Value: string(raw[:min(len(raw), 20)]), Type: v.Type()}
}
