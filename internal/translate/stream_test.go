package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	ssecodec "github.com/svcdev/svc/internal/sse"
)

// sse reads recorded server-sent events with the edge's own reader.
func sse(t *testing.T, text []byte) []Event {
	t.Helper()
	rd := ssecodec.NewReader(bytes.NewReader(text))
	defer rd.Release()
	var out []Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("recorded stream: %v", err)
		}
		out = append(out, Event{Name: string(ev.Name), Data: append([]byte(nil), ev.Data...)})
	}
}

// run feeds a recorded upstream stream to a Stream and returns every event, as the edge would.
func run(t *testing.T, s *Stream, chunks []Event) []Event {
	t.Helper()
	var all []Event
	for _, c := range chunks {
		if string(c.Data) == "[DONE]" {
			break
		}
		ev, err := s.Chunk(c.Data)
		if err != nil {
			t.Fatalf("chunk %s: %v", c.Data, err)
		}
		all = append(all, ev...)
	}
	ev, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return append(all, ev...)
}

// accumulate assembles a message from events the way @anthropic-ai/sdk's MessageStream does
// (content addressed by index, tool input parsed from the concatenated partial_json at
// content_block_stop, usage overwritten by message_delta), and checks the order Anthropic keeps:
// message_start then ping first, one block open at a time with indexes counting from 0, message_stop
// last.
func accumulate(t *testing.T, events []Event) map[string]any {
	t.Helper()
	var msg map[string]any
	var content []map[string]any
	bufs := map[int]string{}
	open := -1
	for i, e := range events {
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if d["type"] != e.Name {
			t.Fatalf("event %d is named %q but its data has type %v", i, e.Name, d["type"])
		}
		idx := -1
		if f, ok := d["index"].(float64); ok {
			idx = int(f)
		}
		switch e.Name {
		case "message_start":
			if i != 0 {
				t.Fatalf("message_start at %d", i)
			}
			msg = d["message"].(map[string]any)
		case "ping":
			if i != 1 {
				t.Fatalf("ping at %d, want right after message_start", i)
			}
		case "content_block_start":
			if open != -1 || idx != len(content) {
				t.Fatalf("event %d: block %d starts while block %d is open (%d started)", i, idx, open, len(content))
			}
			open = idx
			content = append(content, d["content_block"].(map[string]any))
		case "content_block_delta":
			if idx != open {
				t.Fatalf("event %d: delta for block %d while block %d is open", i, idx, open)
			}
			delta := d["delta"].(map[string]any)
			switch delta["type"] {
			case "text_delta":
				content[idx]["text"] = content[idx]["text"].(string) + delta["text"].(string)
			case "thinking_delta":
				if content[idx]["type"] != "thinking" {
					t.Fatalf("event %d: thinking_delta for a %v block", i, content[idx]["type"])
				}
				content[idx]["thinking"] = content[idx]["thinking"].(string) + delta["thinking"].(string)
			case "signature_delta":
				if content[idx]["type"] != "thinking" || i+1 >= len(events) || events[i+1].Name != "content_block_stop" {
					t.Fatalf("event %d: signature_delta for a %v block, or not just before its content_block_stop", i, content[idx]["type"])
				}
				content[idx]["signature"] = delta["signature"]
			case "input_json_delta":
				if content[idx]["type"] != "tool_use" {
					t.Fatalf("event %d: input_json_delta for a %v block", i, content[idx]["type"])
				}
				bufs[idx] += delta["partial_json"].(string)
			default:
				t.Fatalf("event %d: delta type %v", i, delta["type"])
			}
		case "content_block_stop":
			if idx != open {
				t.Fatalf("event %d: stop for block %d while block %d is open", i, idx, open)
			}
			open = -1
			if buf := bufs[idx]; buf != "" {
				var in any
				if err := json.Unmarshal([]byte(buf), &in); err != nil {
					t.Fatalf("block %d: input %q: %v", idx, buf, err)
				}
				content[idx]["input"] = in
			}
		case "message_delta":
			delta := d["delta"].(map[string]any)
			msg["stop_reason"], msg["stop_sequence"] = delta["stop_reason"], delta["stop_sequence"]
			u := d["usage"].(map[string]any)
			mu := msg["usage"].(map[string]any)
			mu["output_tokens"] = u["output_tokens"]
			if v, ok := u["input_tokens"]; ok {
				mu["input_tokens"] = v
			}
		case "message_stop":
			if i != len(events)-1 || open != -1 {
				t.Fatalf("message_stop at %d of %d, block %d open", i, len(events), open)
			}
		default:
			t.Fatalf("event %d: unknown type %q", i, e.Name)
		}
	}
	if msg == nil {
		t.Fatal("no message_start")
	}
	msg["content"] = content
	if content == nil {
		msg["content"] = []map[string]any{}
	}
	return msg
}

