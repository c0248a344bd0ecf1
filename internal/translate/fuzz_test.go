package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzMessagesToChat checks that no request body panics the translation, that a translation is always
// a JSON object, and that a refusal always explains itself.
func FuzzMessagesToChat(f *testing.F) {
	files, _ := filepath.Glob("testdata/request/*.messages.json")
	for _, name := range files {
		b, _ := os.ReadFile(name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, info, e := MessagesToChat(body)
		if e != nil {
			if e.Message == "" {
				t.Fatalf("error without a message (param %q)", e.Param)
			}
			return
		}
		if info == nil || !json.Valid(chat) || !bytes.HasPrefix(chat, []byte("{")) {
			t.Fatalf("translation %q is not a JSON object (info %v)", chat, info)
		}
	})
}

// FuzzStreamChunk feeds lines of input as chunks and checks that nothing panics and that every event
// and the assembled message are valid JSON, each event's data typed with its name.
func FuzzStreamChunk(f *testing.F) {
	files, _ := filepath.Glob("testdata/stream/*.chunks")
	for _, name := range files {
		b, _ := os.ReadFile(name)
		var lines [][]byte
		for _, l := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok && string(d) != "[DONE]" {
				lines = append(lines, d)
			}
		}
		f.Add(bytes.Join(lines, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewStream("m", &RequestInfo{StopSequences: []string{"###"}, Thinking: true}, 5)
		var events []Event
		failed := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			ev, err := s.Chunk(line)
			if err != nil {
				failed = true
				continue
			}
			events = append(events, ev...)
		}
		ev, err := s.Finish()
		if err == nil {
			events = append(events, ev...)
		}
		if !failed && err == nil && s.asm.finish != "length" {
			// A stream that translated without error is one a client assembles: Anthropic's order,
			// and tool inputs that parse.
			accumulate(t, events)
		}
		for _, e := range events {
			var d struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(e.Data, &d) != nil || d.Type != e.Name {
				t.Fatalf("event %s has data %s", e.Name, e.Data)
			}
		}
		if !json.Valid(s.Message()) {
			t.Fatalf("Message() = %s", s.Message())
		}
	})
}
