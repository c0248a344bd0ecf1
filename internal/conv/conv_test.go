package conv

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A chat request is read as the model sees it: contents as strings or parts, reasoning under either of
// vLLM's names, tool calls typed, a refusal part as text; a part svc has no reading of is named.
func TestReadChat(t *testing.T) {
	c, err := ReadChat([]byte(`{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}},{"type":"text","text":"here"}]},
		{"role":"assistant","content":null,"reasoning":"think","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":[{"type":"refusal","refusal":"no"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 4 || len(c.Tools) != 1 || c.Tools[0].Function.Name != "f" {
		t.Fatalf("%+v", c)
	}
	if got := Text(c.Messages[1].Content); got != "look\nhere" {
		t.Errorf("user text %q", got)
	}
	if _, ok := Joined(c.Messages[1].Content); ok {
		t.Error("a turn with an image joined as text")
	}
	a := c.Messages[2]
	if a.Content != nil || a.ReasoningContent != "think" || len(a.ToolCalls) != 1 || a.ToolCalls[0].Type != "function" {
		t.Errorf("assistant %+v", a)
	}
	if s, ok := Joined(c.Messages[3].Content); !ok || s != "no" || c.Messages[3].ToolCallID != "c1" {
		t.Errorf("tool %+v", c.Messages[3])
	}
	_, err = ReadChat([]byte(`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`))
	var part *UnreadPart
	if !errors.As(err, &part) || part.Type != "input_audio" {
		t.Errorf("audio: %v", err)
	}
	if _, err := ReadChat([]byte(`{"messages":"hi"}`)); !errors.Is(err, ErrShape) {
		t.Errorf("messages a string: %v", err)
	}
}

// Text is one rule for every reader: a string as it is, text parts joined by newlines, nothing else.
func TestText(t *testing.T) {
	for _, c := range []struct {
		content any
		want    string
	}{
		{nil, ""},
		{"a", "a"},
		{[]Part{TextPart("a"), {Type: "image_url", ImageURL: &ImageURL{URL: "u"}}, TextPart(""), TextPart("b")}, "a\n\nb"},
		{[]Part{}, ""},
	} {
		if got := Text(c.content); got != c.want {
			t.Errorf("Text(%v) = %q, want %q", c.content, got, c.want)
		}
	}
}

// PromptChars counts the text of a prompt, whatever the surface, and not its roles, types or media.
func TestPromptChars(t *testing.T) {
	cases := []struct {
		body string
		want int
	}{
		{`{"model":"m","messages":[{"role":"user","content":"count these prompt words please"}]}`, 31},
		{`{"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`, 11},
		{`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]}],"tools":[{"name":"f","description":"does","input_schema":{"type":"object"}}]}`, 1 + 7 + 1 + 4 + 17},
		{`{"instructions":"sys","input":"hello"}`, 8},
		{`{"messages":` + strings.Repeat("[", 100) + `"deep"` + strings.Repeat("]", 100) + `}`, 0},
	}
	for _, c := range cases {
		var body map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.body), &body); err != nil {
			t.Fatal(err)
		}
		if got := PromptChars(body); got != c.want {
			t.Errorf("PromptChars(%s) = %d, want %d", c.body, got, c.want)
		}
	}
}

// A run listing's preview is the last user message's text of any surface, on one line, cut with "…".
func TestPreviewIsTheLastUserText(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"first"},{"role":"assistant","content":"ok"},{"role":"user","content":"second\n  question"}]}`, "second question"},
		{`{"system":"x","messages":[{"role":"user","content":[{"type":"text","text":"from Messages"},{"type":"image","source":{}}]}]}`, "from Messages"},
		{`{"input":"a Responses string"}`, "a Responses string"},
		{`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a Responses item"}]}]}`, "a Responses item"},
		{`{"messages":[{"role":"user","content":"` + strings.Repeat("long ", 40) + `"}]}`, strings.TrimSpace(strings.Repeat("long ", 9)) + "…"},
		{`{"messages":"not a list"}`, ""},
		{`not json`, ""},
	} {
		if got := Preview([]byte(tc.body), 48); got != tc.want {
			t.Errorf("Preview(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

func TestBodyIsAChatRequestReadChatReads(t *testing.T) {
	c := Conversation{
		Messages: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: Function{Name: "f", Arguments: "{}"}}}}, {Role: "tool", ToolCallID: "c1", Content: "42"}},
		Tools:    []Tool{{Type: "function", Function: ToolFunc{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}},
	}
	body, err := c.Body(map[string]any{"model": "m", "temperature": 0})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadChat(body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("read back %+v\nwant %+v", back, c)
	}
	if !strings.Contains(string(body), `"model":"m"`) || !strings.Contains(string(body), `"temperature":0`) {
		t.Errorf("params lost: %s", body)
	}
}
