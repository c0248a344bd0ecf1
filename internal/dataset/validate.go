package dataset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

// The validators below check lines as OpenAI's fine-tuning guides describe them (supervised chat
// format with tool calling and weights; direct preference optimization), independently of how this
// package writes them: they read the line as generic JSON.

// toolName is what OpenAI accepts as a function's name.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateChatLine checks one line of OpenAI's chat fine-tuning format: a JSON object on one line with
// "messages" and optional "tools" and "parallel_tool_calls"; roles system, user, assistant and tool;
// content a string or parts (text; image_url in user messages); no empty assistant turn; assistant
// "weight" 0 or 1; every tool call of an assistant turn answered by tool messages that follow it
// (except the last message's, the answer being trained), and every tool message answering one; at
// least one assistant message. "reasoning_content" on assistant messages is svc's extension (see
// Options.Reasoning), accepted as a string.
func ValidateChatLine(line []byte) error {
	top, err := object(line, "line", "messages", "tools", "parallel_tool_calls")
	if err != nil {
		return err
	}
	if err := validateTools(top["tools"]); err != nil {
		return err
	}
	if err := validateParallel(top["parallel_tool_calls"]); err != nil {
		return err
	}
	msgs, err := array(top["messages"], "messages")
	if err != nil {
		return err
	}
	assistants, err := validateMessages(msgs, "messages", true, false)
	if err != nil {
		return err
	}
	if assistants == 0 {
		return fmt.Errorf("messages: no assistant message to train on")
	}
	return nil
}

// ValidatePreferenceLine checks one line of OpenAI's preference (DPO) format: {"input": {"messages",
// "tools"?, "parallel_tool_calls"?}, "preferred_output": [one assistant message], "non_preferred_output":
// [one assistant message]}; text only (OpenAI's preference tuning takes text inputs and outputs), the
// input's messages as in ValidateChatLine with every tool call answered, each output a non-empty text.
func ValidatePreferenceLine(line []byte) error {
	top, err := object(line, "line", "input", "preferred_output", "non_preferred_output")
	if err != nil {
		return err
	}
	in, err := object(top["input"], "input", "messages", "tools", "parallel_tool_calls")
	if err != nil {
		return err
	}
	if err := validateTools(in["tools"]); err != nil {
		return err
	}
	if err := validateParallel(in["parallel_tool_calls"]); err != nil {
		return err
	}
	msgs, err := array(in["messages"], "input.messages")
	if err != nil {
		return err
	}
	if _, err := validateMessages(msgs, "input.messages", false, true); err != nil {
		return err
	}
	for _, name := range []string{"preferred_output", "non_preferred_output"} {
		out, err := array(top[name], name)
		if err != nil {
			return err
		}
		if len(out) != 1 {
			return fmt.Errorf("%s: must hold exactly one assistant message", name)
		}
		m, err := object(out[0], name+"[0]", "role", "content", "reasoning_content")
		if err != nil {
			return err
		}
		if role, _ := stringOf(m["role"]); role != "assistant" {
			return fmt.Errorf("%s[0].role: must be assistant", name)
		}
		text, err := textContent(m["content"], name+"[0].content")
		if err != nil {
			return err
		}
		if text == "" {
			return fmt.Errorf("%s[0].content: must not be empty", name)
		}
		if err := optionalString(m["reasoning_content"], name+"[0].reasoning_content"); err != nil {
			return err
		}
	}
	return nil
}

