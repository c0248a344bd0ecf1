package dataset

import (
	"encoding/json"
)

// chatMessage is a chat completions message as requests and answers write it.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []toolCall      `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"` // vLLM's newer name for reasoning_content
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text"`
	Refusal  string    `json:"refusal"`
	ImageURL *imageURL `json:"image_url"`
}

// fromChat reads a chat completions run: the request's messages and tools, and the first choice's
// message as the answer.
func fromChat(r Run, _ Options) (conversation, error) {
	var req struct {
		Messages []chatMessage `json:"messages"`
		Tools    []tool        `json:"tools"`
	}
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "request: %v", err)
	}
	var resp struct {
		Choices []struct {
			Message chatMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.Response, &resp); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "answer: %v", err)
	}
	if len(resp.Choices) == 0 {
		return conversation{}, refuse(ReasonEmpty, "the answer has no choices")
	}
	var c conversation
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return conversation{}, refuse(ReasonUnsupported, "tools[%d]: only function tools can be written", i)
		}
		c.tools = append(c.tools, compactTool(t))
	}
	for i, m := range req.Messages {
		out, err := chatToMessage(m)
		if err != nil {
			return conversation{}, refuse(ReasonUnsupported, "messages[%d]: %s", i, err.Detail)
		}
		c.messages = append(c.messages, out)
	}
	m := resp.Choices[0].Message
	m.Role = "assistant"
	a, err := chatToMessage(m)
	if err != nil {
		return conversation{}, refuse(ReasonUnsupported, "answer: %s", err.Detail)
	}
	c.answer = a
	return c, nil
}

// chatToMessage writes one chat message in the fine-tuning form: developer as system, content as a
// string or parts.
func chatToMessage(m chatMessage) (message, *Refused) {
	out := message{Role: m.Role}
	switch m.Role {
	case "system", "developer", "user", "tool":
		if m.Role == "developer" {
			out.Role = "system"
		}
	case "assistant":
		out.ReasoningContent = m.ReasoningContent
		if out.ReasoningContent == "" {
			out.ReasoningContent = m.Reasoning
		}
		for _, tc := range m.ToolCalls {
			if tc.Type == "" {
				tc.Type = "function"
			}
			out.ToolCalls = append(out.ToolCalls, tc)
		}
	default:
		return message{}, refuse(ReasonUnsupported, "role %q cannot be written", m.Role)
	}
	var b builder
	if err := chatContent(&b, m.Content); err != nil {
		return message{}, err
	}
	if m.Role == "user" {
		out.Content = contentOrEmpty(&b)
		return out, nil
	}
	// Only a user message holds images; the others are text.
	s, ok := b.joined()
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

// chatContent reads a chat message's content: null, a string, or parts (text, refusal, image_url).
func chatContent(b *builder, raw json.RawMessage) *Refused {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.text(s)
		return nil
	}
	var parts []chatPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return refuse(ReasonUnparseable, "content: %v", err)
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
			b.text(p.Text)
		case "refusal":
			b.text(p.Refusal)
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return refuse(ReasonUnparseable, "an image_url part without its url")
			}
			b.image(p.ImageURL.URL, p.ImageURL.Detail)
		default:
			return refuse(ReasonUnsupported, "content part %q cannot be written", p.Type)
		}
	}
	return nil
}

// compactTool is a function tool with its parameters compacted.
func compactTool(t tool) tool {
	if len(t.Function.Parameters) > 0 {
		t.Function.Parameters = json.RawMessage(argumentsOf(t.Function.Parameters))
		if string(t.Function.Parameters) == "{}" {
			t.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
	}
	return t
}
