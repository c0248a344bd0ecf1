package dataset

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/svcdev/svc/internal/conv"
)

// fromChat reads a chat completions run: the request's conversation as internal/conv reads it, and
// the first choice's message as the answer.
func fromChat(r Run, _ Options) (conversation, error) {
	in, err := conv.ReadChat(r.Request)
	if err != nil {
		return conversation{}, readRefusal("request", err)
	}
	var resp struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.Response, &resp); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "answer: %v", err)
	}
	if len(resp.Choices) == 0 {
		return conversation{}, refuse(ReasonEmpty, "the answer has no choices")
	}
	m, err := conv.ReadChatMessage(resp.Choices[0].Message)
	if err != nil {
		return conversation{}, readRefusal("answer", err)
	}
	m.Role = "assistant"
	a, rerr := lineMessage(m)
	if rerr != nil {
		return conversation{}, refuse(rerr.Reason, "answer: %s", rerr.Detail)
	}
	c, err := lineOf(in, a, nil)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(r.Request, &c.request); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "request: %v", err)
	}
	return c, nil
}

// readRefusal is the refusal of a request or answer conv cannot read: a part it has no reading of is
// unsupported, anything else unparseable.
func readRefusal(where string, err error) *Refused {
	var part *conv.UnreadPart
	if errors.As(err, &part) {
		return refuse(ReasonUnsupported, "%s: %v", where, err)
	}
	return refuse(ReasonUnparseable, "%s: %v", where, err)
}

// lineOf writes a conversation and its answer as a line holds them: its function tools, and each turn
// in the fine-tuning form (lineMessage). The calls of a tool the translation left out (leftOut: a
// custom tool with a grammar, which svc cannot hold a chat model to) are kept out with their results
// (docs/API.md, "Export: a run as a fine-tuning line"); an answer that calls one is refused, as there
// is nothing left of it to train on.
func lineOf(in conv.Conversation, answer message, leftOut map[string]bool) (conversation, error) {
	var c conversation
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return conversation{}, refuse(ReasonUnsupported, "tools[%d]: only function tools can be written", i)
		}
		c.tools = append(c.tools, compactTool(t))
	}
	dropped := map[string]bool{} // ids of the calls kept out, whose results go too
	for i, m := range in.Messages {
		out, err := lineMessage(m)
		if err != nil {
			return conversation{}, refuse(err.Reason, "messages[%d]: %s", i, err.Detail)
		}
		if out.Role == "tool" && dropped[out.ToolCallID] {
			continue
		}
		if out.Role == "assistant" && len(leftOut) > 0 {
			out.ToolCalls = keptCalls(out.ToolCalls, leftOut, dropped)
			if out.Content == nil && len(out.ToolCalls) == 0 {
				continue // a turn that only called tools the line cannot hold
			}
		}
		c.messages = append(c.messages, out)
	}
	if calls := keptCalls(answer.ToolCalls, leftOut, nil); len(calls) != len(answer.ToolCalls) {
		return conversation{}, refuse(ReasonUnsupported, "the answer calls a tool the line cannot declare (only function tools can be written)")
	}
	c.answer = answer
	c.in = in
	return c, nil
}

// keptCalls are the calls of tools not left out; the ids of the others go into dropped (when not nil).
func keptCalls(calls []toolCall, leftOut, dropped map[string]bool) []toolCall {
	kept := calls[:0:0]
	for _, tc := range calls {
		if !leftOut[tc.Function.Name] {
			kept = append(kept, tc)
		} else if dropped != nil {
			dropped[tc.ID] = true
		}
	}
	return kept
}

// leftOutTools are the names of the tools a translation named as left out ("tools[]:custom:NAME" in
// its svc-ignored-fields): hosted tools and namespaces have no calls among function calls.
func leftOutTools(ignored []string) map[string]bool {
	var out map[string]bool
	for _, n := range ignored {
		if name, ok := strings.CutPrefix(n, "tools[]:custom:"); ok {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// lineMessage writes one turn in the fine-tuning form: developer as system, content a string (parts
// with images in user turns only), an assistant's empty text as no content.
func lineMessage(m conv.Message) (message, *Refused) {
	out := message{Role: m.Role}
	switch m.Role {
	case "system", "developer", "user", "tool":
		if m.Role == "developer" {
			out.Role = "system"
		}
	case "assistant":
		out.ReasoningContent = m.ReasoningContent
		for _, tc := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, toolCall{ID: tc.ID, Type: "function",
				Function: functionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
	default:
		return message{}, refuse(ReasonUnsupported, "role %q cannot be written", m.Role)
	}
	if m.Role == "user" {
		out.Content = lineUserContent(m.Content)
		return out, nil
	}
	// Only a user message holds images; the others are text.
	s, ok := conv.Joined(m.Content)
	if !ok {
		return message{}, refuse(ReasonUnsupported, "a %s message holds more than text", m.Role)
	}
	switch {
	case m.Role == "tool":
		out.ToolCallID, out.Content = m.ToolCallID, s
	case m.Role != "assistant" || s != "":
		out.Content = s
	}
	return out, nil
}

// lineUserContent is a user turn's content in the line: a string when it is text only, else its parts
// (empty texts left out), "" rather than nothing for a turn that said nothing.
func lineUserContent(content any) any {
	var b builder
	switch v := content.(type) {
	case string:
		b.text(v)
	case []conv.Part:
		for _, p := range v {
			switch {
			case p.Type == "text" && p.Text != nil:
				b.text(*p.Text)
			case p.Type == "image_url" && p.ImageURL != nil:
				detail := p.ImageURL.Detail
				if detail == "auto" {
					detail = "" // the chat format's default, left unsaid
				}
				b.image(p.ImageURL.URL, detail)
			}
		}
	}
	return contentOrEmpty(&b)
}

// compactTool is a function tool as a line declares it: its parameters compacted, no strict flag.
func compactTool(t conv.Tool) tool {
	out := tool{Type: "function", Function: functionDef{Name: t.Function.Name, Description: t.Function.Description,
		Parameters: t.Function.Parameters}}
	if len(out.Function.Parameters) > 0 {
		out.Function.Parameters = json.RawMessage(argumentsOf(out.Function.Parameters))
		if string(out.Function.Parameters) == "{}" {
			out.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
	}
	return out
}
