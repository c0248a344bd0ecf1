package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadStreamEndsPerSurface: each surface's stream must end with its own last event (chat's
// [DONE], Messages' message_stop, Responses' response.completed, however long its data), nothing after
// it; a cut stream, an error event or a failed response is an error, and the events are counted even
// when the body arrives a byte at a time.
func TestReadStreamEndsPerSurface(t *testing.T) {
	chunk := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" fox"}}]}` + "\n\n"
	named := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	messages := named("message_start", `{"type":"message_start"}`) + named("content_block_start", `{}`) +
		named("content_block_delta", `{}`) + named("content_block_stop", `{}`) + named("message_delta", `{}`)
	long := strings.Repeat("fox ", 500) // the completed response repeats the whole answer
	responses := named("response.created", `{}`) + named("response.in_progress", `{}`) + named("response.output_text.delta", `{}`)
	for _, c := range []struct {
		name    string
		s       Surface
		body    string
		events  int
		wantErr string
	}{
		{"chat", SurfaceChat, chunk + chunk + "data: [DONE]\n\n", 3, ""},
		{"chat, [DONE] without its blank line", SurfaceChat, chunk + "data: [DONE]", 2, ""},
		{"chat, CRLF", SurfaceChat, strings.ReplaceAll(chunk+"data: [DONE]\n\n", "\n", "\r\n"), 2, ""},
		{"chat without [DONE]", SurfaceChat, chunk + chunk, 2, "does not end with data: [DONE] (its last is data: {\"id\":\"c\""},
		{"chat cut inside an event", SurfaceChat, chunk + `data: {"id":"c","obj`, 1, "unexpected EOF after 1 events"},
		{"chat, a chunk after [DONE]", SurfaceChat, chunk + "data: [DONE]\n\n" + chunk, 3, "does not end with data: [DONE]"},
		{"chat, no events", SurfaceChat, "", 0, "has no events"},
		{"chat answered as messages", SurfaceChat, messages + named("message_stop", `{"type":"message_stop"}`), 6, "does not end with data: [DONE] (its last is event: message_stop)"},
		{"messages", SurfaceMessages, messages + named("message_stop", `{"type":"message_stop"}`), 6, ""},
		{"messages, a ping in between", SurfaceMessages, named("ping", `{"type":"ping"}`) + messages + named("message_stop", `{}`), 7, ""},
		{"messages ending with an error event", SurfaceMessages, messages + named("error", `{"type":"error","error":{"type":"overloaded_error"}}`), 6, "does not end with event: message_stop (its last is event: error)"},
		{"messages without message_stop", SurfaceMessages, messages, 5, "its last is event: message_delta"},
		{"messages, data [DONE] is not its end", SurfaceMessages, messages + "data: [DONE]\n\n", 6, "its last is data: [DONE]"},
		{"responses", SurfaceResponses, responses + named("response.completed", `{"type":"response.completed","response":{"output_text":"`+long+`"}}`), 4, ""},
		{"responses failed", SurfaceResponses, responses + named("response.failed", `{"type":"response.failed"}`), 4, "does not end with event: response.completed (its last is event: response.failed)"},
		{"responses cut in its last event", SurfaceResponses, responses + "event: response.completed\ndata: {\"type\":\"resp", 3, "unexpected EOF"},
	} {
		for _, oneByte := range []bool{false, true} {
			r := strings.NewReader(c.body)
			var rd io.Reader = r
			if oneByte {
				rd = iotest.OneByteReader(r)
			}
			n, err := c.s.ReadStream(rd, make([]byte, 0, 64))
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("%s: %v", c.name, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("%s: error %v, want one saying %q", c.name, err, c.wantErr)
			case n != c.events:
				t.Errorf("%s (a byte at a time: %v): %d events, want %d", c.name, oneByte, n, c.events)
			}
			if r.Len() != 0 {
				t.Errorf("%s: %d bytes left unread; the body must be read to its end to reuse the connection", c.name, r.Len())
			}
		}
	}
}

