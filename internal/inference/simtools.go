package inference

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/svcdev/svc/internal/jsonx"
)

// The simulator calls tools, deterministically, so that agents can be tried on a laptop through both
// chat completions and the Messages translation (docs/API.md, "Models file"): with `tools` in the
// request and `tool_choice` not "none", it calls
//   - the named function when tool_choice names one;
//   - every tool whose name the last user message mentions (only the first when
//     parallel_tool_calls is false); of a message of several lines, its last line, where agents put
//     the request after their context;
//   - the first tool when tool_choice is "required" and none is mentioned.
// Arguments are built from each tool's JSON schema: every required property (or the first property
// when none is required) gets, by type, that same line of the last user message (string), 1 (number,
// integer), true (boolean), [] (array) or {} (object). After a tool's answer (a last message of role
// "tool", whatever system or developer entries follow it: Claude Code adds some after its tool results),
// the simulator answers in text as usual, so that an agent's tool loop ends.

type simTool struct {
	Name   string
	Schema struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	order []string // property names in the order the schema lists them
}

type simToolCall struct {
	ID, Name, Arguments string
}

// simToolCalls decides the tool calls of an answer to c (none when it answers in text).
func simToolCalls(c *Call) []simToolCall {
	raw, ok := c.Body["tools"]
	if !ok || len(c.Messages) == 0 {
		return nil
	}
	if last := lastTurn(c.Messages); last < 0 || c.Messages[last].Role == "tool" {
		return nil
	}
	var wire []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &wire) != nil || len(wire) == 0 {
		return nil
	}
	tools := make([]simTool, 0, len(wire))
	for _, w := range wire {
		if w.Function.Name == "" {
			continue
		}
		t := simTool{Name: w.Function.Name}
		if len(w.Function.Parameters) > 0 {
			json.Unmarshal(w.Function.Parameters, &t.Schema)
			t.order = propertyOrder(w.Function.Parameters)
		}
		tools = append(tools, t)
	}
	if len(tools) == 0 {
		return nil
	}
	choice, named := "auto", ""
	if tc, ok := c.Body["tool_choice"]; ok && string(tc) != "null" {
		if json.Unmarshal(tc, &choice) != nil {
			var obj struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			json.Unmarshal(tc, &obj)
			choice, named = "function", obj.Function.Name
		}
	}
	parallel := true
	if p, ok := c.Body["parallel_tool_calls"]; ok {
		json.Unmarshal(p, &parallel)
	}
	user := ""
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" {
			user = lastLine(c.Messages[i].Content)
			break
		}
	}
	var chosen []simTool
	switch choice {
	case "none":
		return nil
	case "function":
		for _, t := range tools {
			if t.Name == named {
				chosen = append(chosen, t)
			}
		}
	default:
		for _, t := range tools {
			if strings.Contains(user, t.Name) {
				chosen = append(chosen, t)
			}
		}
		if len(chosen) == 0 && choice == "required" {
			chosen = tools[:1]
		}
	}
	if len(chosen) > 1 && !parallel {
		chosen = chosen[:1]
	}
	calls := make([]simToolCall, len(chosen))
	for i, t := range chosen {
		calls[i] = simToolCall{ID: fmt.Sprintf("call_%s_%d", newCompletionID()[len("chatcmpl-"):], i), Name: t.Name,
			Arguments: t.arguments(user)}
	}
	return calls
}

// lastTurn is the index of the conversation's last message that is not a system or developer entry
// (-1 when there is none): what the model answers. Agents put such entries after a tool's answer.
func lastTurn(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if r := msgs[i].Role; r != "system" && r != "developer" {
			return i
		}
	}
	return -1
}

// lastLine is the last non-empty line of a message: agents put context before the request in one
// user turn (Claude Code's <system-reminder> blocks), and the request comes last.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimRight(text, " \t\r\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// arguments builds a call's arguments from the tool's schema.
func (t simTool) arguments(user string) string {
	names := t.Schema.Required
	if len(names) == 0 && len(t.order) > 0 {
		names = t.order[:1]
	}
	args := make(map[string]any, len(names))
	for _, name := range names {
		var typ string
		json.Unmarshal(t.Schema.Properties[name].Type, &typ)
		switch typ {
		case "number", "integer":
			args[name] = 1
		case "boolean":
			args[name] = true
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			args[name] = user
		}
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// propertyOrder lists a schema's property names in the order they are written.
func propertyOrder(schema json.RawMessage) []string {
	props := jsonx.Field(schema, "properties")
	var names []string
	if len(props) == 0 || props[0] != '{' {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(props)))
	dec.Token() // {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return names
		}
		if name, ok := tok.(string); ok {
			names = append(names, name)
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return names
		}
	}
	return names
}

// fragments splits a call's arguments the way inference servers stream them: in three pieces.
func fragments(args string) []string {
	if len(args) < 3 {
		return []string{args}
	}
	a, b := len(args)/3, 2*len(args)/3
	return []string{args[:a], args[a:b], args[b:]}
}
