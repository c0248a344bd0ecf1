package inference

import (
	"context"
	"encoding/json"
	"io"
	"testing"
)

func toolCall(t *testing.T, extra map[string]string, user string) *Call {
	t.Helper()
	body := map[string]json.RawMessage{"tools": json.RawMessage(`[
		{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
			"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}},
		{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}]`)}
	for k, v := range extra {
		body[k] = json.RawMessage(v)
	}
	return &Call{Model: "s", Served: "s", Body: body, Messages: []Message{{Role: "user", Content: user}}}
}

func TestSimulatorCallsTools(t *testing.T) {
	r, _ := NewRegistry([]ModelConfig{{Name: "s", Public: true, Simulator: &SimulatorConfig{Mode: ModeEcho}}})
	sim := r.Runtime("s")
	type call struct{ Name, Arguments string }
	for _, tc := range []struct {
		name  string
		extra map[string]string
		user  string
		want  []call
	}{
		{"mentioned tools, in parallel", nil, "use get_weather and get_time",
			[]call{{"get_weather", `{"city":"use get_weather and get_time","days":1}`}, {"get_time", `{"zone":"use get_weather and get_time"}`}}},
		{"parallel off: the first", map[string]string{"parallel_tool_calls": "false"}, "use get_weather and get_time",
			[]call{{"get_weather", `{"city":"use get_weather and get_time","days":1}`}}},
		{"required without a mention: the first tool", map[string]string{"tool_choice": `"required"`}, "Oslo",
			[]call{{"get_weather", `{"city":"Oslo","days":1}`}}},
		{"a named function", map[string]string{"tool_choice": `{"type":"function","function":{"name":"get_time"}}`}, "Oslo",
			[]call{{"get_time", `{"zone":"Oslo"}`}}},
		{"auto without a mention: text", nil, "hello there", nil},
		{"none: text", map[string]string{"tool_choice": `"none"`}, "use get_weather", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comp, err := sim.Complete(context.Background(), toolCall(t, tc.extra, tc.user))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Choices []struct {
					Message struct {
						Content   *string
						ToolCalls []struct {
							ID       string
							Function call
						} `json:"tool_calls"`
					}
					FinishReason string `json:"finish_reason"`
				}
			}
			if err := json.Unmarshal(comp.JSON, &out); err != nil {
				t.Fatal(err)
			}
			msg := out.Choices[0].Message
			if tc.want == nil {
				if msg.Content == nil || *msg.Content != tc.user || len(msg.ToolCalls) != 0 || out.Choices[0].FinishReason != "stop" {
					t.Fatalf("want the text answer: %s", comp.JSON)
				}
				return
			}
			if out.Choices[0].FinishReason != "tool_calls" || msg.Content != nil || len(msg.ToolCalls) != len(tc.want) {
				t.Fatalf("tool answer: %s", comp.JSON)
			}
			for i, w := range tc.want {
				if msg.ToolCalls[i].Function != w || msg.ToolCalls[i].ID == "" {
					t.Errorf("call %d = %+v, want %+v", i, msg.ToolCalls[i], w)
				}
			}
			// The stream carries the same calls, opened by id and name, arguments in fragments.
			st, err := sim.Stream(context.Background(), toolCall(t, tc.extra, tc.user))
			if err != nil {
				t.Fatal(err)
			}
			args := map[int]string{}
			names := map[int]string{}
			finish, fragments := "", 0
			for {
				ch, err := st.Next()
				if err == io.EOF {
					break
				}
				for _, c := range ch.Choices {
					for _, d := range c.ToolCalls {
						if d.Name != "" {
							names[d.Index] = d.Name
						} else {
							fragments++
						}
						args[d.Index] += d.Arguments
					}
					if c.FinishReason != "" {
						finish = c.FinishReason
					}
				}
			}
			for i, w := range tc.want {
				if names[i] != w.Name || args[i] != w.Arguments {
					t.Errorf("streamed call %d: %s %s", i, names[i], args[i])
				}
			}
			if finish != "tool_calls" || fragments < 3*len(tc.want) {
				t.Errorf("stream finish %q, %d argument fragments", finish, fragments)
			}
		})
	}
}

func TestSimulatorAnswersAToolResult(t *testing.T) {
	r, _ := NewRegistry([]ModelConfig{{Name: "s", Public: true, Simulator: &SimulatorConfig{Mode: ModeEcho}}})
	c := toolCall(t, map[string]string{"tool_choice": `"required"`}, "Oslo")
	c.Messages = append(c.Messages, Message{Role: "assistant"}, Message{Role: "tool", Content: "12 degrees and rain"})
	comp, err := r.Runtime("s").Complete(context.Background(), c)
	if err != nil || comp.Content != "12 degrees and rain" || comp.FinishReason != "stop" {
		t.Fatalf("after a tool result: %v %q %q", err, comp.Content, comp.FinishReason)
	}
}

// TestSimulatorEndsAToolLoop: system or developer entries after a tool's answer (Claude Code adds
// them) do not make the simulator call the tool again; it answers the tool result in text.
func TestSimulatorEndsAToolLoop(t *testing.T) {
	r, _ := NewRegistry([]ModelConfig{{Name: "s", Public: true, Simulator: &SimulatorConfig{Mode: ModeEcho}}})
	for _, role := range []string{"system", "developer"} {
		c := toolCall(t, map[string]string{}, "get_weather in Oslo")
		c.Messages = append(c.Messages, Message{Role: "assistant"}, Message{Role: "tool", Content: "12 degrees and rain"},
			Message{Role: role, Content: "Remember the weather tool."})
		comp, err := r.Runtime("s").Complete(context.Background(), c)
		if err != nil || comp.Content != "12 degrees and rain" || comp.FinishReason != "stop" {
			t.Fatalf("a %s entry after a tool result: %v %+v", role, err, comp)
		}
	}
}
