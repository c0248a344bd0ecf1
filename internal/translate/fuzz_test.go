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
		chat, info, e := messagesJSON(body)
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

// FuzzResponsesToChat checks that no Responses request body panics the translation (or the
// continuation of it by a later request), that a translation is a JSON object and that a refusal
// explains itself.
func FuzzResponsesToChat(f *testing.F) {
	files, _ := filepath.Glob("testdata/responses/request/*.request.json")
	for _, name := range files {
		b, _ := os.ReadFile(name)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, info, e := responsesJSON(body, Options{Reasoning: ReasoningChatTemplate})
		if e != nil {
			if e.Message == "" {
				t.Fatalf("error without a message (param %q)", e.Param)
			}
		} else if info == nil || !json.Valid(chat) || !bytes.HasPrefix(chat, []byte("{")) {
			t.Fatalf("translation %q is not a JSON object (info %v)", chat, info)
		}
		PreviousResponseID(body)
		next, e := WithPrevious([]byte(`{"input":"next"}`), []Turn{{Request: body, Response: body}})
		if e == nil {
			if _, _, e := responsesJSON(next, Options{}); e != nil && e.Message == "" {
				t.Fatalf("error without a message (param %q)", e.Param)
			}
		}
	})
}

// FuzzResponsesStream feeds lines of input as chunks and checks that nothing panics, that every event
// is typed with its name and numbered in sequence, that a stream that translated without error is
// one a client assembles (openai-node's accumulator rules), and that the response kept for the run
// is valid JSON, also after a failure.
func FuzzResponsesStream(f *testing.F) {
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
	_, info, _ := responsesJSON([]byte(`{"input":"hi","tools":[{"type":"custom","name":"notes"},{"type":"function","name":"f"}]}`), Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewResponsesStream("resp_f", "m", 1, info, 5)
		var events []Event
		failed := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			ev, err := s.Chunk(line)
			events = append(events, ev...)
			if err != nil {
				failed = true
				break
			}
		}
		if !failed {
			ev, err := s.Finish()
			events = append(events, ev...)
			failed = err != nil
		}
		if failed {
			events = append(events, s.Fail("server_error", "the upstream's answer could not be translated")...)
		}
		accumulateResponse(t, events)
		if !json.Valid(s.Response()) {
			t.Fatalf("Response() = %s", s.Response())
		}
	})
}
