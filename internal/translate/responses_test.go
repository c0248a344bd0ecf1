package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestResponsesToChat(t *testing.T) {
	files, _ := filepath.Glob("testdata/responses/request/*.request.json")
	if len(files) == 0 {
		t.Fatal("no samples")
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".request.json")
		t.Run(name, func(t *testing.T) {
			body, _ := os.ReadFile(in)
			base := strings.TrimSuffix(in, ".request.json")
			want, err := os.ReadFile(base + ".chat.json")
			if err != nil {
				t.Fatal(err)
			}
			si := readSampleInfo(t, base+".info.json")
			chat, info, e := responsesJSON(body, Options{Reasoning: si.Reasoning})
			if e != nil {
				t.Fatalf("error %q (param %q)", e.Message, e.Param)
			}
			if !jsonEqual(t, chat, want) {
				t.Errorf("chat request:\n got %s\nwant %s", chat, want)
			}
			if info.PromptChars <= 0 {
				t.Errorf("PromptChars = %d, want the prompt's size", info.PromptChars)
			}
			if !reflect.DeepEqual(info.Ignored, si.Ignored) {
				t.Errorf("Ignored = %q, want %q", info.Ignored, si.Ignored)
			}
		})
	}
}

func TestResponsesToChatErrors(t *testing.T) {
	const in = `"input":"hi"`
	const fn = `"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]`
	cases := []struct {
		name, body, param, says string
	}{
		{"not json", `{"input":`, "", ""},
		{"not an object", `"hi"`, "", ""},
		{"duplicate key", `{"input":"a","input":"b"}`, "input", ""},
		{"unknown field", `{"frequency_penalty":1,` + in + `}`, "frequency_penalty", "fields that translate"},
		{"top_logprobs", `{"top_logprobs":3,` + in + `}`, "top_logprobs", ""},
		{"truncation auto", `{"truncation":"auto",` + in + `}`, "truncation", "not supported"},
		{"truncation other", `{"truncation":"sometimes",` + in + `}`, "truncation", ""},
		{"background", `{"background":true,` + in + `}`, "background", "not supported"},
		{"conversation", `{"conversation":"conv_1",` + in + `}`, "conversation", "not supported"},
		{"prompt", `{"prompt":{"id":"pmpt_1"},` + in + `}`, "prompt", "not supported"},
		{"input missing", `{"model":"m"}`, "input", "required"},
		{"input empty", `{"input":[]}`, "input", ""},
		{"input number", `{"input":5}`, "input", ""},
		{"model number", `{"model":5,` + in + `}`, "model", ""},
		{"stream string", `{"stream":"yes",` + in + `}`, "stream", ""},
		{"max_output_tokens zero", `{"max_output_tokens":0,` + in + `}`, "max_output_tokens", ""},
		{"temperature too high", `{"temperature":2.5,` + in + `}`, "temperature", ""},
		{"top_p string", `{"top_p":"1",` + in + `}`, "top_p", ""},
		{"metadata not strings", `{"metadata":{"a":1},` + in + `}`, "metadata.a", ""},
		{"instructions number", `{"instructions":1,` + in + `}`, "instructions", ""},
		{"text format type", `{"text":{"format":{"type":"xml"}},` + in + `}`, "text.format.type", ""},
		{"text format no name", `{"text":{"format":{"type":"json_schema","schema":{}}},` + in + `}`, "text.format.name", ""},
		{"text format no schema", `{"text":{"format":{"type":"json_schema","name":"x"}},` + in + `}`, "text.format.schema", ""},
		{"text extra", `{"text":{"color":"red"},` + in + `}`, "text.color", ""},
		{"reasoning effort", `{"reasoning":{"effort":"huge"},` + in + `}`, "reasoning.effort", ""},
		{"reasoning summary", `{"reasoning":{"summary":"long"},` + in + `}`, "reasoning.summary", ""},
		{"reasoning extra", `{"reasoning":{"effort":"low","zeal":1,"budget":2},` + in + `}`, "reasoning.budget", "reasoning may hold effort, summary, generate_summary"},
		{"reasoning not object", `{"reasoning":"high",` + in + `}`, "reasoning", "must be an object"},
		{"unknown fields in name order", `{"zzz":1,"aaa":2,` + in + `}`, "aaa", "the fields that translate are"},
		{"tools not array", `{"tools":{},` + in + `}`, "tools", ""},
		{"tool mcp", `{"tools":[{"type":"mcp","server_label":"x","server_url":"https://m"}],` + in + `}`, "tools[0].type", "not supported"},
		{"tool local_shell", `{"tools":[{"type":"local_shell"}],` + in + `}`, "tools[0].type", "not supported"},
		{"tool no name", `{"tools":[{"type":"function","parameters":{}}],` + in + `}`, "tools[0].name", ""},
		{"tool bad parameters", `{"tools":[{"type":"function","name":"f","parameters":[]}],` + in + `}`, "tools[0].parameters", ""},
		{"tool duplicate", `{"tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}],` + in + `}`, "tools[1].name", ""},
		{"tool extra key", `{"tools":[{"type":"function","name":"f","defer_loading":true}],` + in + `}`, "tools[0].defer_loading", ""},
		{"tool_choice unknown string", `{"tool_choice":"any",` + fn + `,` + in + `}`, "tool_choice", ""},
		{"tool_choice required without tools", `{"tool_choice":"required",` + in + `}`, "tool_choice", ""},
		{"tool_choice unknown function", `{"tool_choice":{"type":"function","name":"g"},` + fn + `,` + in + `}`, "tool_choice.name", ""},
		{"tool_choice hosted", `{"tool_choice":{"type":"web_search_preview"},` + fn + `,` + in + `}`, "tool_choice.type", "not supported"},
		{"parallel not bool", `{"parallel_tool_calls":1,` + in + `}`, "parallel_tool_calls", ""},
		{"item type", `{"input":[{"type":"web_search_call","id":"ws","status":"completed"}]}`, "input[0].type", "not supported"},
		{"item reference", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", "not supported"},
		{"role", `{"input":[{"role":"tool","content":"x"}]}`, "input[0].role", ""},
		{"content missing", `{"input":[{"role":"user"}]}`, "input[0].content", ""},
		{"part type", `{"input":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "input[0].content[0].type", ""},
		{"input_file", `{"input":[{"role":"user","content":[{"type":"input_file","file_data":"JVBERi0="}]}]}`, "input[0].content[0].type", "not supported"},
		{"image file_id", `{"input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1","detail":"auto"}]}]}`, "input[0].content[0].file_id", "not supported"},
		{"image url scheme", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"file:///etc/passwd"}]}]}`, "input[0].content[0].image_url", ""},
		{"image in system", `{"input":[{"role":"system","content":[{"type":"input_image","image_url":"https://x/a.png"}]},{"role":"user","content":"a"}]}`, "input[0].content[0].type", ""},
		{"output_text in user", `{"input":[{"role":"user","content":[{"type":"output_text","text":"x"}]}]}`, "input[0].content[0].type", ""},
		{"call without output", `{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]}`, "input", "No tool output found for function call c1."},
		{"user before output", `{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"role":"user","content":"b"}]}`, "input[2]", "No tool output found"},
		{"output without call", `{"input":[{"role":"user","content":"a"},{"type":"function_call_output","call_id":"nope","output":"x"}]}`, "input[1].call_id", "No tool call found for function call output with call_id nope."},
		{"output twice", `{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"x"},{"type":"function_call_output","call_id":"c1","output":"y"}]}`, "input[3].call_id", "already answered"},
		{"call duplicate id", `{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]}`, "input[2].call_id", ""},
		{"call without name", `{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","arguments":"{}"}]}`, "input[1].name", ""},
		{"call arguments not string", `{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","name":"f","arguments":{}}]}`, "input[1].arguments", ""},
		{"output not string", `{"input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":5}]}`, "input[2].output", ""},
		{"reasoning content not list", `{"input":[{"type":"reasoning","id":"r","summary":"x"},{"role":"user","content":"a"}]}`, "input[0].summary", ""},
		{"item extra key", `{"input":[{"role":"user","content":"a","name":"bob"}]}`, "input[0].name", ""},
		{"only instructions", `{"instructions":"x","input":[{"type":"reasoning","id":"r","summary":[]}]}`, "input", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chat, _, e := responsesJSON([]byte(c.body), Options{})
			if e == nil {
				t.Fatalf("translated to %s, want an error naming %q", chat, c.param)
			}
			if e.Param != c.param {
				t.Errorf("param = %q, want %q (message %q)", e.Param, c.param, e.Message)
			}
			if c.param != "" && !strings.HasPrefix(e.Message, c.param+": ") {
				t.Errorf("message %q does not name %q", e.Message, c.param)
			}
			if last := c.param[strings.LastIndexAny(c.param, ".]")+1:]; last != "" && strings.HasPrefix(e.Message, c.param+": "+last+" ") {
				t.Errorf("message %q names %q twice", e.Message, last)
			}
			if !strings.Contains(e.Message, c.says) {
				t.Errorf("message %q does not say %q", e.Message, c.says)
			}
		})
	}
}

