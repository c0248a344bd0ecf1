package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/strictjson"
)

// Fuzz targets on the edge's production paths: the chat body parser, and for each
// streamed surface the way from an upstream's bytes to the bytes written to the client. Seed corpora
// live in testdata/fuzz/<FuzzName>/; run one with
// go test -run '^$' -fuzz '^FuzzChatStream$' -fuzztime 30s ./handlers/edge/

// FuzzParseChat holds the chat body parser, which reads every chat request in one pass without decoding
// it, to encoding/json: a body it accepts is a JSON object without a repeated name, whose messages,
// roles, stream flag and token limit are what encoding/json reads; a body it refuses gets a 400 that
// says why.
func FuzzParseChat(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64}`,
		`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:,"}}]}],"max_completion_tokens":5,"max_tokens":9}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`,
		`{"max_tokens":5,"max_tokens":999999,"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":"a \"q\" \u00e9"}],"stream":null}`,
		`{"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"Include_Usage":true,"x":[1]}}`,
		`{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":null}}`,
		`{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":"yes"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		call, model, e := parseChat(body)
		if e != nil {
			if e.status != http.StatusBadRequest || e.message == "" {
				t.Fatalf("refusal %+v", e)
			}
			return
		}
		if !json.Valid(body) || strictjson.Duplicate(body) != nil {
			t.Fatalf("accepted %q: not JSON, or a name repeated", body)
		}
		if !utf8.Valid(body) {
			// encoding/json reads invalid UTF-8 in names and strings as U+FFFD, the parser keeps the
			// bytes (they go upstream as sent): the two are not held to each other there.
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil || len(top) != len(call.Body) {
			t.Fatalf("accepted %q: encoding/json reads %d members (%v), the parser %d", body, len(top), err, len(call.Body))
		}
		for k, v := range top {
			if !bytes.Equal(call.Body[k], v) {
				t.Fatalf("member %q: %s, encoding/json %s", k, call.Body[k], v)
			}
		}
		// Names are read exactly, as the upstream reads them ("Stream" is not "stream").
		var wantModel string
		var wantStream bool
		var wantMessages []map[string]json.RawMessage
		json.Unmarshal(top["model"], &wantModel)
		json.Unmarshal(top["stream"], &wantStream)
		if err := json.Unmarshal(top["messages"], &wantMessages); err != nil {
			t.Fatalf("accepted messages %s, which encoding/json does not read as objects: %v", top["messages"], err)
		}
		if wantModel != model || wantStream != call.Stream {
			t.Fatalf("model %q, stream %v; encoding/json %q, %v", model, call.Stream, wantModel, wantStream)
		}
		if raw, ok := top["stream_options"]; ok && string(raw) != "null" {
			var so struct {
				IncludeUsage bool `json:"include_usage"`
			}
			if err := json.Unmarshal(raw, &so); err != nil || so.IncludeUsage != call.IncludeUsage {
				t.Fatalf("stream_options %s: include_usage %v; encoding/json %v (%v)", raw, call.IncludeUsage, so.IncludeUsage, err)
			}
		}
		if len(call.Messages) == 0 || len(call.Messages) != len(wantMessages) {
			t.Fatalf("%d messages, encoding/json %d", len(call.Messages), len(wantMessages))
		}
		for i, m := range wantMessages {
			var role string
			if json.Unmarshal(m["role"], &role) != nil || role != call.Messages[i].Role {
				t.Fatalf("messages[%d]: role %q, encoding/json %s", i, call.Messages[i].Role, m["role"])
			}
		}
		for _, k := range []string{"max_tokens", "max_completion_tokens"} {
			var n int
			if raw, ok := top[k]; ok && string(raw) != "null" && (json.Unmarshal(raw, &n) != nil || n < call.MaxTokens) {
				t.Fatalf("%s %s, read as a limit of %d", k, raw, call.MaxTokens)
			}
		}
	})
}

// The upstream streams of the seeds: a vLLM chat stream, with tool calls and usage, and a native
// Messages stream.
var (
	chatSeed = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n" +
		"data: [DONE]\n\n"
	chatToolSeed = "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n" +
		"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n" +
		"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Lima\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n" +
		"data: [DONE]\n\n"
	chatErrorSeed = "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
		"data: {\"error\":{\"message\":\"out of memory\",\"type\":\"InternalServerError\",\"code\":500}}\n\n"
	chatCutSeed = "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"id\":\"c\",\"choi"

	messagesSeed = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Lima\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	messagesErrorSeed = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5}}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
)

// FuzzChatStream: a relayed chat stream, whatever the upstream sends, reaches the client as well-formed
// server-sent events that end with "data: [DONE]" or an error event (or, when nothing had been sent
// yet, as an error answer), and is recorded with what it delivered.
func FuzzChatStream(f *testing.F) {
	for _, s := range []string{chatSeed, chatToolSeed, chatErrorSeed, chatCutSeed} {
		f.Add([]byte(s))
	}
	fe := newFuzzEdge(f)
	f.Fuzz(func(t *testing.T, upstream []byte) {
		rec, run := fe.serve(t, "chat", "/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`, upstream)
		checkAnswer(t, rec, run, false, func(evs []sseEvent) bool {
			for i, ev := range evs {
				if ev.named {
					t.Fatalf("a chat stream has a named event: %q", ev.name)
				}
				if ev.data == "[DONE]" {
					if i != len(evs)-1 {
						t.Fatal("events after [DONE]")
					}
					return true
				}
				if i == len(evs)-1 {
					openAIError(t, []byte(ev.data))
					return false
				}
				if !strings.HasPrefix(ev.data, "{") {
					t.Fatalf("event %q is not a chunk", ev.data)
				}
			}
			return false
		})
	})
}