func TestStream(t *testing.T) {
	cases := []struct {
		name     string
		stops    []string
		estimate int
		usage    Usage
		thinking bool
	}{
		{"reasoning", nil, 4, Usage{InputTokens: 9, OutputTokens: 6}, true},
		{"reasoning_hidden", nil, 4, Usage{InputTokens: 9, OutputTokens: 6}, false},
		{"text_usage", nil, 3, Usage{InputTokens: 12, OutputTokens: 5}, false},
		{"text_no_usage", nil, 3, Usage{InputTokens: 3, OutputTokens: 3}, false},
		{"tool_streamed", nil, 57, Usage{InputTokens: 230, OutputTokens: 32}, false},
		{"parallel_tools", nil, 20, Usage{InputTokens: 80, OutputTokens: 40}, false},
		{"interleaved_tools", nil, 20, Usage{InputTokens: 20, OutputTokens: 5}, false},
		{"stop_sequence", []string{"END", "###"}, 4, Usage{InputTokens: 9, OutputTokens: 5}, false},
		{"length", nil, 2, Usage{InputTokens: 7, OutputTokens: 3}, false},
		{"continuous_usage", nil, 99, Usage{InputTokens: 15, OutputTokens: 2}, false},
		{"tool_finish_stop", nil, 20, Usage{InputTokens: 20, OutputTokens: 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chunks, err := os.ReadFile("testdata/stream/" + c.name + ".chunks")
			if err != nil {
				t.Fatal(err)
			}
			wantText, err := os.ReadFile("testdata/stream/" + c.name + ".events")
			if err != nil {
				t.Fatal(err)
			}
			s := NewStream("llama-3.1-8b", &RequestInfo{StopSequences: c.stops, MaxTokens: 100, Thinking: c.thinking}, c.estimate)
			if s.Started() {
				t.Fatal("started before any chunk")
			}
			got := run(t, s, sse(t, chunks))
			want := sse(t, wantText)
			for i := 0; i < len(got) || i < len(want); i++ {
				switch {
				case i >= len(got):
					t.Fatalf("event %d missing: want %s %s", i, want[i].Name, want[i].Data)
				case i >= len(want):
					t.Fatalf("event %d extra: %s %s", i, got[i].Name, got[i].Data)
				case got[i].Name != want[i].Name || !jsonEqual(t, got[i].Data, want[i].Data):
					t.Fatalf("event %d:\n got %s %s\nwant %s %s", i, got[i].Name, got[i].Data, want[i].Name, want[i].Data)
				}
			}
			if !s.Started() {
				t.Error("Started() = false after events were sent")
			}
			if s.Usage() != c.usage {
				t.Errorf("Usage() = %+v, want %+v", s.Usage(), c.usage)
			}
			assembled, _ := json.Marshal(accumulate(t, got))
			if !jsonEqual(t, s.Message(), assembled) {
				t.Errorf("Message() = %s\nclient assembles %s", s.Message(), assembled)
			}
		})
	}
}

func TestStreamWithoutChunks(t *testing.T) {
	s := NewStream("m", &RequestInfo{}, 7)
	ev, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ev {
		names = append(names, e.Name)
	}
	if strings.Join(names, " ") != "message_start ping message_delta message_stop" {
		t.Fatalf("events %v", names)
	}
	msg := accumulate(t, ev)
	if msg["stop_reason"] != "end_turn" || !strings.HasPrefix(msg["id"].(string), "msg_") {
		t.Errorf("message %v", msg)
	}
	if again, _ := s.Finish(); again != nil {
		t.Errorf("second Finish sent %d events", len(again))
	}
}