// responsesInfo translates a typical request, for the answer-side tests.
func responsesInfo(t *testing.T, body string) *ResponsesInfo {
	t.Helper()
	_, info, e := responsesJSON([]byte(body), Options{Secret: []byte("k")})
	if e != nil {
		t.Fatal(e)
	}
	return info
}

const answerRequest = `{"model":"gpt-x","instructions":"Be brief.","input":"hi","max_output_tokens":100,"temperature":0.5,"metadata":{"team":"a"},
"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}},{"type":"web_search"}],"tool_choice":"auto"}`

func TestChatToResponse(t *testing.T) {
	files, _ := filepath.Glob("testdata/responses/answer/*.completion.json")
	if len(files) == 0 {
		t.Fatal("no samples")
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".completion.json")
		t.Run(name, func(t *testing.T) {
			body, _ := os.ReadFile(in)
			want, err := os.ReadFile(strings.TrimSuffix(in, ".completion.json") + ".response.json")
			if err != nil {
				t.Fatal(err)
			}
			got, u, err := ChatToResponse(body, "resp_abc", "llama-3.1-8b", 1735689600, responsesInfo(t, answerRequest))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, want) {
				t.Errorf("response:\n got %s\nwant %s", got, want)
			}
			var r struct {
				Usage struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
			}
			json.Unmarshal(got, &r)
			if u.InputTokens != r.Usage.InputTokens || u.OutputTokens != r.Usage.OutputTokens || u.InputTokens == 0 {
				t.Errorf("usage %+v, answer says %+v", u, r.Usage)
			}
		})
	}
}