// TestSurfaceRequests: each surface's row asks, in its own wire shape and auth, the completion the chat
// rows ask (the same system text, user message and token cap), so that the upstream streams the same
// chunks for every row.
func TestSurfaceRequests(t *testing.T) {
	var chat struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct{ Role, Content string }
	}
	if err := json.Unmarshal(RequestBody(true, false), &chat); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{true, false} {
		var m struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			Stream    bool   `json:"stream"`
			System    string `json:"system"`
			Messages  []struct{ Role, Content string }
		}
		if err := json.Unmarshal(SurfaceMessages.Body(stream), &m); err != nil {
			t.Fatalf("messages body: %v", err)
		}
		if m.Model == "" || m.MaxTokens != chat.MaxTokens || m.Stream != stream || m.System != chat.Messages[0].Content ||
			len(m.Messages) != 1 || m.Messages[0].Role != "user" || m.Messages[0].Content != chat.Messages[1].Content {
			t.Errorf("messages body (stream %v) %+v does not ask what the chat body %+v asks", stream, m, chat)
		}
		var r struct {
			Model           string `json:"model"`
			Instructions    string `json:"instructions"`
			Input           string `json:"input"`
			MaxOutputTokens int    `json:"max_output_tokens"`
			Stream          bool   `json:"stream"`
		}
		if err := json.Unmarshal(SurfaceResponses.Body(stream), &r); err != nil {
			t.Fatalf("responses body: %v", err)
		}
		if r.Model == "" || r.MaxOutputTokens != chat.MaxTokens || r.Stream != stream || r.Instructions != chat.Messages[0].Content ||
			r.Input != chat.Messages[1].Content {
			t.Errorf("responses body (stream %v) %+v does not ask what the chat body %+v asks", stream, r, chat)
		}
	}
	for s, want := range map[Surface]string{SurfaceChat: "/v1/chat/completions", SurfaceMessages: "/v1/messages", SurfaceResponses: "/v1/responses"} {
		if s.Path() != want {
			t.Errorf("%s path %q, want %q", s, s.Path(), want)
		}
	}
	h := http.Header{}
	SurfaceMessages.SetAuth(h, "sk-1")
	if h.Get("X-Api-Key") != "sk-1" || h.Get("Anthropic-Version") == "" || h.Get("Authorization") != "" {
		t.Errorf("messages auth headers %v, want x-api-key and anthropic-version only", h)
	}
	h = http.Header{}
	SurfaceResponses.SetAuth(h, "sk-1")
	if h.Get("Authorization") != "Bearer sk-1" || h.Get("X-Api-Key") != "" {
		t.Errorf("responses auth headers %v, want a bearer token", h)
	}
}

// TestScenarioRows: translated rows are measured in the streamed scenarios only, in their place.
func TestScenarioRows(t *testing.T) {
	chat := &Row{Name: "edge"}
	rows := []*Row{{Name: "bare proxy"}, chat, {Name: "edge, messages", Surface: SurfaceMessages, Chat: chat}, {Name: "edge process"}}
	if got := RowNames(ScenarioRows(Scenario{Stream: true, Conns: 1}, rows)); got != "bare proxy, edge, edge, messages, edge process" {
		t.Errorf("streamed rows: %s", got)
	}
	if got := RowNames(ScenarioRows(Scenario{Stream: false, Conns: 1}, rows)); got != "bare proxy, edge, edge process" {
		t.Errorf("non-streamed rows: %s", got)
	}
	// The paced scenario is the quiet check's: the bare proxy, the row judged and the row it is judged against.
	edge := &Row{Name: "edge", Edge: true}
	shadow := &Row{Name: "edge + shadow canary", Edge: true, Quiet: edge}
	rows = []*Row{{Name: "bare proxy"}, edge, {Name: "edge, retention none", Edge: true}, shadow, {Name: "edge process", Edge: true}}
	if got := RowNames(ScenarioRows(Scenario{Stream: true, Conns: 1, Pause: PacedPause}, rows)); got != "bare proxy, edge, edge + shadow canary" {
		t.Errorf("paced rows: %s", got)
	}
}
