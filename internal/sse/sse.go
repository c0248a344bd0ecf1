// Package sse reads and writes server-sent events: the one stream codec of every edge stream (chat
// relay, Messages translation and passthrough) and of the runtime's upstream streams.
package sse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// Event is one server-sent event. Its slices are valid until the next call to Reader.Next.
type Event struct {
	Name []byte // the "event:" field; nil when the event has none
	Data []byte // the "data:" lines, joined with "\n"
}

// Done reports whether the event is OpenAI's end-of-stream marker "data: [DONE]".
func (e Event) Done() bool { return string(e.Data) == "[DONE]" }

// MaxLine and MaxEvent bound what one stream may make a Reader hold (docs/OPERATIONS.md, "Bounds"): a
// line, without its line ending, and an event's data (its "data:" lines joined) of at most 16 MiB each.
// An upstream that sends more (a server that crashed mid-line, a proxy's error page without newlines)
// ends its stream with ErrTooLong; past the bound nothing more of it is read or kept.
const (
	MaxLine  = 16 << 20
	MaxEvent = 16 << 20
)

// ErrTooLong is returned by Next for a line longer than MaxLine or an event longer than MaxEvent.
// The stream cannot be read further.
var ErrTooLong = errors.New("sse: a line or an event is longer than 16 MiB")

// Reader reads events from a stream. It allocates nothing per event once its buffers have grown.
type Reader struct {
	rd   *bufio.Reader
	name []byte
	data []byte
	long []byte
	// maxLine and maxEvent are MaxLine and MaxEvent, smaller in tests (newReaderLimit).
	maxLine, maxEvent int
	failed            error // ErrTooLong, once returned: every later Next returns it
	unpooled          bool  // rd is not from the pool (newReaderLimit): Release drops it
}

// readers recycles 32 KiB buffers: a fresh buffer per stream was once most of the edge's garbage.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// NewReader returns a Reader on r. Call Release when done so that its buffer is reused.
func NewReader(r io.Reader) *Reader {
	rd := readers.Get().(*bufio.Reader)
	rd.Reset(r)
	return &Reader{rd: rd, maxLine: MaxLine, maxEvent: MaxEvent}
}

// Release returns the Reader's buffer to the pool; the Reader must not be used afterwards.
func (r *Reader) Release() {
	if r.rd == nil {
		return
	}
	r.rd.Reset(nil)
	if !r.unpooled {
		readers.Put(r.rd)
	}
	r.rd = nil
}

// ErrReleased is returned by Next after Release.
var ErrReleased = errors.New("sse: reader released")

// Next returns the next event that carries data. Events without data (comments, keep-alives, a bare
// "event:" line) are skipped, as the SSE specification says. A "data: [DONE]" line is returned at once,
// even without the blank line that should follow it, since some servers omit it. At the end of the
// stream Next returns io.EOF, or io.ErrUnexpectedEOF when the stream stopped inside an event; a line or
// an event over its bound is ErrTooLong.
func (r *Reader) Next() (Event, error) {
	if r.rd == nil {
		return Event{}, ErrReleased
	}
	if r.failed != nil {
		return Event{}, r.failed
	}
	r.name, r.data = r.name[:0], r.data[:0]
	hasName, hasData := false, false
	for {
		line, err := r.line()
		if err != nil {
			if err == ErrTooLong {
				r.failed = err
				return Event{}, err
			}
			if !errors.Is(err, io.EOF) {
				return Event{}, err
			}
			if len(line) == 0 {
				if hasData {
					// The stream ended without the blank line that dispatches the event.
					return Event{}, io.ErrUnexpectedEOF
				}
				return Event{}, io.EOF
			}
			// The last line lacked its newline: use it; the next call reports the end.
		}
		if len(line) == 0 {
			if hasData {
				ev := Event{Data: r.data}
				if hasName {
					ev.Name = r.name
				}
				return ev, nil
			}
			r.name, hasName = r.name[:0], false
			continue
		}
		// "data:" first: it is nearly every line of a token stream.
		var field, value []byte
		if len(line) >= 5 && string(line[:5]) == "data:" {
			field, value = line[:4], line[5:]
		} else if f, v, ok := bytes.Cut(line, colon); ok {
			field, value = f, v
		} else {
			field = line
		}
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data":
			if len(r.data)+len(value) >= r.maxEvent && (hasData || len(value) > r.maxEvent) {
				r.failed = ErrTooLong
				return Event{}, ErrTooLong
			}
			if hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			hasData = true
			if string(r.data) == "[DONE]" {
				return Event{Data: r.data}, nil
			}
		case "event":
			r.name = append(r.name[:0], value...)
			hasName = true
		}
		// "id:", "retry:", comments (": ...") and unknown fields carry nothing svc uses.
		if err != nil {
			if hasData {
				return Event{}, io.ErrUnexpectedEOF
			}
			return Event{}, io.EOF
		}
	}
}

var colon = []byte(":")

// line returns the next line without its line ending ("\n", "\r\n" or a lone "\r" before "\n"), or
// ErrTooLong once it is longer than maxLine: the rest of such a line is never read.
func (r *Reader) line() ([]byte, error) {
	line, err := r.rd.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the buffer: gather the rest of it, up to the bound (and its line ending).
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(r.long) > r.maxLine+2 {
				return nil, ErrTooLong
			}
			line, err = r.rd.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if contentLen(line) > r.maxLine {
		return nil, ErrTooLong
	}
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	return line, err
}

// contentLen is the length of a line as read without its ending: a "\n" and a "\r" before it. A run of
// "\r" before them counts, so that a stream of "\r" alone is bounded too.
func contentLen(line []byte) int {
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	if n > 0 && line[n-1] == '\r' {
		n--
	}
	return n
}

