package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Chat is a translated request as the edge's chat path takes it: the chat request's members, each
// encoded once (the upstream body is these members, written side by side), and what the edge reads of
// them, given as the translation knew it rather than decoded again (docs/ARCHITECTURE.md, "How a
// request flows").
type Chat struct {
	Fields       map[string]json.RawMessage
	Messages     []Message // each message's role and text (text parts joined by newlines)
	Stream       bool
	IncludeUsage bool
	MaxTokens    int // 0: none asked
}

// Message is a chat message's role and text.
type Message struct{ Role, Text string }

// MessagesRequest validates an Anthropic Messages request body and translates it to a chat request
// (MessagesToChatWith's translation, without encoding it whole).
func MessagesRequest(body []byte, opts Options) (*Chat, *RequestInfo, *Error) {
	t := &translator{opts: opts}
	out, e := t.translate(body)
	if e != nil {
		return nil, nil, e
	}
	c, err := out.chat()
	if err != nil {
		return nil, nil, errorf("", "request cannot be translated: %s", err.Error())
	}
	return c, &t.info, nil
}

// ResponsesRequest validates a Responses request body and translates it to a chat request
// (ResponsesToChat's translation, without encoding it whole).
func ResponsesRequest(body []byte, opts Options) (*Chat, *ResponsesInfo, *Error) {
	out, info, e := responsesRequest(body, opts)
	if e != nil {
		return nil, nil, e
	}
	c, err := out.chat()
	if err != nil {
		return nil, nil, errorf("", "request cannot be translated: %s", err.Error())
	}
	return c, info, nil
}

// chat is the request as members, each as json.Marshal writes it inside the whole request.
func (r *chatRequest) chat() (*Chat, error) {
	f := make(map[string]json.RawMessage, 12)
	var err error
	put := func(k string, v any) {
		if err == nil {
			f[k], err = json.Marshal(v)
		}
	}
	flag := func(k string, on bool) {
		if on {
			f[k] = json.RawMessage("true")
		}
	}
	raw := func(k string, v json.RawMessage) {
		if len(v) > 0 {
			put(k, v) // compacted, as json.Marshal writes a RawMessage inside a struct
		}
	}
	raw("model", r.Model)
	put("messages", r.Messages)
	if r.MaxTokens != 0 {
		f["max_tokens"] = strconv.AppendInt(nil, int64(r.MaxTokens), 10)
	}
	if len(r.Stop) > 0 {
		put("stop", r.Stop)
	}
	raw("temperature", r.Temperature)
	raw("top_p", r.TopP)
	raw("top_k", r.TopK)
	flag("logprobs", r.Logprobs)
	raw("top_logprobs", r.TopLogprobs)
	if r.User != "" {
		put("user", r.User)
	}
	if len(r.Tools) > 0 {
		put("tools", r.Tools)
	}
	if r.ToolChoice != nil {
		put("tool_choice", r.ToolChoice)
	}
	if r.ParallelToolCalls != nil {
		put("parallel_tool_calls", *r.ParallelToolCalls)
	}
	if r.ResponseFormat != nil {
		put("response_format", r.ResponseFormat)
	}
	if r.ReasoningEffort != "" {
		put("reasoning_effort", r.ReasoningEffort)
	}
	if len(r.ChatTemplateKwargs) > 0 {
		put("chat_template_kwargs", r.ChatTemplateKwargs)
	}
	flag("stream", r.Stream)
	if r.StreamOptions != nil {
		put("stream_options", r.StreamOptions)
	}
	flag("continue_final_message", r.ContinueFinalMessage)
	if r.AddGenerationPrompt != nil {
		put("add_generation_prompt", *r.AddGenerationPrompt)
	}
	if err != nil {
		return nil, err
	}
	c := &Chat{Fields: f, Stream: r.Stream, MaxTokens: r.MaxTokens, IncludeUsage: r.StreamOptions != nil && r.StreamOptions.IncludeUsage,
		Messages: make([]Message, len(r.Messages))}
	for i, m := range r.Messages {
		c.Messages[i] = Message{Role: m.Role, Text: messageText(m.Content)}
	}
	return c, nil
}

// messageText is a message content's text: the string, or its text parts joined by newlines.
func messageText(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []chatPart:
		var b strings.Builder
		for _, p := range c {
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
