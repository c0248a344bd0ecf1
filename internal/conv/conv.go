// Package conv is svc's one reading of a conversation: chat-form turns (text, images, tool calls and their results), the tools declared, and one rule for a turn's text, which the translations write and the export reads.
package conv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// A conversation in chat form is what every surface becomes before a model sees it: a chat
// completions request as the caller sent it, or a Messages or Responses request as
// internal/translate turns it into one. docs/ARCHITECTURE.md, "One reading of a conversation", says
// who reads it.

// MaxBytes is the most of a conversation svc holds for one call (docs/OPERATIONS.md, "Bounds"): a request
// body, a conversation assembled from stored turns (previous_response_id, item references), and a line
// of the export.
const MaxBytes = 4 << 20

// Message is one turn. Content is a string, []Part (text parts and images), or nil next to tool calls.
// Fields are in the order the chat completions wire writes them.
type Message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
	// ReasoningContent is an assistant turn's reasoning (vLLM's field; "reasoning" on the way in).
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
}

// Part is one part of a message's content: text, or an image.
type Part struct {
	Type     string    `json:"type"`
	Text     *string   `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is an image part's address (a URL, or a data URL) and detail hint.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// ToolCall is one call an assistant turn makes: its id, and the function with its arguments (a JSON
// text).
type ToolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool call's function name and arguments.
type Function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function tool a conversation declares.
type Tool struct {
	Type     string   `json:"type"`
	Function ToolFunc `json:"function"`
}

// ToolFunc is a function tool's name, description and JSON Schema of its parameters.
type ToolFunc struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Conversation is a request read as the model sees it: its turns in order and the function tools it
// declares.
type Conversation struct {
	Messages []Message
	Tools    []Tool
}

// TextPart is a text part of s.
func TextPart(s string) Part { return Part{Type: "text", Text: &s} }

// Text is svc's one rule for the text of a turn's content: a string as it is, the text parts of a list
// joined by newlines (as vLLM joins them), nothing for nil or images.
func Text(content any) string {
	switch v := content.(type) {
	case string:
		return v
	case []Part:
		var b strings.Builder
		for _, p := range v {
			if p.Type == "text" && p.Text != nil {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(*p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// Joined is a content of text parts only as one string (Text), and false when it holds an image.
func Joined(content any) (string, bool) {
	if parts, ok := content.([]Part); ok {
		for _, p := range parts {
			if p.Type != "text" {
				return "", false
			}
		}
	}
	return Text(content), true
}

// ErrShape is the error of a request whose messages are not chat messages.
var ErrShape = errors.New("messages must be an array of {role, content} objects")

// wireMessage is a chat message as callers write it: content a string, parts or null; reasoning
// under either of vLLM's names.
type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	ToolCalls        []ToolCall      `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
}

type wirePart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text"`
	Refusal  string    `json:"refusal"`
	ImageURL *ImageURL `json:"image_url"`
}

// ReadChat reads a chat completions request body: its messages (content as a string or parts; a
// refusal part as text) and its tools. A part of another kind (audio, a file) is an error naming it:
// svc has no reading of it.
func ReadChat(body []byte) (Conversation, error) {
	var req struct {
		Messages []wireMessage `json:"messages"`
		Tools    []Tool        `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return Conversation{}, fmt.Errorf("%w: %v", ErrShape, err)
	}
	c := Conversation{Tools: req.Tools}
	for i, m := range req.Messages {
		out, err := m.message()
		if err != nil {
			return Conversation{}, fmt.Errorf("messages[%d]: %w", i, err)
		}
		c.Messages = append(c.Messages, out)
	}
	return c, nil
}

// ReadChatMessage reads one chat message as an answer's choice writes it.
func ReadChatMessage(raw json.RawMessage) (Message, error) {
	var m wireMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrShape, err)
	}
	return m.message()
}

func (m wireMessage) message() (Message, error) {
	out := Message{Role: m.Role, ReasoningContent: m.ReasoningContent, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	if out.ReasoningContent == "" {
		out.ReasoningContent = m.Reasoning
	}
	for i := range out.ToolCalls {
		if out.ToolCalls[i].Type == "" {
			out.ToolCalls[i].Type = "function"
		}
	}
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		out.Content = s
		return out, nil
	}
	var parts []wirePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return Message{}, fmt.Errorf("content must be a string or an array of parts")
	}
	list := make([]Part, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "text":
			list = append(list, TextPart(p.Text))
		case "refusal":
			list = append(list, TextPart(p.Refusal))
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return Message{}, fmt.Errorf("an image_url part without its url")
			}
			list = append(list, Part{Type: "image_url", ImageURL: p.ImageURL})
		default:
			return Message{}, &UnreadPart{Type: p.Type}
		}
	}
	out.Content = list
	return out, nil
}

// UnreadPart is the error of a content part svc has no reading of.
type UnreadPart struct{ Type string }

func (e *UnreadPart) Error() string { return fmt.Sprintf("content part %q cannot be read", e.Type) }

// Body is a chat completions request body of the conversation: its messages, its tools when it declares
// any, and the other members params gives (model, sampling parameters, as JSON values).
func (c Conversation) Body(params map[string]any) ([]byte, error) {
	body := make(map[string]any, len(params)+2)
	for k, v := range params {
		body[k] = v
	}
	body["messages"] = c.Messages
	if len(c.Tools) > 0 {
		body["tools"] = c.Tools
	}
	return json.Marshal(body)
}