// validateMessages checks a conversation's messages and returns how many are assistant messages.
// final allows the last message's tool calls to go unanswered; textOnly refuses images.
func validateMessages(msgs []json.RawMessage, at string, final, textOnly bool) (int, error) {
	if len(msgs) == 0 {
		return 0, fmt.Errorf("%s: must not be empty", at)
	}
	assistants := 0
	ids := map[string]bool{}     // every tool call id of the line, which must be unique
	pending := map[string]bool{} // the calls of the latest assistant message not yet answered
	for i, raw := range msgs {
		where := fmt.Sprintf("%s[%d]", at, i)
		var head struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(raw, &head) != nil {
			return 0, fmt.Errorf("%s: must be an object with a role", where)
		}
		if head.Role != "tool" && len(pending) > 0 {
			return 0, fmt.Errorf("%s: a tool call of the assistant before it has no tool message", where)
		}
		switch head.Role {
		case "system":
			m, err := object(raw, where, "role", "content", "name")
			if err != nil {
				return 0, err
			}
			if _, err := textContent(m["content"], where+".content"); err != nil {
				return 0, err
			}
			if err := optionalString(m["name"], where+".name"); err != nil {
				return 0, err
			}
		case "user":
			m, err := object(raw, where, "role", "content", "name")
			if err != nil {
				return 0, err
			}
			if err := userContent(m["content"], where+".content", textOnly); err != nil {
				return 0, err
			}
			if err := optionalString(m["name"], where+".name"); err != nil {
				return 0, err
			}
		case "assistant":
			assistants++
			m, err := object(raw, where, "role", "content", "tool_calls", "weight", "name", "reasoning_content")
			if err != nil {
				return 0, err
			}
			text := ""
			if c, ok := m["content"]; ok && string(c) != "null" {
				if text, err = textContent(c, where+".content"); err != nil {
					return 0, err
				}
			}
			calls, err := validateToolCalls(m["tool_calls"], where+".tool_calls", ids)
			if err != nil {
				return 0, err
			}
			if text == "" && len(calls) == 0 {
				return 0, fmt.Errorf("%s: an assistant message needs content or tool calls", where)
			}
			for _, id := range calls {
				pending[id] = true
			}
			if w, ok := m["weight"]; ok && string(w) != "0" && string(w) != "1" {
				return 0, fmt.Errorf("%s.weight: must be 0 or 1", where)
			}
			if err := optionalString(m["name"], where+".name"); err != nil {
				return 0, err
			}
			if err := optionalString(m["reasoning_content"], where+".reasoning_content"); err != nil {
				return 0, err
			}
			if final && i == len(msgs)-1 {
				clear(pending) // the answer being trained: its calls are answered after the line
			}
		case "tool":
			m, err := object(raw, where, "role", "content", "tool_call_id")
			if err != nil {
				return 0, err
			}
			id, ok := stringOf(m["tool_call_id"])
			if !ok || !pending[id] {
				return 0, fmt.Errorf("%s.tool_call_id: must name a call of the assistant message before it not yet answered", where)
			}
			delete(pending, id)
			if _, err := textContent(m["content"], where+".content"); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("%s.role: must be system, user, assistant or tool", where)
		}
	}
	if len(pending) > 0 {
		return 0, fmt.Errorf("%s: a tool call of the last assistant message has no tool message", at)
	}
	return assistants, nil
}

// validateToolCalls checks an assistant's tool calls and returns their ids.
func validateToolCalls(raw json.RawMessage, at string, ids map[string]bool) ([]string, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	calls, err := array(raw, at)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, c := range calls {
		where := fmt.Sprintf("%s[%d]", at, i)
		m, err := object(c, where, "id", "type", "function")
		if err != nil {
			return nil, err
		}
		id, ok := stringOf(m["id"])
		if !ok || id == "" {
			return nil, fmt.Errorf("%s.id: must be a non-empty string", where)
		}
		if ids[id] {
			return nil, fmt.Errorf("%s.id: %q is used twice", where, id)
		}
		ids[id] = true
		if t, _ := stringOf(m["type"]); t != "function" {
			return nil, fmt.Errorf("%s.type: must be function", where)
		}
		f, err := object(m["function"], where+".function", "name", "arguments")
		if err != nil {
			return nil, err
		}
		if name, ok := stringOf(f["name"]); !ok || !toolName.MatchString(name) {
			return nil, fmt.Errorf("%s.function.name: must be 1-64 letters, digits, _ or -", where)
		}
		if _, ok := stringOf(f["arguments"]); !ok {
			return nil, fmt.Errorf("%s.function.arguments: must be a string", where)
		}
		out = append(out, id)
	}
	return out, nil
}

// validateTools checks the tools: function definitions with unique names and object parameters.
func validateTools(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	tools, err := array(raw, "tools")
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for i, t := range tools {
		where := fmt.Sprintf("tools[%d]", i)
		m, err := object(t, where, "type", "function")
		if err != nil {
			return err
		}
		if typ, _ := stringOf(m["type"]); typ != "function" {
			return fmt.Errorf("%s.type: must be function", where)
		}
		f, err := object(m["function"], where+".function", "name", "description", "parameters", "strict")
		if err != nil {
			return err
		}
		name, ok := stringOf(f["name"])
		if !ok || !toolName.MatchString(name) {
			return fmt.Errorf("%s.function.name: must be 1-64 letters, digits, _ or -", where)
		}
		if names[name] {
			return fmt.Errorf("%s.function.name: %q is defined twice", where, name)
		}
		names[name] = true
		if err := optionalString(f["description"], where+".function.description"); err != nil {
			return err
		}
		if p, ok := f["parameters"]; ok {
			if _, err := object(p, where+".function.parameters"); err != nil {
				return err
			}
		}
		if s, ok := f["strict"]; ok && string(s) != "true" && string(s) != "false" {
			return fmt.Errorf("%s.function.strict: must be a boolean", where)
		}
	}
	return nil
}

