package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

type got struct {
	name, data string
}

func readAll(t testing.TB, r io.Reader) ([]got, error) {
	rd := NewReader(r)
	defer rd.Release()
	var out []got
	for {
		ev, err := rd.Next()
		if err != nil {
			return out, err
		}
		out = append(out, got{string(ev.Name), string(ev.Data)})
		if len(out) > 10_000 {
			t.Fatal("too many events")
		}
	}
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []got
		err      error
	}{
		{"openai chunks", "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n",
			[]got{{"", `{"a":1}`}, {"", `{"b":2}`}, {"", "[DONE]"}}, io.EOF},
		{"crlf and names", "event: message_start\r\ndata: {}\r\n\r\nevent: ping\r\ndata: {\"type\":\"ping\"}\r\n\r\n",
			[]got{{"message_start", "{}"}, {"ping", `{"type":"ping"}`}}, io.EOF},
		{"comments, ids and retry are skipped", ": keep-alive\n\nid: 7\nretry: 10\ndata: x\n\n", []got{{"", "x"}}, io.EOF},
		{"multi-line data", "data: a\ndata: b\n\n", []got{{"", "a\nb"}}, io.EOF},
		{"no space after colon", "data:{}\n\n", []got{{"", "{}"}}, io.EOF},
		{"done without blank line", "data: [DONE]", []got{{"", "[DONE]"}}, io.EOF},
		{"name does not leak into the next event", "event: a\n\ndata: x\n\n", []got{{"", "x"}}, io.EOF},
		{"cut inside an event", "data: {\"a\":1}\n\ndata: {\"b\"", []got{{"", `{"a":1}`}}, io.ErrUnexpectedEOF},
		{"empty stream", "", nil, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time too: events must not depend on how the network splits them.
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				evs, err := readAll(t, r)
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if len(evs) != len(tc.want) {
					t.Fatalf("events = %q, want %q", evs, tc.want)
				}
				for i := range evs {
					if evs[i] != tc.want[i] {
						t.Fatalf("event %d = %q, want %q", i, evs[i], tc.want[i])
					}
				}
			}
		})
	}
}

func TestReaderLongLine(t *testing.T) {
	big := strings.Repeat("x", 100_000) // three times the buffer
	evs, err := readAll(t, strings.NewReader("data: "+big+"\n\ndata: after\n\n"))
	if err != io.EOF || len(evs) != 2 || evs[0].data != big || evs[1].data != "after" {
		t.Fatalf("long line: %d events, err %v", len(evs), err)
	}
}

func TestPending(t *testing.T) {
	rd := NewReader(strings.NewReader("data: a\n\ndata: b\n\n"))
	defer rd.Release()
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	if !rd.Pending() {
		t.Fatal("the second event is buffered: Pending must say so")
	}
	rd.Next()
	if rd.Pending() {
		t.Fatal("nothing left: Pending must be false")
	}
}

func TestWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.Data([]byte(`{"a":1}`), true)
	w.Event([]byte("message_stop"), []byte(`{"type":"message_stop"}`), false)
	w.Done()
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	want := "data: {\"a\":1}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want {
		t.Fatalf("body %q, want %q", rec.Body.String(), want)
	}
	// What the writer writes, the reader reads back.
	evs, err := readAll(t, bytes.NewReader(rec.Body.Bytes()))
	if err != io.EOF || len(evs) != 3 || evs[1].name != "message_stop" {
		t.Fatalf("round trip: %q %v", evs, err)
	}
}

// A large event (a Responses stream's response object, with the request's tools) is framed as a small
// one and reads back whole, and is written without being copied into the writer's buffer: the buffer
// stays the size of a small event's frame, not the stream's largest event.
func TestWriterLargeEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	large := []byte(`{"tools":"` + strings.Repeat("x", 20<<10) + `"}`)
	w.Event([]byte("response.created"), large, true)
	w.Event([]byte("response.in_progress"), []byte(`{"a":1}`), false)
	want := "event: response.created\ndata: " + string(large) + "\n\nevent: response.in_progress\ndata: {\"a\":1}\n\n"
	if rec.Body.String() != want {
		t.Fatalf("body (%d bytes) is not the two events framed (%d bytes)", rec.Body.Len(), len(want))
	}
	if cap(w.buf) >= 1<<10 {
		t.Fatalf("the writer's buffer grew to %d bytes for a %d-byte event", cap(w.buf), len(large))
	}
	evs, err := readAll(t, bytes.NewReader(rec.Body.Bytes()))
	if err != io.EOF || len(evs) != 2 || evs[0].data != string(large) {
		t.Fatalf("read back: %d events, %v", len(evs), err)
	}
}

// Data that holds line breaks (an upstream's JSON split over several "data:" lines, as the Reader
// joins them) is written one "data:" line per line, and reads back joined: the stream stays well formed.
func TestWriterMultilineData(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.Data([]byte("{\"a\":\n1}"), true)
	w.Event([]byte("e"), []byte("{\r\n\"b\":\r2}"), false)
	want := "data: {\"a\":\ndata: 1}\n\nevent: e\ndata: {\ndata: \"b\":\ndata: 2}\n\n"
	if rec.Body.String() != want {
		t.Fatalf("body %q, want %q", rec.Body.String(), want)
	}
	evs, err := readAll(t, bytes.NewReader(rec.Body.Bytes()))
	if err != io.EOF || len(evs) != 2 || evs[0].data != "{\"a\":\n1}" || evs[1].data != "{\n\"b\":\n2}" {
		t.Fatalf("read back %q %v", evs, err)
	}
}

// FuzzReader: any input ends in EOF or an error without panicking, never yields more events than it
// has blank lines plus one, and a stream written by Writer reads back as written.
func FuzzReader(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "event: x\r\ndata: [DONE]", ":\n\ndata:\ndata:\n\n", "data: a\rdata: b\n\n", "\n\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		evs, err := readAll(t, bytes.NewReader(in))
		if err == nil {
			t.Fatal("readAll must end in an error")
		}
		if n := bytes.Count(in, []byte("\n")) + 1; len(evs) > n {
			t.Fatalf("%d events from %d lines", len(evs), n)
		}
		// Round trip: data without line breaks survives the writer and the reader.
		data := bytes.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, in)
		if len(data) == 0 || string(data) == "[DONE]" {
			return
		}
		rec := httptest.NewRecorder()
		NewWriter(rec).Data(data, false)
		back, err := readAll(t, bytes.NewReader(rec.Body.Bytes()))
		if err != io.EOF || len(back) != 1 || back[0].data != string(data) {
			t.Fatalf("round trip of %q: %q %v", data, back, err)
		}
	})
}