func TestChatToResponseErrors(t *testing.T) {
	for body, says := range map[string]string{
		`<html>`: "not a chat completion",
		`{"error":{"message":"CUDA out of memory"}}`: "CUDA out of memory",
		`{"choices":[]}`: "no choice",
		`{"choices":[{"index":0,"message":{"tool_calls":[{"id":"c","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`: "without naming",
	} {
		if _, _, err := ChatToResponse([]byte(body), "resp_1", "m", 1, &ResponsesInfo{}); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: error %v, want one saying %q", body, err, says)
		}
	}
}

// responseEvents feeds a recorded upstream stream to a ResponsesStream.
func responseEvents(t *testing.T, s *ResponsesStream, chunks []Event) []Event {
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

// accumulateResponse assembles a response from events as openai-node's ResponseStream does
// (lib/responses/ResponseAccumulator: items pushed at output_item.added and replaced at .done,
// parts pushed at content_part.added, deltas appended, the terminal event's response taken whole),
// checking what clients rely on: sequence numbers 0, 1, 2...; response.created then
// response.in_progress first; one item open at a time, its deltas and parts between its added and
// done; a terminal event last. It returns the snapshot built from the item events and the terminal
// event's response.
func accumulateResponse(t *testing.T, events []Event) (snapshot, final map[string]any) {
	t.Helper()
	open := -1
	for i, e := range events {
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if d["type"] != e.Name {
			t.Fatalf("event %d is named %q but its data has type %v", i, e.Name, d["type"])
		}
		if seq, _ := d["sequence_number"].(float64); int(seq) != i {
			t.Fatalf("event %d (%s) has sequence_number %v", i, e.Name, d["sequence_number"])
		}
		idx := -1
		if f, ok := d["output_index"].(float64); ok {
			idx = int(f)
		}
		var output []any
		if snapshot != nil {
			output = snapshot["output"].([]any)
		}
		item := func() map[string]any {
			if idx != open || idx < 0 || idx >= len(output) {
				t.Fatalf("event %d (%s) for output %d while %d is open (%d items)", i, e.Name, idx, open, len(output))
			}
			it := output[idx].(map[string]any)
			if id, ok := d["item_id"]; ok && id != it["id"] {
				t.Fatalf("event %d names item %v, output %d is %v", i, id, idx, it["id"])
			}
			return it
		}
		part := func(it map[string]any) map[string]any {
			parts, _ := it["content"].([]any)
			ci, _ := d["content_index"].(float64)
			if int(ci) >= len(parts) {
				t.Fatalf("event %d: no content part %v", i, ci)
			}
			return parts[int(ci)].(map[string]any)
		}
		switch e.Name {
		case "response.created":
			if i != 0 {
				t.Fatalf("response.created at %d", i)
			}
			snapshot = d["response"].(map[string]any)
			if snapshot["status"] != "in_progress" || len(snapshot["output"].([]any)) != 0 {
				t.Fatalf("created with %v", snapshot)
			}
		case "response.in_progress":
			if i != 1 {
				t.Fatalf("response.in_progress at %d", i)
			}
		case "response.output_item.added":
			if open != -1 || idx != len(output) {
				t.Fatalf("event %d: item %d added while %d is open (%d items)", i, idx, open, len(output))
			}
			open = idx
			snapshot["output"] = append(output, d["item"])
		case "response.output_item.done":
			item()
			output[idx] = d["item"]
			open = -1
		case "response.content_part.added":
			it := item()
			parts, _ := it["content"].([]any)
			it["content"] = append(parts, d["part"])
		case "response.content_part.done":
			it := item()
			it["content"].([]any)[int(d["content_index"].(float64))] = d["part"]
		case "response.output_text.delta", "response.reasoning_text.delta":
			p := part(item())
			p["text"] = p["text"].(string) + d["delta"].(string)
		case "response.output_text.done", "response.reasoning_text.done":
			p := part(item())
			if p["text"] != d["text"] {
				t.Fatalf("event %d: done text %q, deltas made %q", i, d["text"], p["text"])
			}
		case "response.function_call_arguments.delta":
			it := item()
			it["arguments"] = it["arguments"].(string) + d["delta"].(string)
		case "response.function_call_arguments.done":
			it := item()
			if it["arguments"] != d["arguments"] || it["name"] != d["name"] {
				t.Fatalf("event %d: done %v, deltas made %v", i, d, it)
			}
		case "response.custom_tool_call_input.delta":
			it := item()
			it["input"] = it["input"].(string) + d["delta"].(string)
		case "response.custom_tool_call_input.done":
			item()
		case "response.completed", "response.incomplete", "response.failed":
			if i != len(events)-1 || (open != -1 && e.Name != "response.failed") {
				t.Fatalf("%s at %d of %d, item %d open", e.Name, i, len(events), open)
			}
			final = d["response"].(map[string]any)
		default:
			t.Fatalf("event %d: unknown type %q", i, e.Name)
		}
	}
	if snapshot == nil || final == nil {
		t.Fatal("no response.created or no terminal event")
	}
	return snapshot, final
}

func TestResponsesStream(t *testing.T) {
	cases := []struct {
		name     string
		estimate int
		usage    Usage
		terminal string
	}{
		{"text_usage", 3, Usage{InputTokens: 12, OutputTokens: 5}, "response.completed"},
		{"text_no_usage", 3, Usage{InputTokens: 3, OutputTokens: 3}, "response.completed"},
		{"tool_streamed", 57, Usage{InputTokens: 230, OutputTokens: 32}, "response.completed"},
		{"parallel_tools", 20, Usage{InputTokens: 80, OutputTokens: 40}, "response.completed"},
		{"interleaved_tools", 20, Usage{InputTokens: 20, OutputTokens: 5}, "response.completed"},
		{"length", 2, Usage{InputTokens: 7, OutputTokens: 3}, "response.incomplete"},
		{"reasoning", 4, Usage{InputTokens: 9, OutputTokens: 6}, "response.completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chunks, err := os.ReadFile("testdata/stream/" + c.name + ".chunks")
			if err != nil {
				t.Fatal(err)
			}
			wantText, err := os.ReadFile("testdata/responses/stream/" + c.name + ".events")
			if err != nil {
				t.Fatal(err)
			}
			s := NewResponsesStream("resp_abc", "llama-3.1-8b", 1735689600, responsesInfo(t, answerRequest), c.estimate)
			if s.Started() {
				t.Fatal("started before any chunk")
			}
			got := responseEvents(t, s, sse(t, chunks))
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
			if s.Usage() != c.usage {
				t.Errorf("Usage() = %+v, want %+v", s.Usage(), c.usage)
			}
			snapshot, final := accumulateResponse(t, got)
			if got[len(got)-1].Name != c.terminal {
				t.Errorf("terminal event %s, want %s", got[len(got)-1].Name, c.terminal)
			}
			// What a client assembles from the item events is what the terminal event says, and what
			// the run keeps.
			items, _ := json.Marshal(snapshot["output"])
			finalItems, _ := json.Marshal(final["output"])
			if !jsonEqual(t, items, finalItems) {
				t.Errorf("items assembled %s\nterminal event %s", items, finalItems)
			}
			finalJSON, _ := json.Marshal(final)
			if !jsonEqual(t, s.Response(), finalJSON) {
				t.Errorf("Response() = %s\nterminal event %s", s.Response(), finalJSON)
			}
		})
	}
}