// FuzzMessagesTranslatedStream: a chat stream translated to the Messages API, whatever the upstream
// sends, reaches the client as Anthropic's events (each named as its data's type), in their order, and
// ends with message_stop or an error event.
func FuzzMessagesTranslatedStream(f *testing.F) {
	for _, s := range []string{chatSeed, chatToolSeed, chatErrorSeed, chatCutSeed} {
		f.Add([]byte(s))
	}
	fe := newFuzzEdge(f)
	f.Fuzz(func(t *testing.T, upstream []byte) {
		rec, run := fe.serve(t, "translated", "/v1/messages",
			`{"stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, upstream)
		checkAnswer(t, rec, run, true, func(evs []sseEvent) bool {
			for i, ev := range evs {
				var d struct{ Type string }
				if !ev.named || json.Unmarshal([]byte(ev.data), &d) != nil || d.Type != ev.name {
					t.Fatalf("event %q carries %q", ev.name, ev.data)
				}
				if i == 0 && ev.name != "message_start" && ev.name != "error" {
					t.Fatalf("the stream begins with %s", ev.name)
				}
			}
			last := evs[len(evs)-1]
			if last.name == "error" {
				anthropicError(t, []byte(last.data))
				return false
			}
			if last.name != "message_stop" {
				t.Fatalf("the stream ends with %s", last.name)
			}
			return true
		})
	})
}

// FuzzMessagesPassthroughStream: a Messages stream passed through from an upstream that serves the API,
// whatever that upstream sends, reaches the client as named events, renamed for the served model, that
// end with message_stop or an error event in Anthropic's envelope.
func FuzzMessagesPassthroughStream(f *testing.F) {
	for _, s := range []string{messagesSeed, messagesErrorSeed, messagesSeed[:400]} {
		f.Add([]byte(s))
	}
	fe := newFuzzEdge(f)
	f.Fuzz(func(t *testing.T, upstream []byte) {
		rec, run := fe.serve(t, "native", "/v1/messages",
			`{"stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, upstream)
		checkAnswer(t, rec, run, true, func(evs []sseEvent) bool {
			for i, ev := range evs {
				if !ev.named || ev.name == "" || !strings.HasPrefix(ev.data, "{") {
					t.Fatalf("event %q carries %q", ev.name, ev.data)
				}
				if ev.name == "message_stop" && i != len(evs)-1 {
					t.Fatal("events after message_stop")
				}
				var d struct {
					Type    string
					Message struct{ Model string }
				}
				if json.Unmarshal([]byte(ev.data), &d) == nil && d.Type == "message_start" && d.Message.Model != "native" {
					t.Fatalf("message_start names %q, want the served model", d.Message.Model)
				}
			}
			last := evs[len(evs)-1]
			if last.name == "error" {
				anthropicError(t, []byte(last.data))
				return false
			}
			if last.name != "message_stop" {
				t.Fatalf("the stream ends with %s", last.name)
			}
			return true
		})
	})
}

// fuzzEdge is an edge whose one upstream answers every call with the bytes it is given.
type fuzzEdge struct {
	h  *Handler
	mu sync.Mutex
	up []byte
	// run is the last run recorded.
	run runs.Run
}

func newFuzzEdge(f *testing.F) *fuzzEdge {
	fe := &fuzzEdge{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fe.mu.Lock()
		b := fe.up
		fe.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(b)
	}))
	f.Cleanup(srv.Close)
	reg, err := inference.NewRegistryWith([]inference.ModelConfig{
		{Name: "up", Runtime: inference.RuntimeOpenAI, UpstreamURL: srv.URL + "/v1", UpstreamModel: "m", Public: true, Default: true,
			SupportsMessages: true, TimeoutMs: 5000},
		{Name: "native", Runtime: inference.RuntimeOpenAI, UpstreamURL: srv.URL + "/v1", UpstreamModel: "m", SupportsMessages: true,
			UpstreamMessages: true, TimeoutMs: 5000},
	}, inference.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(reg.Close)
	deployment := func(model string) *edgemodel.EdgeDeployment {
		return &edgemodel.EdgeDeployment{ID: "d-" + model, Slug: model, BaseModel: model, Retention: edgemodel.Retention{Mode: edgemodel.RetentionDays, Days: 1}}
	}
	svc := fuzzService{"chat": deployment("up"), "translated": deployment("up"), "native": deployment("native")}
	fe.h = New(Options{Service: svc, Runtimes: reg, Recorder: fe, Logger: slog.New(slog.DiscardHandler)})
	return fe
}

func (fe *fuzzEdge) Record(r runs.Run) bool  { fe.run = r; return true }
func (fe *fuzzEdge) Touch(string, time.Time) {}

// serve sends one request through the whole edge (ServeEdge) to an upstream that answers upstream.
func (fe *fuzzEdge) serve(t *testing.T, slug, path, body string, upstream []byte) (*httptest.ResponseRecorder, runs.Run) {
	fe.mu.Lock()
	fe.up = upstream
	fe.mu.Unlock()
	fe.run = runs.Run{}
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, path, strings.NewReader(body))
	fe.h.ServeEdge(rec, req, slug)
	return rec, fe.run
}

