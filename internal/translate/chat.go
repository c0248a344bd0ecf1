package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/jsonx"
)

// The chat completions wire, as both translations write requests and read answers. Fields are in the
// order a reader of the upstream's logs expects them.

// chatRequest is the chat completions request that a Messages or Responses request becomes.
type chatRequest struct {
	Model             json.RawMessage `json:"model,omitempty"`
	Messages          []conv.Message  `json:"messages"`
	MaxTokens         int             `json:"max_tokens,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	Temperature       json.RawMessage `json:"temperature,omitempty"`
	TopP              json.RawMessage `json:"top_p,omitempty"`
	TopK              json.RawMessage `json:"top_k,omitempty"`
	Logprobs          bool            `json:"logprobs,omitempty"`
	TopLogprobs       json.RawMessage `json:"top_logprobs,omitempty"`
	User              string          `json:"user,omitempty"`
	Tools             []conv.Tool     `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    any             `json:"response_format,omitempty"`
	// Reasoning controls (reasoning.go): one or the other, as the catalog says.
	ReasoningEffort    string          `json:"reasoning_effort,omitempty"`
	ChatTemplateKwargs map[string]bool `json:"chat_template_kwargs,omitempty"`
	Stream             bool            `json:"stream,omitempty"`
	StreamOptions      *streamOptions  `json:"stream_options,omitempty"`
	// A final assistant message is a prefill: the answer continues it. vLLM does that with these two
	// flags (and refuses continue_final_message together with add_generation_prompt).
	ContinueFinalMessage bool  `json:"continue_final_message,omitempty"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// textMessage joins text parts into one string content (as vLLM joins text parts, with newlines), or
// keeps the parts (a copy: the readers build them in room on their stack) when an image is among them.
func textMessage(role string, parts []conv.Part) conv.Message {
	for _, p := range parts {
		if p.Type != "text" {
			return conv.Message{Role: role, Content: slices.Clone(parts)}
		}
	}
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += "\n"
		}
		s += *p.Text
	}
	return conv.Message{Role: role, Content: s}
}

// The parts of a chat completion that translate.
type completion struct {
	ID      string `json:"id"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content *string `json:"content"`
			// The reasoning: vLLM's and DeepSeek's reasoning_content, or the newer reasoning.
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
					// A string of JSON per OpenAI; some servers send the object itself.
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string          `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"` // vLLM: the stop string (or token id) that ended the answer
	} `json:"choices"`
	Usage *upstreamUsage  `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type upstreamUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *upstreamUsage) usage() Usage {
	out := Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// answer is choice 0 of a chat completion, read for either surface.
type answer struct {
	id        string
	reasoning string
	text      string
	hasText   bool // content was a string (even empty), not null
	calls     []answerCall
	finish    string
	matched   *string // vLLM's stop_reason when a string
	usage     *Usage  // the upstream's, nil when it sent none
}

type answerCall struct {
	id, name string
	args     []byte // the arguments as sent (a JSON text), nil when absent
}

// readAnswer reads choice 0 of a chat.completion. An error means the answer cannot be translated; its
// message is safe to show to the client.
func readAnswer(completionJSON []byte) (*answer, error) {
	var c completion
	if err := json.Unmarshal(completionJSON, &c); err != nil {
		return nil, fmt.Errorf("the upstream's answer is not a chat completion: %v", err)
	}
	if !isNull(c.Error) {
		return nil, fmt.Errorf("the upstream answered with an error: %s", upstreamErrorMessage(c.Error))
	}
	idx := -1
	for i, ch := range c.Choices {
		if ch.Index == 0 {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, errors.New("the upstream's answer has no choice")
	}
	ch := c.Choices[idx]
	a := &answer{id: c.ID, finish: ch.FinishReason, matched: matchedStop(ch.StopReason)}
	if ch.Message.Content != nil {
		a.text, a.hasText = *ch.Message.Content, true
	}
	if ch.Message.ReasoningContent != nil {
		a.reasoning = *ch.Message.ReasoningContent
	} else if ch.Message.Reasoning != nil {
		a.reasoning = *ch.Message.Reasoning
	}
	for _, tc := range ch.Message.ToolCalls {
		args := []byte(tc.Function.Arguments)
		if isKind(tc.Function.Arguments, '"') {
			var s string
			if json.Unmarshal(tc.Function.Arguments, &s) != nil {
				return nil, fmt.Errorf("%w: the arguments of tool %q are not a JSON string", ErrInvalidToolArguments, tc.Function.Name)
			}
			args = []byte(s)
		} else if isNull(tc.Function.Arguments) {
			args = nil
		}
		if tc.Function.Name == "" {
			return nil, errors.New("the upstream called a tool without naming it")
		}
		a.calls = append(a.calls, answerCall{id: tc.ID, name: tc.Function.Name, args: args})
	}
	if c.Usage != nil {
		u := c.Usage.usage()
		a.usage = &u
	}
	return a, nil
}

// Chat is the chat completions request a translation built, in the form the edge's chat path works
// with: its top-level members, each encoded once (the bytes json.Marshal writes for that field of a
// chatRequest marshalled whole), which the runtime writes into the upstream's body without decoding
// them, and what the call needs to know of it, read from the request as built rather than from its
// JSON.
type Chat struct {
	Members map[string]json.RawMessage
	// Conversation is the request's messages and function tools as built, the one reading of it that
	// the export shares (internal/conv).
	Conversation conv.Conversation
	Turns        []conv.Turn // the messages, in order; nil when the request has none
	Stream       bool
	IncludeUsage bool // stream_options.include_usage (always true on a stream)
	MaxTokens    int  // 0 when none is set
}

// chat encodes the request's members one by one, as json.Marshal would write them inside the whole
// request (omitempty fields left out alike); TestChatMembersAreTheMarshalledBody holds the two together
// for every field.
func (r *chatRequest) chat() (*Chat, error) { return r.chatWith(nil) }

// chatWith is chat with the tools member written already (toolsJSON, the tools read before: toolMemo),
// or written here when nil.
func (r *chatRequest) chatWith(toolsJSON []byte) (*Chat, error) {
	m := make(map[string]json.RawMessage, 12)
	var err error
	put := func(name string, v any) {
		if err != nil {
			return
		}
		var b []byte
		if b, err = json.Marshal(v); err == nil {
			m[name] = b
		}
	}
	raw := func(name string, v json.RawMessage) { // a member of a body checked whole (compact)
		if len(v) > 0 {
			m[name] = appendRawEscaped(make([]byte, 0, len(v)), compact(v))
		}
	}
	// Booleans and strings are written by hand: json.Marshal's reflection cost more than the rest of
	// the members together.
	boolean := func(name string, v bool) {
		m[name] = json.RawMessage(strconv.FormatBool(v))
	}
	text := func(name, v string) { m[name] = quoted(v) }
	raw("model", r.Model)
	m["messages"] = appendMessages(make([]byte, 0, messagesSize(r.Messages)), r.Messages)
	if r.MaxTokens != 0 {
		m["max_tokens"] = strconv.AppendInt(nil, int64(r.MaxTokens), 10)
	}
	if len(r.Stop) > 0 {
		put("stop", r.Stop)
	}
	raw("temperature", r.Temperature)
	raw("top_p", r.TopP)
	raw("top_k", r.TopK)
	if r.Logprobs {
		m["logprobs"] = json.RawMessage("true")
	}
	raw("top_logprobs", r.TopLogprobs)
	if r.User != "" {
		text("user", r.User)
	}
	if len(r.Tools) > 0 {
		if toolsJSON == nil {
			toolsJSON = appendTools(make([]byte, 0, toolsSize(r.Tools)), r.Tools)
		}
		m["tools"] = toolsJSON
	}
	if s, ok := r.ToolChoice.(string); ok {
		text("tool_choice", s)
	} else if r.ToolChoice != nil {
		put("tool_choice", r.ToolChoice)
	}
	if r.ParallelToolCalls != nil {
		boolean("parallel_tool_calls", *r.ParallelToolCalls)
	}
	if r.ResponseFormat != nil {
		put("response_format", r.ResponseFormat)
	}
	if r.ReasoningEffort != "" {
		text("reasoning_effort", r.ReasoningEffort)
	}
	if len(r.ChatTemplateKwargs) > 0 {
		put("chat_template_kwargs", r.ChatTemplateKwargs)
	}
	if r.Stream {
		m["stream"] = json.RawMessage("true")
	}
	if r.StreamOptions != nil {
		m["stream_options"] = json.RawMessage(`{"include_usage":` + strconv.FormatBool(r.StreamOptions.IncludeUsage) + `}`)
	}
	if r.ContinueFinalMessage {
		m["continue_final_message"] = json.RawMessage("true")
	}
	if r.AddGenerationPrompt != nil {
		boolean("add_generation_prompt", *r.AddGenerationPrompt)
	}
	if err != nil {
		return nil, err
	}
	c := &Chat{Members: m, Conversation: conv.Conversation{Messages: r.Messages, Tools: r.Tools}, Stream: r.Stream, IncludeUsage: r.StreamOptions != nil && r.StreamOptions.IncludeUsage, MaxTokens: r.MaxTokens}
	if r.Messages != nil {
		c.Turns = make([]conv.Turn, len(r.Messages))
	}
	for i, msg := range r.Messages {
		switch msg.Content.(type) {
		case nil, string, []conv.Part:
		default:
			return nil, fmt.Errorf("message content of type %T", msg.Content)
		}
		_, parts := msg.Content.([]conv.Part)
		c.Turns[i] = conv.Turn{Role: msg.Role, Text: conv.Text(msg.Content), ToolCalls: len(msg.ToolCalls) > 0,
			HasContent: msg.Content != nil && (!parts || msg.Content.([]conv.Part) != nil)}
	}
	return c, nil
}

// quoted is s as a JSON string, as json.Marshal writes it.
func quoted(s string) json.RawMessage { return jsonx.AppendString(make([]byte, 0, len(s)+2), s) }

// appendMessages writes a request's messages as json.Marshal writes them (TestAppendMessagesAsMarshal),
// by hand: encoding/json's reflection over every turn and part cost a tenth of an agent request's
// translation. A content of a type the chat form does not hold is left to encoding/json (chat refuses
// it after).
func appendMessages(b []byte, msgs []conv.Message) []byte {
	if msgs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		m := &msgs[i]
		b = append(b, `{"role":`...)
		b = jsonx.AppendString(b, m.Role)
		b = append(b, `,"content":`...)
		switch c := m.Content.(type) {
		case nil:
			b = append(b, "null"...)
		case string:
			b = jsonx.AppendString(b, c)
		case []conv.Part:
			b = appendParts(b, c)
		default:
			b = appendMarshaledValue(b, c)
		}
		if m.ReasoningContent != "" {
			b = append(b, `,"reasoning_content":`...)
			b = jsonx.AppendString(b, m.ReasoningContent)
		}
		if len(m.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for j, tc := range m.ToolCalls {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				b = jsonx.AppendString(b, tc.ID)
				b = append(b, `,"type":`...)
				b = jsonx.AppendString(b, tc.Type)
				b = append(b, `,"function":{"name":`...)
				b = jsonx.AppendString(b, tc.Function.Name)
				b = append(b, `,"arguments":`...)
				b = jsonx.AppendString(b, tc.Function.Arguments)
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		if m.ToolCallID != "" {
			b = append(b, `,"tool_call_id":`...)
			b = jsonx.AppendString(b, m.ToolCallID)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendParts writes a message's content parts as json.Marshal writes them.
func appendParts(b []byte, parts []conv.Part) []byte {
	if parts == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonx.AppendString(b, p.Type)
		if p.Text != nil {
			b = append(b, `,"text":`...)
			b = jsonx.AppendString(b, *p.Text)
		}
		if p.ImageURL != nil {
			b = append(b, `,"image_url":{"url":`...)
			b = jsonx.AppendString(b, p.ImageURL.URL)
			if p.ImageURL.Detail != "" {
				b = append(b, `,"detail":`...)
				b = jsonx.AppendString(b, p.ImageURL.Detail)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// messagesSize is about what appendMessages writes, for its buffer.
func messagesSize(msgs []conv.Message) int {
	n := 2
	for i := range msgs {
		m := &msgs[i]
		n += 48 + len(m.ReasoningContent) + len(m.ToolCallID)
		switch c := m.Content.(type) {
		case string:
			n += len(c)
		case []conv.Part:
			for _, p := range c {
				n += 32
				if p.Text != nil {
					n += len(*p.Text)
				}
				if p.ImageURL != nil {
					n += 32 + len(p.ImageURL.URL)
				}
			}
		}
		for _, tc := range m.ToolCalls {
			n += 80 + len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)*9/8
		}
	}
	return n + n/16 // escapes
}

// appendTools writes a request's tools as json.Marshal writes them (TestChatMembersAreTheMarshalledBody),
// by hand: encoding/json would check and compact each tool's parameters again, which the translation
// compacted from a body checked whole, and an agent's tools are most of its request.
func appendTools(b []byte, tools []conv.Tool) []byte {
	b = append(b, '[')
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonx.AppendString(b, t.Type)
		b = append(b, `,"function":{"name":`...)
		b = jsonx.AppendString(b, t.Function.Name)
		if t.Function.Description != "" {
			b = append(b, `,"description":`...)
			b = jsonx.AppendString(b, t.Function.Description)
		}
		b = append(b, `,"parameters":`...)
		b = appendRawEscaped(b, t.Function.Parameters)
		if t.Function.Strict != nil {
			b = append(b, `,"strict":`...)
			b = strconv.AppendBool(b, *t.Function.Strict)
		}
		b = append(b, "}}"...)
	}
	return append(b, ']')
}

// toolsSize is about what appendTools writes, for its buffer.
func toolsSize(tools []conv.Tool) int {
	n := 2
	for _, t := range tools {
		n += 80 + len(t.Function.Name) + len(t.Function.Description)*9/8 + len(t.Function.Parameters)*17/16 // escapes
	}
	return n
}

// appendRawEscaped appends a raw JSON value as json.Marshal writes a json.RawMessage (the value itself
// compact already): <, >, &, U+2028 and U+2029 as \u003c, \u003e, \u0026, \u2028 and \u2029 (in valid
// JSON they stand only inside strings).
func appendRawEscaped(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return appendRaw(b, raw)
	}
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[raw[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(b, raw[start:]...)
}