func validateParallel(raw json.RawMessage) error {
	if raw != nil && string(raw) != "true" && string(raw) != "false" {
		return fmt.Errorf("parallel_tool_calls: must be a boolean")
	}
	return nil
}

// textContent checks content that holds text only (a string, or text parts) and returns the text.
func textContent(raw json.RawMessage, at string) (string, error) {
	if s, ok := stringOf(raw); ok {
		return s, nil
	}
	parts, err := array(raw, at)
	if err != nil {
		return "", fmt.Errorf("%s: must be a string or text parts", at)
	}
	text := ""
	for i, p := range parts {
		m, err := object(p, fmt.Sprintf("%s[%d]", at, i), "type", "text")
		if err != nil {
			return "", err
		}
		typ, _ := stringOf(m["type"])
		s, ok := stringOf(m["text"])
		if typ != "text" || !ok {
			return "", fmt.Errorf("%s[%d]: must be a text part", at, i)
		}
		text += s
	}
	return text, nil
}

// userContent checks a user message's content: a string, or text and image_url parts.
func userContent(raw json.RawMessage, at string, textOnly bool) error {
	if _, ok := stringOf(raw); ok {
		return nil
	}
	parts, err := array(raw, at)
	if err != nil {
		return fmt.Errorf("%s: must be a string or content parts", at)
	}
	for i, p := range parts {
		where := fmt.Sprintf("%s[%d]", at, i)
		m, err := object(p, where, "type", "text", "image_url")
		if err != nil {
			return err
		}
		switch typ, _ := stringOf(m["type"]); typ {
		case "text":
			if _, ok := stringOf(m["text"]); !ok || m["image_url"] != nil {
				return fmt.Errorf("%s: a text part holds a string text only", where)
			}
		case "image_url":
			if textOnly {
				return fmt.Errorf("%s: preference lines take text only", where)
			}
			img, err := object(m["image_url"], where+".image_url", "url", "detail")
			if err != nil || m["text"] != nil {
				return fmt.Errorf("%s: an image_url part holds {\"url\", \"detail\"?} only", where)
			}
			if u, ok := stringOf(img["url"]); !ok || u == "" {
				return fmt.Errorf("%s.image_url.url: must be a non-empty string", where)
			}
			if d, ok := img["detail"]; ok {
				if s, _ := stringOf(d); s != "low" && s != "high" && s != "auto" {
					return fmt.Errorf("%s.image_url.detail: must be low, high or auto", where)
				}
			}
		default:
			return fmt.Errorf("%s.type: must be text or image_url", where)
		}
	}
	return nil
}

// object reads raw as a JSON object whose members are among allowed (any when none are given).
func object(raw json.RawMessage, at string, allowed ...string) (map[string]json.RawMessage, error) {
	if at == "line" && bytes.ContainsAny(raw, "\n\r") {
		return nil, fmt.Errorf("line: must be one line")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s: must be a JSON object", at)
	}
	if len(allowed) > 0 {
		for k := range m {
			found := false
			for _, a := range allowed {
				found = found || k == a
			}
			if !found {
				return nil, fmt.Errorf("%s: unknown member %q", at, k)
			}
		}
	}
	return m, nil
}

func array(raw json.RawMessage, at string) ([]json.RawMessage, error) {
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil || a == nil {
		return nil, fmt.Errorf("%s: must be an array", at)
	}
	return a, nil
}

func stringOf(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func optionalString(raw json.RawMessage, at string) error {
	if raw == nil {
		return nil
	}
	if _, ok := stringOf(raw); !ok {
		return fmt.Errorf("%s: must be a string", at)
	}
	return nil
}

// ValidateToolsDeclared checks that every tool call of a chat line (its messages' and its answer's)
// names a function the line's "tools" declares: what a trainer needs to teach the calls with their
// schemas. OpenAI's format does not require it; svc's lines hold it (docs/API.md, "Export: a run as a
// fine-tuning line").
func ValidateToolsDeclared(line []byte) error {
	var l struct {
		Messages []struct {
			ToolCalls []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return fmt.Errorf("line: %v", err)
	}
	declared := map[string]bool{}
	for _, t := range l.Tools {
		declared[t.Function.Name] = true
	}
	for i, m := range l.Messages {
		for _, tc := range m.ToolCalls {
			if !declared[tc.Function.Name] {
				return fmt.Errorf("messages[%d]: a call of %q, which tools does not declare", i, tc.Function.Name)
			}
		}
	}
	return nil
}
