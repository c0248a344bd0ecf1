package dataset

import (
	"strings"
	"testing"
)

// typicalRuns are runs as an agent's turn records them on each surface: a system prompt, a tool, a
// few turns with a tool call and its result, about 2 KB of request.
func typicalRuns() map[string]Run {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	return map[string]Run{
		"chat": {Status: "ok", Request: []byte(`{"model":"m","stream":true,"tools":[` + weatherTool + `],"messages":[{"role":"system","content":"` + long + `"},` +
			`{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"18C and sunny"},{"role":"assistant","content":"` + long + `"},{"role":"user","content":"And tomorrow?"}]}`),
			Response: []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` + long + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":300,"completion_tokens":100,"total_tokens":400}}`)},
		"messages": {Status: "ok", Request: []byte(`{"model":"m","max_tokens":1024,"system":"` + long + `","tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],` +
			`"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C and sunny"}]},{"role":"assistant","content":"` + long + `"},{"role":"user","content":"And tomorrow?"}]}`),
			Response: []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` + long + `"}],"stop_reason":"end_turn","usage":{"input_tokens":300,"output_tokens":100}}`)},
		"responses": {Status: "ok", Request: []byte(`{"model":"m","instructions":"` + long + `","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],` +
			`"input":[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"18C and sunny"},{"role":"assistant","content":[{"type":"output_text","text":"` + long + `"}]},{"role":"user","content":"And tomorrow?"}]}`),
			Response: []byte(`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + long + `"}]}]}`)},
	}
}

func BenchmarkChatLine(b *testing.B) {
	for _, surface := range []string{"chat", "messages", "responses"} {
		run := typicalRuns()[surface]
		b.Run(surface, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(run.Request) + len(run.Response)))
			for b.Loop() {
				if _, err := ChatLine(run, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The benchmark's runs are real lines: a change that broke them would otherwise be measured as fast.
func TestTypicalRuns(t *testing.T) {
	for name, run := range typicalRuns() {
		line, err := ChatLine(run, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := ValidateChatLine(line); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