// A stream cut short keeps what arrived, for the run: the text, the tool call so far (its partial
// arguments as a string), counted usage, no stop_reason.
func TestStreamCutMessage(t *testing.T) {
	s := NewStream("m", &RequestInfo{}, 11)
	for _, c := range []string{
		`{"id":"chatcmpl-cut","choices":[{"index":0,"delta":{"role":"assistant","content":"Looking"}}]}`,
		`{"id":"chatcmpl-cut","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","function":{"name":"grep","arguments":"{\"pattern\": \"TO"}}]}}]}`,
	} {
		if _, err := s.Chunk([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"id":"msg_cut","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Looking"},` +
		`{"type":"tool_use","id":"call_9","name":"grep","input":"{\"pattern\": \"TO"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":11,"output_tokens":2}}`
	if !jsonEqual(t, s.Message(), []byte(want)) {
		t.Errorf("Message() = %s\nwant %s", s.Message(), want)
	}
}

func TestStreamBufferedUntilNamed(t *testing.T) {
	// A server that names the function only in a later delta: the block waits for the name.
	s := NewStream("m", &RequestInfo{}, 1)
	ev1, _ := s.Chunk([]byte(`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{\"a\""}}]}}]}`))
	ev2, _ := s.Chunk([]byte(`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":":1}"}}]}}]}`))
	if len(ev1) != 2 {
		t.Fatalf("first chunk sent %d events, want only message_start and ping", len(ev1))
	}
	if len(ev2) != 2 || !strings.Contains(string(ev2[0].Data), `"name":"f"`) || !strings.Contains(string(ev2[1].Data), `"partial_json":"{\"a\":1}"`) {
		t.Fatalf("second chunk: %q", ev2)
	}
}

func TestStreamIgnoresOtherChoices(t *testing.T) {
	s := NewStream("m", &RequestInfo{}, 1)
	ev, err := s.Chunk([]byte(`{"id":"x","choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, e := range ev {
		all = append(all, e.Data...)
	}
	if strings.Contains(string(all), "other") || !strings.Contains(string(all), "mine") {
		t.Errorf("events %s", all)
	}
}

func TestStreamReusedIndexStartsNewCall(t *testing.T) {
	// Some servers number every call 0; a new id means a new call.
	s := NewStream("m", &RequestInfo{}, 1)
	chunks := []Event{
		{Data: []byte(`{"id":"r","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}`)},
		{Data: []byte(`{"id":"r","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":" "}}]}}]}`)},
		{Data: []byte(`{"id":"r","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"x\":2}"}}]},"finish_reason":"tool_calls"}]}`)},
	}
	msg := accumulate(t, run(t, s, chunks))
	content := msg["content"].([]map[string]any)
	if len(content) != 2 || content[0]["id"] != "a" || content[1]["id"] != "b" || content[1]["name"] != "g" {
		t.Errorf("content %v", content)
	}
}

func TestStreamErrors(t *testing.T) {
	cases := []struct {
		name        string
		chunks      []string
		atFinish    bool
		invalidArgs bool
		says        string
	}{
		{"not JSON", []string{`{"id":`}, false, false, "not valid"},
		{"error chunk", []string{`{"error":{"object":"error","message":"out of KV cache","code":500}}`}, false, false, "out of KV cache"},
		{"arguments not an object", []string{
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"[1]"}}]},"finish_reason":"tool_calls"}]}`,
		}, true, true, "not a JSON object"},
		{"arguments unfinished", []string{
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":"tool_calls"}]}`,
		}, true, true, "not a JSON object"},
		{"arguments after complete", []string{
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`,
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"d","function":{"name":"g","arguments":"{}"}}]}}]}`,
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"late\":1}"}}]}}]}`,
		}, false, true, "after they were complete"},
		{"next call while arguments are no object", []string{
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"\"str\""}}]}}]}`,
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"d","function":{"name":"g","arguments":"{}"}}]}}]}`,
		}, false, true, "not a JSON object"},
		{"tool never named", []string{
			`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		}, true, false, "without naming"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewStream("m", &RequestInfo{}, 1)
			var err error
			for i, ch := range c.chunks {
				_, err = s.Chunk([]byte(ch))
				if err != nil {
					if c.atFinish || i != len(c.chunks)-1 {
						t.Fatalf("chunk %d: %v", i, err)
					}
				}
			}
			if c.atFinish {
				if err != nil {
					t.Fatal(err)
				}
				_, err = s.Finish()
			}
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrInvalidToolArguments) != c.invalidArgs {
				t.Errorf("errors.Is(%v, ErrInvalidToolArguments) = %v", err, !c.invalidArgs)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
		})
	}
}

