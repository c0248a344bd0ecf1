package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// newReaderLimit returns a Reader with a buffer of size bytes and bounds of max bytes on lines and
// events, so that fuzzing reaches the bounds with small inputs.
func newReaderLimit(r io.Reader, size, max int) *Reader {
	return &Reader{rd: bufio.NewReaderSize(r, size), maxLine: max, maxEvent: max, unpooled: true}
}

// endless is a stream that never ends: prefix, then fill for ever. It counts what was read of it.
type endless struct {
	prefix []byte
	fill   byte
	read   int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := copy(p, e.prefix)
	e.prefix = e.prefix[n:]
	for i := n; i < len(p); i++ {
		p[i] = e.fill
	}
	e.read += int64(len(p))
	return len(p), nil
}

// A line that never ends (an upstream that streams "data: BBBB…" without a newline) is cut at MaxLine:
// Next returns ErrTooLong having read little more than the bound, and keeps returning it.
func TestReaderLineBound(t *testing.T) {
	src := &endless{prefix: []byte("data: {\"a\":1}\n\ndata: "), fill: 'B'}
	rd := NewReader(src)
	defer rd.Release()
	if ev, err := rd.Next(); err != nil || string(ev.Data) != `{"a":1}` {
		t.Fatalf("first event %q %v", ev.Data, err)
	}
	if _, err := rd.Next(); err != ErrTooLong {
		t.Fatalf("endless line: err %v, want ErrTooLong", err)
	}
	if src.read > MaxLine+1<<20 {
		t.Fatalf("read %d bytes of an endless line, want about MaxLine (%d)", src.read, MaxLine)
	}
	if _, err := rd.Next(); err != ErrTooLong {
		t.Fatalf("after the bound: err %v, want ErrTooLong again", err)
	}
}

// An event of many short data lines is bounded as a whole, and a line or event of exactly the bound
// is read; one byte more is not.
func TestReaderEventBound(t *testing.T) {
	line := "data: " + strings.Repeat("x", 1<<20-1) + "\n" // 1 MiB of data a line, with the joining "\n"
	over := strings.Repeat(line, 17) + "\n"
	if _, err := readAll(t, strings.NewReader(over)); err != ErrTooLong {
		t.Fatalf("17 MiB event: err %v, want ErrTooLong", err)
	}
	exact := "data: " + strings.Repeat("y", MaxLine-len("data: ")) + "\r\n\r\n"
	evs, err := readAll(t, strings.NewReader(exact))
	if err != io.EOF || len(evs) != 1 || len(evs[0].data) != MaxLine-6 {
		t.Fatalf("a line of exactly MaxLine: %d events, err %v", len(evs), err)
	}
	if _, err := readAll(t, strings.NewReader("data: y"+exact[5:])); err != ErrTooLong {
		t.Fatalf("a line of MaxLine+1: err %v, want ErrTooLong", err)
	}
}

// FuzzReaderBounded: with small bounds, a Reader holds no more than its bounds allow (its buffers'
// capacity, each event's data), reads what an unbounded Reader reads as long as the input stays
// within the bounds, and returns ErrTooLong only for an input that has a line or an event past them.
func FuzzReaderBounded(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "data: 0123456789abcdef0123456789abcdef0123456789\n\n",
		"data: a\ndata: b\ndata: c\ndata: d\ndata: e\ndata: f\ndata: g\ndata: h\n\n", ": " + strings.Repeat("c", 80) + "\n\ndata: x\n\n",
		"data: " + strings.Repeat("z", 200), "event: e\r\ndata: [DONE]\r\n\r\n"} {
		f.Add([]byte(s))
	}
	const size, max = 16, 40
	f.Fuzz(func(t *testing.T, in []byte) {
		want, wantErr := readAll(t, bytes.NewReader(in))
		rd := newReaderLimit(bytes.NewReader(in), size, max)
		var got []got
		var err error
		for {
			var ev Event
			ev, err = rd.Next()
			if cap(rd.long) > 2*(max+2+size) || cap(rd.data) > 2*(max+1) {
				t.Fatalf("buffers grew to %d and %d bytes with bounds of %d", cap(rd.long), cap(rd.data), max)
			}
			if err != nil {
				break
			}
			if len(ev.Data) > max {
				t.Fatalf("an event of %d bytes with a bound of %d", len(ev.Data), max)
			}
			got = append(got, struct{ name, data string }{string(ev.Name), string(ev.Data)})
		}
		if len(got) > len(want) {
			t.Fatalf("bounded read %d events, unbounded %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("event %d: bounded %q, unbounded %q", i, got[i], want[i])
			}
		}
		if !errors.Is(err, ErrTooLong) {
			if !errors.Is(err, wantErr) || len(got) != len(want) {
				t.Fatalf("bounded: %d events, %v; unbounded: %d events, %v", len(got), err, len(want), wantErr)
			}
			return
		}
		// Past the bounds: a line longer than max, or data lines of one event (dispatched or not) that
		// join to more than max.
		past, joined := false, -1
		for _, l := range bytes.Split(in, []byte("\n")) {
			past = past || len(bytes.TrimSuffix(l, []byte("\r"))) > max
			l = bytes.TrimRight(l, "\r")
			switch {
			case len(l) == 0:
				joined = -1
			default:
				field, value, _ := bytes.Cut(l, []byte(":"))
				if string(field) != "data" {
					continue
				}
				if v := len(bytes.TrimPrefix(value, []byte(" "))); joined < 0 {
					joined = v
				} else {
					joined += 1 + v
				}
				past = past || joined > max
			}
		}
		if !past {
			t.Fatalf("ErrTooLong for an input within the bounds: %q", in)
		}
	})
}
