package dataset

import (
	"encoding/json"
)

// block is an Anthropic Messages content block, of the kinds a conversation holds.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// fromMessages reads a Messages run: system, messages of content blocks (tool_use as tool calls,
// tool_result as tool messages, thinking as reasoning), tools, and the answer message.
func fromMessages(r Run, _ Options) (conversation, error) {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "request: %v", err)
	}
	var resp struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(r.Response, &resp); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "answer: %v", err)
	}
	var c conversation
	for i, t := range req.Tools {
		if (t.Type != "" && t.Type != "custom") || t.Name == "" || len(t.InputSchema) == 0 {
			return conversation{}, refuse(ReasonUnsupported, "tools[%d]: only client tools with an input_schema can be written", i)
		}
		c.tools = append(c.tools, compactTool(tool{Type: "function",
			Function: functionDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}}))
	}
	if len(req.System) > 0 && string(req.System) != "null" {
		var b builder
		if err := blocksInto(&b, req.System, nil); err != nil {
			return conversation{}, refuse(err.Reason, "system: %s", err.Detail)
		}
		s, ok := b.joined()
		if !ok {
			return conversation{}, refuse(ReasonUnsupported, "system: only text can be written")
		}
		if s != "" {
			c.messages = append(c.messages, message{Role: "system", Content: s})
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "user":
			var b builder
			var tools []message
			if err := blocksInto(&b, m.Content, &tools); err != nil {
				return conversation{}, refuse(err.Reason, "messages[%d]: %s", i, err.Detail)
			}
			// Tool results answer the assistant turn before them, so they come first.
			c.messages = append(c.messages, tools...)
			if !b.empty() || len(tools) == 0 {
				c.messages = append(c.messages, message{Role: "user", Content: contentOrEmpty(&b)})
			}
		case "assistant":
			a, err := assistantBlocks(m.Content)
			if err != nil {
				return conversation{}, refuse(err.Reason, "messages[%d]: %s", i, err.Detail)
			}
			c.messages = append(c.messages, a)
		default:
			return conversation{}, refuse(ReasonUnparseable, "messages[%d]: role %q", i, m.Role)
		}
	}
	a, err := assistantBlocks(resp.Content)
	if err != nil {
		return conversation{}, refuse(err.Reason, "answer: %s", err.Detail)
	}
	c.answer = a
	return c, nil
}

// contentOrEmpty is the gathered content, "" rather than nil for a user turn that said nothing.
func contentOrEmpty(b *builder) any {
	if c := b.content(); c != nil {
		return c
	}
	return ""
}

// blocksInto reads a user or system content (a string or blocks): text and images into b, tool
// results (when tools is not nil) as tool messages.
func blocksInto(b *builder, raw json.RawMessage, tools *[]message) *Refused {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.text(s)
		return nil
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return refuse(ReasonUnparseable, "content: %v", err)
	}
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			b.text(bl.Text)
		case "image":
			if tools == nil {
				return refuse(ReasonUnsupported, "an image outside a user message")
			}
			url, err := imageSource(bl)
			if err != nil {
				return err
			}
			b.image(url, "")
		case "tool_result":
			if tools == nil {
				return refuse(ReasonUnsupported, "a tool result outside a user message")
			}
			var rb builder
			if len(bl.Content) > 0 && string(bl.Content) != "null" {
				if err := blocksInto(&rb, bl.Content, nil); err != nil {
					return err
				}
			}
			text, ok := rb.joined()
			if !ok {
				return refuse(ReasonUnsupported, "a tool result holds more than text")
			}
			*tools = append(*tools, message{Role: "tool", ToolCallID: bl.ToolUseID, Content: text})
		default:
			return refuse(ReasonUnsupported, "content block %q cannot be written", bl.Type)
		}
	}
	return nil
}

// imageSource is an image block's source as an image_url: its URL, or its base64 data as a data URL.
func imageSource(bl block) (string, *Refused) {
	switch {
	case bl.Source == nil:
	case bl.Source.Type == "base64" && bl.Source.MediaType != "" && bl.Source.Data != "":
		return "data:" + bl.Source.MediaType + ";base64," + bl.Source.Data, nil
	case bl.Source.Type == "url" && bl.Source.URL != "":
		return bl.Source.URL, nil
	}
	return "", refuse(ReasonUnsupported, "an image whose source is neither base64 data nor a url")
}

// assistantBlocks reads an assistant turn's content (a string or blocks): text as content, tool_use as
// tool calls, thinking as reasoning; redacted thinking is left out.
func assistantBlocks(raw json.RawMessage) (message, *Refused) {
	out := message{Role: "assistant"}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "" {
			out.Content = s
		}
		return out, nil
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return message{}, refuse(ReasonUnparseable, "content: %v", err)
	}
	var b builder
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			b.text(bl.Text)
		case "thinking":
			out.ReasoningContent += bl.Thinking
		case "redacted_thinking":
		case "tool_use":
			if bl.ID == "" || bl.Name == "" {
				return message{}, refuse(ReasonUnparseable, "a tool_use without its id or name")
			}
			out.ToolCalls = append(out.ToolCalls, toolCall{ID: bl.ID, Type: "function",
				Function: functionCall{Name: bl.Name, Arguments: argumentsOf(bl.Input)}})
		default:
			return message{}, refuse(ReasonUnsupported, "content block %q cannot be written", bl.Type)
		}
	}
	out.Content = b.content()
	if _, ok := out.Content.([]part); ok {
		s, _ := b.joined()
		out.Content = s // an assistant's text blocks, one after the other, are one text
	}
	return out, nil
}
