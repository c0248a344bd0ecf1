package dataset

import (
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/inference"
)

// Streamed answers are recorded as the edge's assemblers write them (inference.NewAnswer): these tests
// feed the assemblers a stream and convert what they record, whole and cut.

func TestRecordedChatStream(t *testing.T) {
	a := inference.NewAnswer(inference.SurfaceChat, "m")
	for _, ch := range []inference.Chunk{
		{ID: "chatcmpl-1", Created: 1, Choices: []inference.ChunkChoice{{Role: "assistant", Reasoning: "look it up"}}},
		{Choices: []inference.ChunkChoice{{Content: "Checking."}}},
		{Choices: []inference.ChunkChoice{{ToolCalls: []inference.ToolCallDelta{{ID: "call_1", Name: "get_weather", Arguments: `{"ci`}}}}},
		{Choices: []inference.ChunkChoice{{ToolCalls: []inference.ToolCallDelta{{Arguments: `ty":"Paris"}`}}}}},
		{Choices: []inference.ChunkChoice{{FinishReason: "tool_calls"}}},
	} {
		a.Add(&ch)
	}
	req := []byte(`{"model":"m","stream":true,"tools":[` + weatherTool + `],"messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	run := Run{Status: "ok", Request: req, Response: a.JSON(inference.Usage{PromptTokens: 5, CompletionTokens: 9}, nil)}
	want := `{"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"Checking.",` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}],"tools":[` + weatherTool + `]}`
	checkLine(t, run, Options{}, want)
	wantReasoning := strings.Replace(want, `"content":"Checking.",`, `"content":"Checking.","reasoning_content":"look it up",`, 1)
	checkLine(t, run, Options{Reasoning: true}, wantReasoning)

	// The same stream cut by the upstream: recorded with the error beside what it delivered.
	cut := inference.NewAnswer(inference.SurfaceChat, "m")
	cut.Add(&inference.Chunk{ID: "chatcmpl-2", Choices: []inference.ChunkChoice{{Role: "assistant", Content: "Half an ans"}}})
	run = Run{Status: "error", Request: req, Response: cut.JSON(inference.Usage{}, []byte(`{"error":{"message":"upstream went away","type":"api_error"}}`))}
	if why := Check(run, Options{}); why != ReasonCut {
		t.Fatalf("a cut stream: Check = %q, want cut", why)
	}
	checkLine(t, run, Options{Cut: true}, `{"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"Half an ans"}],"tools":[`+weatherTool+`]}`)
}

func TestRecordedMessagesStream(t *testing.T) {
	a := inference.NewAnswer(inference.SurfaceMessages, "claude")
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"need the tool"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me look."}}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":12}}`,
	} {
		a.Add(&inference.Chunk{Event: []byte("x"), JSON: []byte(ev)})
	}
	req := []byte(`{"model":"claude","max_tokens":256,"stream":true,"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],` +
		`"messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	run := Run{Status: "ok", Request: req, Response: a.JSON(inference.Usage{PromptTokens: 5, CompletionTokens: 12}, nil)}
	want := `{"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"Let me look.",` +
		`"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}],"tools":[` + weatherTool + `]}`
	checkLine(t, run, Options{}, want)
	checkLine(t, run, Options{Reasoning: true}, strings.Replace(want, `"content":"Let me look.",`, `"content":"Let me look.","reasoning_content":"need the tool",`, 1))
}

func checkLine(t *testing.T, r Run, opt Options, want string) {
	t.Helper()
	line, err := ChatLine(r, opt)
	if err != nil {
		t.Fatalf("ChatLine: %v\nanswer %s", err, r.Response)
	}
	if string(line) != want {
		t.Fatalf("line\n got %s\nwant %s\nanswer %s", line, want, r.Response)
	}
	if err := ValidateChatLine(line); err != nil {
		t.Fatalf("the validator refuses it: %v", err)
	}
}
