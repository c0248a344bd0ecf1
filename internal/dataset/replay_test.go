package dataset

import (
	"encoding/json"
	"testing"
)

// A replay sends the request the model saw, in chat form, with its sampling parameters, temperature 0
// when it set none, not streamed; the recorded answer is read in chat form on every surface.
func TestReplayOfEverySurface(t *testing.T) {
	for _, c := range []struct {
		name              string
		run               Run
		wantTemp          string
		wantFinish        string
		wantText, wantFun string
	}{
		{"chat, streamed, no temperature", Run{Status: "ok",
			Request:  []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"top_p":0.9,"messages":[{"role":"user","content":"hi"}]}`),
			Response: []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`)},
			"0", "stop", "hello", ""},
		{"chat with its temperature", Run{Status: "ok",
			Request:  []byte(`{"temperature":0.7,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`),
			Response: []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hel"},"finish_reason":"length"}]}`)},
			"0.7", "length", "hel", ""},
		{"messages tool_use", Run{Status: "ok",
			Request:  []byte(`{"model":"m","max_tokens":100,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"messages":[{"role":"user","content":"weather?"}]}`),
			Response: []byte(`{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],"stop_reason":"tool_use"}`)},
			"0", "tool_calls", "", "get_weather"},
		{"responses function call", Run{Status: "ok",
			Request:  []byte(`{"model":"m","input":"weather?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`),
			Response: []byte(`{"object":"response","status":"completed","output":[{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"}]}`)},
			"0", "tool_calls", "", "get_weather"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := ReplayOf(c.run, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			if string(body["temperature"]) != c.wantTemp || body["stream"] != nil || body["stream_options"] != nil || body["messages"] == nil {
				t.Fatalf("body: %s", r.Body)
			}
			a := r.Answer
			if a.FinishReason != c.wantFinish || a.Text != c.wantText || (c.wantFun != "" && (len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Name != c.wantFun)) {
				t.Fatalf("answer: %+v", a)
			}
			if c.wantFun != "" && (len(r.Conversation.Tools) != 1 || r.Conversation.Tools[0].Function.Name != c.wantFun) {
				t.Fatalf("tools: %+v", r.Conversation.Tools)
			}
		})
	}
	if _, err := ReplayOf(Run{Status: "error", Request: []byte(`{"messages":[]}`), Response: []byte(`{"error":{"message":"x"}}`)}, Options{}); ReasonOf(err) != ReasonFailed {
		t.Fatalf("a failed run: %v", err)
	}
}
