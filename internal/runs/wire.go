package runs

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/strictjson"
)

// A run travels, and waits in a spool, as one line of JSON (newline-delimited JSON: AppendLine,
// Lines): the Run's own fields by their json tags, its transcripts as the JSON they almost always
// are. An svc edge's run batch is a header line and one line per run (docs/API.md, "Internal API for
// edge processes"); the recorder's spool keeps the same lines. encoding/json reads every line, of a
// batch of any size, one at a time.

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

// DecodeRun reads one run line, with encoding/json.
func DecodeRun(line []byte) (Run, error) {
	var r Run
	err := json.Unmarshal(line, &r)
	return r, err
}