// Pending reports whether a whole event is already buffered, so that a writer can hold its flush
// until the next event has been written too: events that arrive together leave together.
func (r *Reader) Pending() bool {
	if r.rd == nil {
		return false
	}
	n := r.rd.Buffered()
	if n == 0 {
		return false
	}
	b, _ := r.rd.Peek(n)
	return bytes.Contains(b, []byte("\n\n")) || bytes.Contains(b, []byte("\r\n\r\n"))
}

// Writer writes an event stream to an HTTP response, flushing each event at once unless told that
// another one follows.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	// Batch, when set, is the connection under w (HTTP/1): the events written before a flush are held
	// there and leave in one write (BatchOf).
	Batch Batcher
	buf   []byte // one event, framed, so that it is written in one call
	// OnStart, when set, is called as the stream's headers are sent (time to first event).
	OnStart func()
}

// NewWriter returns a Writer on w. Nothing is sent until the first event or Start.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// Started reports whether the stream's headers have been sent.
func (s *Writer) Started() bool { return s.started }

// Start sends the headers of an event stream (status 200), once.
func (s *Writer) Start() {
	if s.started {
		return
	}
	s.started = true
	if s.OnStart != nil {
		s.OnStart()
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // keep nginx-style proxies in front from buffering the stream
	s.w.WriteHeader(http.StatusOK)
}

var (
	dataPrefix  = []byte("data: ")
	eventPrefix = []byte("event: ")
	newline     = []byte("\n")
	eventEnd    = []byte("\n\n")
	doneEvent   = []byte("data: [DONE]\n\n")
)

// Data writes one unnamed event whose data is b. more says that another event follows at once, so the
// flush is left to it.
func (s *Writer) Data(b []byte, more bool) error {
	s.Start()
	s.buf = append(appendData(s.buf[:0], b), eventEnd...)
	_, err := s.w.Write(s.buf)
	if !more {
		s.Flush()
	}
	return err
}

// Event writes one named event and flushes it unless more events follow at once. The name must be one
// line.
func (s *Writer) Event(name, b []byte, more bool) error {
	s.Start()
	s.buf = append(append(append(s.buf[:0], eventPrefix...), name...), newline...)
	var err error
	if len(b) > directData && bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		// Large data (a Responses stream's response object, with the request's tools) is written as it
		// is, between its frame's two parts, not copied into buf: buf would grow to each stream's largest
		// event, for every stream. Its batch passes Go's buffers, and is held (hold) to leave in one write.
		s.hold()
		_, err = s.w.Write(append(s.buf, dataPrefix...))
		if err == nil {
			_, err = s.w.Write(b)
		}
		if err == nil {
			_, err = s.w.Write(eventEnd)
		}
	} else {
		s.buf = append(appendData(s.buf, b), eventEnd...)
		_, err = s.w.Write(s.buf)
	}
	if !more {
		s.Flush()
	}
	return err
}

// directData is the length of an event's data from which Event writes it without copying it.
const directData = 1 << 10

// appendData appends b as the data of an event: one "data:" line, or one per line of b when it holds
// line breaks (data relayed from an upstream that split its JSON over several "data:" lines), so that
// the stream stays well formed whatever it carries.
func appendData(buf, b []byte) []byte {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 { // JSON from encoding/json, nearly always
		return append(append(buf, dataPrefix...), b...)
	}
	for {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			return append(append(buf, dataPrefix...), b...)
		}
		buf = append(append(append(buf, dataPrefix...), b[:i]...), '\n')
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
}

// Done writes OpenAI's end-of-stream marker without flushing it: the handler returns next, and Go's
// HTTP server then sends it with the end of the chunked answer, in one write instead of two (clients,
// the OpenAI SDKs among them, read a stream to its end, not to [DONE]).
func (s *Writer) Done() {
	s.Start()
	s.w.Write(doneEvent)
}

// Flush sends what has been written.
func (s *Writer) Flush() {
	s.rc.Flush()
	s.Unhold()
}

// hold holds the connection's writes until the next flush (or Unhold): Go's HTTP/1 server buffers 4
// KiB of an answer, and a batch of events larger than that (a Responses stream's first, with its two
// copies of the response) left in two to four writes of the socket instead of one.
func (s *Writer) hold() {
	if s.Batch != nil {
		s.Batch.Hold()
	}
}

// Unhold sends what the connection holds, if anything: the writer's owner calls it before its handler
// returns (an event written with more to follow, and no flush after it, leaves with the end of the
// answer, which Go's server writes once the handler has returned).
func (s *Writer) Unhold() {
	if s.Batch != nil {
		s.Batch.Release()
	}
}

// A Batcher holds a connection's writes from Hold to Release and sends them then in one write; a Hold
// while holding and a Release with nothing held do nothing. Only
// the goroutine that writes the connection's answers may call it: HTTP/1's serving goroutine, in the
// handler of the request it is serving (BatchOf).
type Batcher interface {
	Hold()
	Release() error
}

type batcherKey struct{}

// WithBatcher returns ctx carrying b, the batcher of the connection ctx belongs to (http.Server's
// ConnContext).
func WithBatcher(ctx context.Context, b Batcher) context.Context {
	return context.WithValue(ctx, batcherKey{}, b)
}

// BatchOf returns the batcher of r's connection, for the writer of r's own answer only (a request
// derived from r, answered to another writer, keeps r's context): nil for HTTP/2 (its connection
// carries other streams' frames, written by another goroutine) or a connection with none.
func BatchOf(r *http.Request) Batcher {
	if r.ProtoMajor != 1 {
		return nil
	}
	b, _ := r.Context().Value(batcherKey{}).(Batcher)
	return b
}