// The streamed and the plain answer to the same upstream answer are the same response.
func TestResponsesStreamMatchesPlainAnswer(t *testing.T) {
	chunks, _ := os.ReadFile("testdata/stream/tool_streamed.chunks")
	s := NewResponsesStream("resp_abc", "m", 7, responsesInfo(t, answerRequest), 1)
	responseEvents(t, s, sse(t, chunks))
	var streamed map[string]any
	json.Unmarshal(s.Response(), &streamed)
	// The same answer, not streamed.
	completion := `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.","tool_calls":[` +
		`{"id":"chatcmpl-tool-5f1e","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":230,"completion_tokens":32}}`
	plain, _, err := ChatToResponse([]byte(completion), "resp_abc", "m", 7, responsesInfo(t, answerRequest))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	json.Unmarshal(plain, &p)
	a, _ := json.Marshal(streamed["output"])
	b, _ := json.Marshal(p["output"])
	if !jsonEqual(t, a, b) {
		t.Errorf("streamed output %s\nplain output %s", a, b)
	}
}

func TestResponsesStreamFail(t *testing.T) {
	s := NewResponsesStream("resp_cut", "m", 1, responsesInfo(t, answerRequest), 4)
	var all []Event
	for _, c := range []string{
		`{"id":"x","choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"content":"lo"}}]}`,
	} {
		ev, err := s.Chunk([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ev...)
	}
	all = append(all, s.Fail("server_error", "the upstream went away")...)
	_, final := accumulateResponse(t, all)
	if final["status"] != "failed" {
		t.Fatalf("final %v", final)
	}
	errObj := final["error"].(map[string]any)
	if errObj["code"] != "server_error" || errObj["message"] != "the upstream went away" {
		t.Errorf("error %v", errObj)
	}
	out := final["output"].([]any)
	if len(out) != 1 || !strings.Contains(mustJSON(out[0]), `"text":"Hello"`) {
		t.Errorf("the failed response does not keep the text so far: %v", out)
	}
	if again := s.Fail("server_error", "x"); again != nil {
		t.Errorf("a second Fail sent %d events", len(again))
	}
	if ev, err := s.Finish(); ev != nil || err != nil {
		t.Errorf("Finish after Fail: %v %v", ev, err)
	}
	// Failing before any chunk still starts the stream, so the client reads a well-formed stream.
	s = NewResponsesStream("resp_early", "m", 1, responsesInfo(t, answerRequest), 4)
	_, final = accumulateResponse(t, s.Fail("rate_limit_exceeded", "slow down"))
	if final["status"] != "failed" {
		t.Errorf("final %v", final)
	}
}

func TestResponsesStreamErrors(t *testing.T) {
	s := NewResponsesStream("resp_1", "m", 1, responsesInfo(t, answerRequest), 1)
	if _, err := s.Chunk([]byte(`{"error":{"message":"out of KV cache"}}`)); err == nil || !strings.Contains(err.Error(), "out of KV cache") {
		t.Errorf("error chunk: %v", err)
	}
	if _, err := s.Chunk([]byte(`{"id":`)); err == nil {
		t.Error("invalid chunk: no error")
	}
	s = NewResponsesStream("resp_1", "m", 1, responsesInfo(t, answerRequest), 1)
	events, _ := s.Chunk([]byte(`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`))
	more, err := s.Finish()
	if err == nil || !strings.Contains(err.Error(), "without naming") {
		t.Errorf("unnamed tool: %v", err)
	}
	events = append(append(events, more...), s.Fail("server_error", "bad tool call")...)
	if _, final := accumulateResponse(t, events); final["status"] != "failed" {
		t.Errorf("final %v", final)
	}
}

// Reasoning items carry svc's signature of their text; given back in a later request, they go to the
// upstream as the assistant's reasoning; altered, they are left out and named.
func TestResponsesReasoningRoundTrip(t *testing.T) {
	chunks, _ := os.ReadFile("testdata/stream/reasoning.chunks")
	info := responsesInfo(t, `{"input":"hi"}`)
	s := NewResponsesStream("resp_r", "m", 1, info, 1)
	responseEvents(t, s, sse(t, chunks))
	var r struct {
		Output []json.RawMessage `json:"output"`
	}
	json.Unmarshal(s.Response(), &r)
	if len(r.Output) != 2 || !strings.Contains(string(r.Output[0]), `"type":"reasoning"`) {
		t.Fatalf("output %s", r.Output)
	}
	next, e := WithPrevious([]byte(`{"input":"and then?","previous_response_id":"resp_r"}`), []Turn{{Request: []byte(`{"input":"hi"}`), Response: s.Response()}})
	if e != nil {
		t.Fatal(e)
	}
	chat, info2, e := responsesJSON(next, Options{Secret: []byte("k")})
	if e != nil {
		t.Fatal(e)
	}
	want := `[{"role":"user","content":"hi"},{"role":"assistant","content":"\n\nHello!","reasoning_content":"The user greets me."},{"role":"user","content":"and then?"}]`
	var c struct {
		Messages json.RawMessage `json:"messages"`
	}
	json.Unmarshal(chat, &c)
	if !jsonEqual(t, c.Messages, []byte(want)) {
		t.Errorf("messages %s\nwant %s", c.Messages, want)
	}
	if len(info2.Ignored) != 0 {
		t.Errorf("ignored %v", info2.Ignored)
	}
	altered := strings.Replace(string(next), "greets me", "insults me", 1)
	chat, info2, e = responsesJSON([]byte(altered), Options{Secret: []byte("k")})
	if e != nil || strings.Contains(string(chat), "reasoning_content") || !reflect.DeepEqual(info2.Ignored, []string{"input[]:reasoning"}) {
		t.Errorf("altered reasoning: %s %v %v", chat, info2.Ignored, e)
	}
}

func TestWithPrevious(t *testing.T) {
	first := `{"model":"m","instructions":"Be brief.","input":"What is 2+2?","previous_response_id":null}`
	firstAnswer := `{"id":"resp_1","object":"response","status":"completed","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"4","annotations":[]}]}]}`
	second := `{"model":"m","input":[{"role":"user","content":"And times 3?"}],"previous_response_id":"resp_1"}`
	secondAnswer := `{"id":"resp_2","object":"response","status":"completed","output":[{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"calc","arguments":"{\"x\":\"4*3\"}"}]}`
	third := `{"model":"m","instructions":"Use tools.","input":[{"type":"function_call_output","call_id":"call_1","output":"12"}],"previous_response_id":"resp_2","tools":[{"type":"function","name":"calc"}]}`
	if PreviousResponseID([]byte(third)) != "resp_2" || PreviousResponseID([]byte(first)) != "" || PreviousResponseID([]byte(`[`)) != "" {
		t.Fatal("PreviousResponseID")
	}
	body, e := WithPrevious([]byte(third), []Turn{{[]byte(first), []byte(firstAnswer)}, {[]byte(second), []byte(secondAnswer)}})
	if e != nil {
		t.Fatal(e)
	}
	chat, info, e := responsesJSON(body, Options{})
	if e != nil {
		t.Fatal(e)
	}
	var c struct {
		Messages json.RawMessage `json:"messages"`
	}
	json.Unmarshal(chat, &c)
	// The earlier instructions are not carried over (as with OpenAI); the new ones come first.
	want := `[{"role":"system","content":"Use tools."},{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4"},
		{"role":"user","content":"And times 3?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"calc","arguments":"{\"x\":\"4*3\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"12"}]`
	if !jsonEqual(t, c.Messages, []byte(want)) {
		t.Errorf("messages %s\nwant %s", c.Messages, want)
	}
	if string(info.echo.previousResponseID) != `"resp_2"` {
		t.Errorf("previous_response_id echoed as %s", info.echo.previousResponseID)
	}
	if _, e := WithPrevious([]byte(third), []Turn{{[]byte(`{`), []byte(firstAnswer)}}); e == nil || e.Param != "previous_response_id" {
		t.Errorf("unreadable stored request: %v", e)
	}
	if _, e := WithPrevious([]byte(third), []Turn{{[]byte(first), []byte(`nope`)}}); e == nil || e.Param != "previous_response_id" {
		t.Errorf("unreadable stored answer: %v", e)
	}
	if same, e := WithPrevious([]byte(first), nil); e != nil || string(same) != first {
		t.Errorf("no turns: %s %v", same, e)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestResponseJSONAsEncodingJSON: the response object written by hand (appendJSON, on every streamed
// and plain Responses answer) is byte for byte what encoding/json writes of it, whether its settings
// are set or not.
func TestResponseJSONAsEncodingJSON(t *testing.T) {
	full := &responseObject{ID: "resp_1", Object: "response", CreatedAt: 1764000000, Status: "incomplete", Background: false,
		Error: &responseError{Code: "server_error", Message: `upstream said "no"`}, IncompleteDetails: &incompleteDetails{Reason: "max_output_tokens"},
		Instructions: json.RawMessage(`"Be terse."`), MaxOutputTokens: json.RawMessage(`64`), Model: "m\u00e9",
		Output: []any{outputMessage{ID: "msg_1_0", Type: "message", Status: "incomplete", Role: "assistant", Content: []outputText{newOutputText("a \"fox\"\n")}},
			functionCallItem{ID: "fc_1_1", Type: "function_call", Status: "completed", Arguments: `{"a":1}`, CallID: "call_1", Name: "f"}},
		ParallelToolCalls: true, PreviousResponseID: json.RawMessage(`"resp_0"`), Reasoning: json.RawMessage(`{"effort":"low","summary":null}`),
		Store: true, Temperature: json.RawMessage(`0.5`), Text: json.RawMessage(`{"format":{"type":"text"}}`), ToolChoice: json.RawMessage(`"auto"`),
		Tools: json.RawMessage(`[{"type":"function","name":"f","parameters":{"type":"object"}}]`), TopP: json.RawMessage(`1`), Truncation: "disabled",
		Usage: newResponseUsage(Usage{InputTokens: 3, OutputTokens: 4, CachedTokens: 1, ReasoningTokens: 2}), User: json.RawMessage(`"u"`),
		Metadata: json.RawMessage(`{"k":"v"}`)}
	empty := (&ResponsesInfo{}).response("resp_2", "m", 1)
	for name, r := range map[string]*responseObject{"full": full, "empty": empty} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// TestResponsesStreamBuffer: a Responses stream writes its events' data into one buffer that it reuses
// from one chunk to the next (the edge writes a chunk's events before it adds the next), not a buffer
// per event: a text answer of 16 chunks to Codex's tool turn, whose response object (tools included)
// three events carry, stays within a few allocations beyond its items and the stream's own state.
func TestResponsesStreamBuffer(t *testing.T) {
	_, info, terr := ResponsesToChat(agentBody(t, "testdata/responses/request/codex_tool_turn.request.json"), Options{})
	if terr != nil {
		t.Fatal(terr.Message)
	}
	var sent int
	allocs := testing.AllocsPerRun(50, func() {
		s := NewResponsesStream("resp_t", "m", 1, info, 10)
		write := func(evs []Event, err error) {
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				sent += len(ev.Data)
			}
		}
		for i := 0; i < 16; i++ {
			write(s.Add(&StreamChunk{ID: "c", Choices: []StreamChoice{{Content: " fox"}}}))
		}
		write(s.Add(&StreamChunk{ID: "c", Choices: []StreamChoice{{FinishReason: "stop"}}}))
		write(s.Add(&StreamChunk{ID: "c", Usage: &Usage{InputTokens: 12, OutputTokens: 16}}))
		write(s.Finish())
	})
	t.Logf("%.0f allocations for %d bytes of events an answer", allocs, sent/51)
	if allocs > 50 {
		t.Errorf("a streamed answer took %.0f allocations, want at most 50", allocs)
	}
}

// TestReasoningEcho: the request's reasoning as the response echoes it, written by hand, is what
// json.Marshal writes of its effort and summary (null when absent).
func TestReasoningEcho(t *testing.T) {
	for _, r := range []string{`{"effort":"low"}`, `{"summary":"auto"}`, `{ "effort" : "high", "summary" : "detailed" }`,
		`{"effort":null,"generate_summary":"concise"}`, `{}`} {
		_, info, terr := responsesJSON([]byte(`{"input":"hi","reasoning":`+r+`}`), Options{})
		if terr != nil {
			t.Fatalf("%s: %s", r, terr.Message)
		}
		var f map[string]json.RawMessage
		json.Unmarshal([]byte(r), &f)
		want, _ := json.Marshal(struct {
			Effort  json.RawMessage `json:"effort"`
			Summary json.RawMessage `json:"summary"`
		}{f["effort"], f["summary"]})
		if string(info.echo.reasoning) != string(want) {
			t.Errorf("%s: echo %s, want %s", r, info.echo.reasoning, want)
		}
	}
}

// TestAFinishedStreamKeepsOnlyItsLastEvent: the response a finished stream keeps (Response, which the
// run's record and the recent responses keep, counted by its length) stands in a buffer sized for the
// last event, not in the larger one that carried the stream's other events (for Codex's request, two
// copies of the response and the first chunk's events).
func TestAFinishedStreamKeepsOnlyItsLastEvent(t *testing.T) {
	_, info, e := ResponsesToChat(agentBody(t, "testdata/responses/request/codex_tool_turn.request.json"), Options{})
	if e != nil {
		t.Fatal(e)
	}
	for _, fail := range []bool{false, true} {
		s := NewResponsesStream("resp_keep", "m", 1, info, 10)
		for _, piece := range []string{"The ", "fox ", "runs."} {
			if _, err := s.Add(&StreamChunk{Choices: []StreamChoice{{Content: piece}}}); err != nil {
				t.Fatal(err)
			}
		}
		if fail {
			s.Fail("server_error", "gone")
		} else if _, err := s.Finish(); err != nil {
			t.Fatal(err)
		}
		kept := s.Response()
		if !bytes.HasPrefix(kept, []byte(`{"id":"resp_keep"`)) {
			t.Fatalf("kept %.60s", kept)
		}
		// The buffer holds the event around the response (its type and sequence number) and the
		// estimate's margin, not a second copy of the response.
		if extra := cap(s.buf) - len(kept); extra > len(kept)/2 {
			t.Errorf("failed %v: the kept response (%d bytes) stands in a buffer of %d", fail, len(kept), cap(s.buf))
		}
	}
}

// A released stream's buffer is where the next stream writes its events; the response the first one
// kept, and the events the second one returns, stay whole.
func TestAReleasedStreamLendsItsBufferOnly(t *testing.T) {
	_, info, e := ResponsesToChat(agentBody(t, "testdata/responses/request/codex_tool_turn.request.json"), Options{})
	if e != nil {
		t.Fatal(e)
	}
	run := func(id, text string) (*ResponsesStream, []byte) {
		s := NewResponsesStream(id, "m", 1, info, 10)
		var sent []byte
		for _, piece := range []string{text, " and more"} {
			evs, err := s.Add(&StreamChunk{Choices: []StreamChoice{{Content: piece}}})
			if err != nil {
				t.Fatal(err)
			}
			s.Release() // before the end: nothing happens
			for _, ev := range evs {
				sent = append(append(sent, ev.Data...), '\n')
			}
		}
		evs, err := s.Finish()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			sent = append(append(sent, ev.Data...), '\n')
		}
		return s, sent
	}
	first, _ := run("resp_first", "one")
	kept := append([]byte(nil), first.Response()...)
	first.Release()
	first.Release()
	if first.spare != nil {
		t.Error("the buffer is still the stream's")
	}
	second, sent := run("resp_second", "two")
	if !bytes.Equal(first.Response(), kept) {
		t.Errorf("the first response changed: %.80s", first.Response())
	}
	for _, line := range bytes.Split(bytes.TrimSuffix(sent, []byte("\n")), []byte("\n")) {
		if !json.Valid(line) || bytes.Contains(line, []byte("resp_first")) || bytes.Contains(line, []byte(`"one`)) {
			t.Fatalf("an event of the second stream: %.120s", line)
		}
	}
	if !bytes.Contains(second.Response(), []byte(`"two and more"`)) {
		t.Errorf("second %.200s", second.Response())
	}
}