func TestStreamLengthKeepsPartialArguments(t *testing.T) {
	// Cut at max_tokens inside the arguments: Anthropic sends what there is and stop_reason max_tokens.
	s := NewStream("m", &RequestInfo{}, 1)
	if _, err := s.Chunk([]byte(`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\": \"lo"}}]},"finish_reason":"length"}]}`)); err != nil {
		t.Fatal(err)
	}
	ev, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	last := ev[len(ev)-2]
	if last.Name != "message_delta" || !strings.Contains(string(last.Data), `"stop_reason":"max_tokens"`) {
		t.Errorf("last events %q", ev)
	}
}

// An error inside the first chunk still returns message_start (and what came before the problem), so
// that a client told Started() gets a well-formed stream before the error event.
func TestStreamErrorKeepsEventsBeforeIt(t *testing.T) {
	s := NewStream("m", &RequestInfo{}, 1)
	ev, err := s.Chunk([]byte(`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[` +
		`{"index":0,"id":"a","function":{"name":"f","arguments":"\"str\""}},{"index":1,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}`))
	if !errors.Is(err, ErrInvalidToolArguments) || !s.Started() {
		t.Fatalf("err %v, started %v", err, s.Started())
	}
	var names []string
	for _, e := range ev {
		names = append(names, e.Name)
	}
	if strings.Join(names, " ") != "message_start ping content_block_start content_block_delta" {
		t.Errorf("events before the error: %v", names)
	}
}

// A thinking block's signature is svc's HMAC of the text the client assembled, under the request's
// secret, so the block verifies when it comes back in the history; with display "omitted" the client
// gets no thinking text, and the signature of none.
func TestStreamThinkingSignature(t *testing.T) {
	chunks, _ := os.ReadFile("testdata/stream/reasoning.chunks")
	for _, omitted := range []bool{false, true} {
		_, info, e := messagesJSON([]byte(`{"max_tokens":10,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"hi"}]}`),
			Options{Secret: []byte("k1")})
		if e != nil {
			t.Fatal(e)
		}
		info.ThinkingOmitted = omitted
		msg := accumulate(t, run(t, NewStream("m", info, 1), sse(t, chunks)))
		block := msg["content"].([]map[string]any)[0]
		want := "The user greets me."
		if omitted {
			want = ""
		}
		if block["type"] != "thinking" || block["thinking"] != want {
			t.Fatalf("omitted=%v: first block %v", omitted, block)
		}
		sig, _ := block["signature"].(string)
		if !verifyThinking([]byte("k1"), want, sig) {
			t.Errorf("omitted=%v: signature %q does not verify", omitted, sig)
		}
		// What the client assembled goes back in the history as the assistant's reasoning.
		history, _ := json.Marshal(map[string]any{"max_tokens": 10, "messages": []any{
			map[string]any{"role": "user", "content": "hi"},
			map[string]any{"role": "assistant", "content": msg["content"]},
			map[string]any{"role": "user", "content": "and?"}}})
		chat, _, e := messagesJSON(history, Options{Secret: []byte("k1")})
		if e != nil {
			t.Fatalf("omitted=%v: the assembled message does not go back: %v", omitted, e)
		}
		if got := strings.Contains(string(chat), `"reasoning_content":"The user greets me."`); got == omitted {
			t.Errorf("omitted=%v: history %s", omitted, chat)
		}
	}
}
