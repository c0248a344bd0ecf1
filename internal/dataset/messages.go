package dataset

import (
	"encoding/json"

	"github.com/svcdev/svc/internal/translate"
)

// block is an Anthropic Messages content block of an answer.
type block struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
}

// fromMessages reads a Messages run: its request as the edge's translation reads it (internal/translate:
// system, messages of content blocks, tools; Claude Code's system entries among the messages, thinking
// svc signed as reasoning), and the answer message's content blocks.
func fromMessages(r Run, opt Options) (conversation, error) {
	chat, info, terr := translate.MessagesToChatWith(r.Request, translate.Options{Secret: opt.Secret})
	if terr != nil {
		return conversation{}, refuse(ReasonUnsupported, "request: %s", terr.Error())
	}
	var resp struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(r.Response, &resp); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "answer: %v", err)
	}
	a, err := assistantBlocks(resp.Content)
	if err != nil {
		return conversation{}, refuse(err.Reason, "answer: %s", err.Detail)
	}
	c, err2 := lineOf(chat.Conversation, a, leftOutTools(info.Ignored))
	c.request = chat.Members
	return c, err2
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