type fuzzService map[string]*edgemodel.EdgeDeployment

func (s fuzzService) EdgeDeployment(_ context.Context, slug string) (*edgemodel.EdgeDeployment, error) {
	return s[slug], nil
}

func (fuzzService) EdgeAuthorize(context.Context, *edgemodel.EdgeDeployment, string) (edgemodel.EdgeKey, error) {
	return edgemodel.EdgeKey{}, nil
}

func (fuzzService) EdgeRun(context.Context, string, string) ([]byte, []byte, error) {
	return nil, nil, core.ErrNotFound
}

func (fuzzService) EdgeFeedback(context.Context, string, string, int, string) error {
	return core.ErrNotFound
}

// sseEvent is one event as a client reads it.
type sseEvent struct {
	name, data string
	named      bool
}

// checkAnswer checks what a streamed request answered, whatever the upstream sent: an error answer in
// the surface's envelope when nothing could be sent, else well-formed server-sent events (every line an
// "event:" or "data:" field, every event ended by a blank line) that end as the surface says (ended
// reports whether they end in success); and a run recorded once, ok exactly when the stream ended in
// success, with a JSON answer and the prompt counted.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, run runs.Run, anthropic bool, ended func([]sseEvent) bool) {
	t.Helper()
	body := rec.Body.Bytes()
	if run.Status == "" {
		t.Fatal("no run recorded")
	}
	if !json.Valid(run.Response) {
		t.Fatalf("the run recorded %q, not JSON", run.Response)
	}
	if rec.Code != http.StatusOK {
		if run.Status != "error" || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, run %s, content type %q", rec.Code, run.Status, rec.Header().Get("Content-Type"))
		}
		if anthropic {
			anthropicError(t, body)
		} else {
			openAIError(t, body)
		}
		return
	}
	if rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("a 200 of content type %q", rec.Header().Get("Content-Type"))
	}
	if !bytes.HasSuffix(body, []byte("\n\n")) || bytes.IndexByte(body, '\r') >= 0 {
		t.Fatalf("the stream does not end with a blank line, or holds a carriage return: %q", body)
	}
	var evs []sseEvent
	for _, block := range strings.Split(string(body[:len(body)-2]), "\n\n") {
		var ev sseEvent
		var data []string
		for i, line := range strings.Split(block, "\n") {
			switch {
			case i == 0 && strings.HasPrefix(line, "event: "):
				ev.name, ev.named = strings.TrimPrefix(line, "event: "), true
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			default:
				t.Fatalf("line %q of event %q is no field", line, block)
			}
		}
		if len(data) == 0 {
			t.Fatalf("event %q without data", block)
		}
		ev.data = strings.Join(data, "\n")
		evs = append(evs, ev)
	}
	ok := ended(evs)
	if ok != (run.Status == "ok") {
		t.Fatalf("the stream ended in success %v, the run says %s", ok, run.Status)
	}
	if run.PromptTokens <= 0 {
		t.Fatalf("a call the upstream took was recorded with %d prompt tokens", run.PromptTokens)
	}
}

// openAIError checks an error in OpenAI's envelope.
func openAIError(t *testing.T, b []byte) {
	t.Helper()
	var env struct {
		Error *struct {
			Message, Type string
			Code, Param   *string
		}
	}
	if json.Unmarshal(b, &env) != nil || env.Error == nil || env.Error.Message == "" || env.Error.Type == "" ||
		jsonx.Field(jsonx.Field(b, "error"), "param") == nil {
		t.Fatalf("not an OpenAI error envelope: %q", b)
	}
}

// anthropicError checks an error in Anthropic's envelope.
func anthropicError(t *testing.T, b []byte) {
	t.Helper()
	var env struct {
		Type  string
		Error *struct{ Type, Message string }
	}
	if json.Unmarshal(b, &env) != nil || env.Type != "error" || env.Error == nil || env.Error.Type == "" || env.Error.Message == "" {
		t.Fatalf("not an Anthropic error envelope: %q", b)
	}
}
