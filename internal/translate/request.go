package translate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// The chat completions request that a Messages request becomes. Fields are in the order a reader of
// the upstream's logs expects them.
type chatRequest struct {
	Model             json.RawMessage `json:"model,omitempty"`
	Messages          []chatMessage   `json:"messages"`
	MaxTokens         int             `json:"max_tokens"`
	Stop              []string        `json:"stop,omitempty"`
	Temperature       json.RawMessage `json:"temperature,omitempty"`
	TopP              json.RawMessage `json:"top_p,omitempty"`
	TopK              json.RawMessage `json:"top_k,omitempty"`
	User              string          `json:"user,omitempty"`
	Tools             []chatTool      `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
	// A final assistant message is a prefill: the answer continues it. vLLM does that with these two
	// flags (and refuses continue_final_message together with add_generation_prompt).
	ContinueFinalMessage bool  `json:"continue_final_message,omitempty"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"` // a string, []chatPart, or nil next to tool_calls
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string        `json:"type"`
	Text     *string       `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL string `json:"url"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatToolFunc `json:"function"`
}

type chatToolFunc struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// topLevel lists the request fields that translate, for error messages.
var topLevel = []string{"model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature",
	"top_p", "top_k", "metadata", "tools", "tool_choice", "thinking (disabled only)"}

// toolName is the shape Anthropic (and OpenAI) accept for a tool name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// imageTypes are the media types Anthropic accepts for base64 images.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// translator holds the state of one request's translation.
type translator struct {
	info  RequestInfo
	chars int
}

// MessagesToChat validates an Anthropic Messages request body and returns the equivalent OpenAI chat
// completions request body (a JSON object), plus what the response side needs to know. A body that
// is not valid, or holds a field or block this translation cannot carry, is an *Error naming it.
func MessagesToChat(body []byte) (chat []byte, info *RequestInfo, err *Error) {
	if e := checkStrict(body); e != nil {
		return nil, nil, e
	}
	top, e := object(body, "")
	if e != nil {
		return nil, nil, errorf("", "request body must be a JSON object")
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature", "top_p",
			"top_k", "metadata", "tools", "tool_choice":
		case "thinking":
			if e := thinkingDisabled(top[k]); e != nil {
				return nil, nil, e
			}
		default:
			return nil, nil, errorf(k, "%s cannot be translated to chat completions for this model; the fields that translate are %s",
				k, strings.Join(topLevel, ", "))
		}
	}

	t := &translator{}
	var out chatRequest
	if raw := top["model"]; !isNull(raw) {
		m, e := str(raw, "model")
		if e != nil {
			return nil, nil, e
		}
		t.info.Model = m
		out.Model, _ = json.Marshal(m)
	}
	if e := t.maxTokens(top["max_tokens"], &out); e != nil {
		return nil, nil, e
	}
	if raw := top["stream"]; !isNull(raw) {
		if string(raw) != "true" && string(raw) != "false" {
			return nil, nil, errorf("stream", "must be true or false")
		}
		t.info.Stream = string(raw) == "true"
	}
	if t.info.Stream {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if e := t.sampling(top, &out); e != nil {
		return nil, nil, e
	}
	if e := t.metadata(top["metadata"], &out); e != nil {
		return nil, nil, e
	}
	names, e := t.tools(top["tools"], &out)
	if e != nil {
		return nil, nil, e
	}
	if e := t.toolChoice(top["tool_choice"], names, &out); e != nil {
		return nil, nil, e
	}
	system, e := t.system(top["system"])
	if e != nil {
		return nil, nil, e
	}
	if system != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: system})
	}
	msgs, prefill, e := t.messages(top["messages"])
	if e != nil {
		return nil, nil, e
	}
	out.Messages = append(out.Messages, msgs...)
	if prefill {
		no := false
		out.ContinueFinalMessage, out.AddGenerationPrompt = true, &no
	}
	chat, mErr := json.Marshal(out)
	if mErr != nil {
		return nil, nil, errorf("", "request cannot be translated: %s", mErr.Error())
	}
	t.info.PromptChars = t.chars
	return chat, &t.info, nil
}

// thinkingDisabled accepts {"type": "disabled"}, which asks for what a chat completions upstream does
// anyway; extended thinking itself has no chat completions equivalent.
func thinkingDisabled(raw json.RawMessage) *Error {
	if isNull(raw) {
		return nil
	}
	f, e := object(raw, "thinking")
	if e == nil {
		if typ, _ := str(f["type"], ""); typ == "disabled" && len(f) == 1 {
			return nil
		}
	}
	return errorf("thinking", "extended thinking cannot be translated to chat completions for this model; remove thinking (or send {\"type\": \"disabled\"})")
}

func (t *translator) maxTokens(raw json.RawMessage, out *chatRequest) *Error {
	var n int64
	if isNull(raw) || !isNumber(raw) || json.Unmarshal(raw, &n) != nil || n < 1 || n > 1<<31-1 {
		return errorf("max_tokens", "max_tokens is required and must be a positive integer")
	}
	t.info.MaxTokens = int(n)
	out.MaxTokens = int(n)
	return nil
}

// sampling translates stop_sequences, temperature, top_p and top_k.
func (t *translator) sampling(top fields, out *chatRequest) *Error {
	if raw := top["stop_sequences"]; !isNull(raw) {
		var list []json.RawMessage
		if !isKind(raw, '[') || json.Unmarshal(raw, &list) != nil {
			return errorf("stop_sequences", "must be an array of strings")
		}
		for i, r := range list {
			s, e := str(r, fmt.Sprintf("stop_sequences[%d]", i))
			if e != nil {
				return e
			}
			if s == "" {
				return errorf(fmt.Sprintf("stop_sequences[%d]", i), "must not be empty")
			}
			t.info.StopSequences = append(t.info.StopSequences, s)
		}
		out.Stop = t.info.StopSequences
	}
	for _, p := range []struct {
		name string
		dst  *json.RawMessage
		max  float64
	}{{"temperature", &out.Temperature, 1}, {"top_p", &out.TopP, 1}} {
		raw := top[p.name]
		if isNull(raw) {
			continue
		}
		var v float64
		if !isNumber(raw) || json.Unmarshal(raw, &v) != nil || v < 0 || v > p.max {
			return errorf(p.name, "must be a number from 0 to %g", p.max)
		}
		*p.dst = compact(raw)
	}
	if raw := top["top_k"]; !isNull(raw) {
		var k int64
		if !isNumber(raw) || json.Unmarshal(raw, &k) != nil || k < 0 || k > 1<<31-1 {
			return errorf("top_k", "must be a non-negative integer")
		}
		// top_k is not in OpenAI's API, but vLLM (and SGLang, llama.cpp) take it as an extension.
		out.TopK = compact(raw)
	}
	return nil
}

func (t *translator) metadata(raw json.RawMessage, out *chatRequest) *Error {
	if isNull(raw) {
		return nil
	}
	f, e := object(raw, "metadata")
	if e != nil {
		return e
	}
	if e := f.only("metadata", "metadata", "user_id"); e != nil {
		return e
	}
	if u := f["user_id"]; !isNull(u) {
		s, e := str(u, "metadata.user_id")
		if e != nil {
			return e
		}
		out.User = s
	}
	return nil
}

// tools translates the tool definitions and returns their names.
func (t *translator) tools(raw json.RawMessage, out *chatRequest) (map[string]bool, *Error) {
	names := map[string]bool{}
	if isNull(raw) {
		return names, nil
	}
	var list []json.RawMessage
	if !isKind(raw, '[') || json.Unmarshal(raw, &list) != nil {
		return nil, errorf("tools", "must be an array of tool definitions")
	}
	for i, r := range list {
		path := fmt.Sprintf("tools[%d]", i)
		f, e := object(r, path)
		if e != nil {
			return nil, e
		}
		// The type comes first: server tools (web_search, bash, text_editor, ...) carry other fields.
		if typ := f["type"]; !isNull(typ) {
			s, e := str(typ, path+".type")
			if e != nil {
				return nil, e
			}
			if s != "custom" {
				return nil, errorf(path+".type", "the server tool %q cannot be translated to chat completions for this model; only custom tools (name, description, input_schema) can", s)
			}
		}
		if e := f.only(path, "a tool", "type", "name", "description", "input_schema"); e != nil {
			return nil, e
		}
		name, e := str(f["name"], path+".name")
		if e != nil {
			return nil, e
		}
		if !toolName.MatchString(name) {
			return nil, errorf(path+".name", "must be 1 to 128 letters, digits, underscores or hyphens")
		}
		if names[name] {
			return nil, errorf(path+".name", "tool names must be unique; %q appears twice", name)
		}
		names[name] = true
		fn := chatToolFunc{Name: name}
		if d := f["description"]; !isNull(d) {
			if fn.Description, e = str(d, path+".description"); e != nil {
				return nil, e
			}
		}
		schema := f["input_schema"]
		if !isKind(schema, '{') {
			return nil, errorf(path+".input_schema", "is required and must be a JSON Schema object")
		}
		fn.Parameters = compact(schema)
		t.chars += len(name) + len(fn.Description) + len(fn.Parameters)
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: fn})
	}
	return names, nil
}

func (t *translator) toolChoice(raw json.RawMessage, names map[string]bool, out *chatRequest) *Error {
	if isNull(raw) {
		return nil
	}
	f, e := object(raw, "tool_choice")
	if e != nil {
		return e
	}
	typ, _ := str(f["type"], "")
	if !contains([]string{"auto", "any", "tool", "none"}, typ) {
		return errorf("tool_choice.type", "must be one of auto, any, tool, none")
	}
	allowed := []string{"type", "disable_parallel_tool_use"}
	if typ == "tool" {
		allowed = append(allowed, "name")
	}
	if typ == "none" {
		allowed = allowed[:1]
	}
	if e := f.only("tool_choice", "tool_choice of type "+typ, allowed...); e != nil {
		return e
	}
	noParallel := false
	if r := f["disable_parallel_tool_use"]; !isNull(r) {
		if string(r) != "true" && string(r) != "false" {
			return errorf("tool_choice.disable_parallel_tool_use", "must be true or false")
		}
		noParallel = string(r) == "true"
	}
	switch typ {
	case "auto":
		out.ToolChoice = "auto"
	case "any":
		out.ToolChoice = "required"
	case "none":
		out.ToolChoice = "none"
	case "tool":
		name, e := str(f["name"], "tool_choice.name")
		if e != nil {
			return e
		}
		if !names[name] {
			return errorf("tool_choice.name", "names no tool in tools")
		}
		out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": name}}
	}
	if len(out.Tools) == 0 {
		if typ == "any" || typ == "tool" {
			return errorf("tool_choice", "tool_choice of type %q needs tools", typ)
		}
		// OpenAI refuses tool_choice without tools; without tools, auto and none mean the same thing.
		out.ToolChoice = nil
		return nil
	}
	if noParallel && typ != "none" {
		no := false
		out.ParallelToolCalls = &no
	}
	return nil
}

// system returns the system prompt's text.
func (t *translator) system(raw json.RawMessage) (string, *Error) {
	if isNull(raw) {
		return "", nil
	}
	if isKind(raw, '"') {
		s, e := str(raw, "system")
		t.chars += len(s)
		return s, e
	}
	var list []json.RawMessage
	if !isKind(raw, '[') || json.Unmarshal(raw, &list) != nil {
		return "", errorf("system", "must be a string or an array of text blocks")
	}
	var parts []string
	for i, r := range list {
		path := fmt.Sprintf("system[%d]", i)
		b, e := t.textOnly(r, path, "system")
		if e != nil {
			return "", e
		}
		parts = append(parts, b)
	}
	return strings.Join(parts, "\n"), nil
}

// textOnly reads a block that must be a text block (in system or inside a tool_result).
func (t *translator) textOnly(raw json.RawMessage, path, where string) (string, *Error) {
	f, e := object(raw, path)
	if e != nil {
		return "", e
	}
	typ, e := str(f["type"], path+".type")
	if e != nil {
		return "", e
	}
	if typ != "text" {
		if where == "tool_result" && typ == "image" {
			return "", errorf(path+".type", "images inside a tool_result cannot be translated to chat completions (tool messages carry text only); send the image in a user text turn's image block instead")
		}
		return "", errorf(path+".type", "blocks of type %q cannot be translated to chat completions for this model; %s may hold text blocks only", typ, where)
	}
	return t.text(f, path)
}

// text reads a text block's text.
func (t *translator) text(f fields, path string) (string, *Error) {
	if e := f.only(path, "a text block", "type", "text", "citations"); e != nil {
		return "", e
	}
	if c := f["citations"]; !isNull(c) && string(c) != "[]" {
		return "", errorf(path+".citations", "citations cannot be translated to chat completions for this model")
	}
	s, e := str(f["text"], path+".text")
	if e != nil {
		return "", e
	}
	t.chars += len(s)
	return s, nil
}

// messages translates the conversation. prefill reports a final assistant message, which the answer
// continues.
func (t *translator) messages(raw json.RawMessage) ([]chatMessage, bool, *Error) {
	var list []json.RawMessage
	if isNull(raw) || !isKind(raw, '[') || json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return nil, false, errorf("messages", "messages is required and must be a non-empty array")
	}
	var (
		out     []chatMessage
		pending []string // tool_use ids of the previous assistant message, awaiting their tool_result
		prefill bool
	)
	for i, r := range list {
		path := fmt.Sprintf("messages[%d]", i)
		f, e := object(r, path)
		if e != nil {
			return nil, false, e
		}
		if e := f.only(path, "a message", "role", "content"); e != nil {
			return nil, false, e
		}
		role, _ := str(f["role"], "")
		if role != "user" && role != "assistant" {
			return nil, false, errorf(path+".role", "must be \"user\" or \"assistant\"")
		}
		content := f["content"]
		if isNull(content) || !(isKind(content, '"') || isKind(content, '[')) {
			return nil, false, errorf(path+".content", "is required and must be a string or an array of content blocks")
		}
		if role == "user" {
			msgs, e := t.userTurn(content, path, pending)
			if e != nil {
				return nil, false, e
			}
			out = append(out, msgs...)
			pending = nil
			continue
		}
		if len(pending) > 0 {
			return nil, false, errorf(fmt.Sprintf("messages[%d]", i-1), "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
				strings.Join(pending, ", "))
		}
		msg, ids, e := t.assistantTurn(content, path)
		if e != nil {
			return nil, false, e
		}
		out = append(out, msg)
		pending = ids
		prefill = i == len(list)-1
	}
	if len(pending) > 0 {
		return nil, false, errorf(fmt.Sprintf("messages[%d]", len(list)-1), "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
			strings.Join(pending, ", "))
	}
	return out, prefill, nil
}

// block reads a content block's type and fields.
func block(raw json.RawMessage, path string) (string, fields, *Error) {
	f, e := object(raw, path)
	if e != nil {
		return "", nil, e
	}
	typ, e := str(f["type"], path+".type")
	if e != nil {
		return "", nil, errorf(path+".type", "is required and must be a string")
	}
	return typ, f, nil
}

// userTurn translates a user message: its tool_result blocks become tool messages, placed before the
// rest of its content (chat templates expect tool answers right after the assistant's tool calls).
// pending are the tool_use ids that the previous assistant message asked for.
func (t *translator) userTurn(content json.RawMessage, path string, pending []string) ([]chatMessage, *Error) {
	if isKind(content, '"') {
		s, e := str(content, path+".content")
		if e != nil {
			return nil, e
		}
		if len(pending) > 0 {
			return nil, errorf(path, "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
				strings.Join(pending, ", "))
		}
		t.chars += len(s)
		return []chatMessage{{Role: "user", Content: s}}, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(content, &list) != nil {
		return nil, errorf(path+".content", "must be a string or an array of content blocks")
	}
	var (
		tools    []chatMessage
		parts    []chatPart
		images   bool
		answered = map[string]bool{}
	)
	for j, r := range list {
		bp := fmt.Sprintf("%s.content[%d]", path, j)
		typ, f, e := block(r, bp)
		if e != nil {
			return nil, e
		}
		switch typ {
		case "text":
			s, e := t.text(f, bp)
			if e != nil {
				return nil, e
			}
			parts = append(parts, chatPart{Type: "text", Text: &s})
		case "image":
			url, e := image(f, bp)
			if e != nil {
				return nil, e
			}
			images = true
			parts = append(parts, chatPart{Type: "image_url", ImageURL: &chatImageURL{URL: url}})
		case "tool_result":
			msg, id, e := t.toolResult(f, bp)
			if e != nil {
				return nil, e
			}
			if !contains(pending, id) {
				return nil, errorf(bp+".tool_use_id", "names no tool_use block of the previous assistant message; each tool_result block needs a matching tool_use block in the message before it")
			}
			if answered[id] {
				return nil, errorf(bp+".tool_use_id", "answers a tool_use that an earlier tool_result block of this message already answered")
			}
			answered[id] = true
			tools = append(tools, msg)
		case "tool_use":
			return nil, errorf(bp+".type", "tool_use blocks belong in assistant messages")
		default:
			return nil, errorf(bp+".type", "blocks of type %q cannot be translated to chat completions for this model; user messages may hold text, image and tool_result blocks", typ)
		}
	}
	var missing []string
	for _, id := range pending {
		if !answered[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, errorf(path, "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
			strings.Join(missing, ", "))
	}
	out := tools
	switch {
	case images:
		out = append(out, chatMessage{Role: "user", Content: parts})
	case len(parts) > 0 || len(tools) == 0:
		// Text only: one string, the text blocks joined by newlines as vLLM joins text parts.
		texts := make([]string, len(parts))
		for k, p := range parts {
			texts[k] = *p.Text
		}
		out = append(out, chatMessage{Role: "user", Content: strings.Join(texts, "\n")})
	}
	return out, nil
}

// image returns the URL of an image block: its url, or a data: URL holding its base64 data.
func image(f fields, path string) (string, *Error) {
	if e := f.only(path, "an image block", "type", "source"); e != nil {
		return "", e
	}
	sp := path + ".source"
	src, e := object(f["source"], sp)
	if e != nil {
		return "", errorf(sp, "is required and must be an object")
	}
	typ, _ := str(src["type"], "")
	switch typ {
	case "base64":
		if e := src.only(sp, "a base64 image source", "type", "media_type", "data"); e != nil {
			return "", e
		}
		mt, e := str(src["media_type"], sp+".media_type")
		if e != nil {
			return "", e
		}
		if !contains(imageTypes, mt) {
			return "", errorf(sp+".media_type", "must be one of %s", strings.Join(imageTypes, ", "))
		}
		data, e := str(src["data"], sp+".data")
		if e != nil {
			return "", e
		}
		if data == "" {
			return "", errorf(sp+".data", "must not be empty")
		}
		return "data:" + mt + ";base64," + data, nil
	case "url":
		if e := src.only(sp, "a url image source", "type", "url"); e != nil {
			return "", e
		}
		u, e := str(src["url"], sp+".url")
		if e != nil {
			return "", e
		}
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return "", errorf(sp+".url", "must be an http or https URL")
		}
		return u, nil
	}
	return "", errorf(sp+".type", "image sources of type %q cannot be translated to chat completions for this model; send base64 or url", typ)
}

// toolResult turns a tool_result block into a tool message.
func (t *translator) toolResult(f fields, path string) (chatMessage, string, *Error) {
	if e := f.only(path, "a tool_result block", "type", "tool_use_id", "content", "is_error"); e != nil {
		return chatMessage{}, "", e
	}
	id, e := str(f["tool_use_id"], path+".tool_use_id")
	if e != nil || id == "" {
		return chatMessage{}, "", errorf(path+".tool_use_id", "is required and must be a non-empty string")
	}
	var text string
	switch c := f["content"]; {
	case isNull(c):
	case isKind(c, '"'):
		if text, e = str(c, path+".content"); e != nil {
			return chatMessage{}, "", e
		}
		t.chars += len(text)
	case isKind(c, '['):
		var list []json.RawMessage
		if json.Unmarshal(c, &list) != nil {
			return chatMessage{}, "", errorf(path+".content", "must be a string or an array of text blocks")
		}
		parts := make([]string, 0, len(list))
		for k, r := range list {
			s, e := t.textOnly(r, fmt.Sprintf("%s.content[%d]", path, k), "tool_result")
			if e != nil {
				return chatMessage{}, "", e
			}
			parts = append(parts, s)
		}
		text = strings.Join(parts, "\n")
	default:
		return chatMessage{}, "", errorf(path+".content", "must be a string or an array of text blocks")
	}
	if r := f["is_error"]; !isNull(r) {
		if string(r) != "true" && string(r) != "false" {
			return chatMessage{}, "", errorf(path+".is_error", "must be true or false")
		}
		// Tool messages have no error flag; the model learns of the failure from the text.
		if string(r) == "true" {
			if text == "" {
				text = "Error"
			} else {
				text = "Error: " + text
			}
		}
	}
	return chatMessage{Role: "tool", ToolCallID: id, Content: text}, id, nil
}

// assistantTurn translates an assistant message: text blocks become its content, tool_use blocks its
// tool_calls. It returns the tool_use ids, which the next message must answer.
func (t *translator) assistantTurn(content json.RawMessage, path string) (chatMessage, []string, *Error) {
	if isKind(content, '"') {
		s, e := str(content, path+".content")
		t.chars += len(s)
		return chatMessage{Role: "assistant", Content: s}, nil, e
	}
	var list []json.RawMessage
	if json.Unmarshal(content, &list) != nil {
		return chatMessage{}, nil, errorf(path+".content", "must be a string or an array of content blocks")
	}
	var (
		texts []string
		calls []chatToolCall
		ids   []string
	)
	for j, r := range list {
		bp := fmt.Sprintf("%s.content[%d]", path, j)
		typ, f, e := block(r, bp)
		if e != nil {
			return chatMessage{}, nil, e
		}
		switch typ {
		case "text":
			s, e := t.text(f, bp)
			if e != nil {
				return chatMessage{}, nil, e
			}
			texts = append(texts, s)
		case "tool_use":
			if e := f.only(bp, "a tool_use block", "type", "id", "name", "input"); e != nil {
				return chatMessage{}, nil, e
			}
			id, e := str(f["id"], bp+".id")
			if e != nil || id == "" {
				return chatMessage{}, nil, errorf(bp+".id", "is required and must be a non-empty string")
			}
			if contains(ids, id) {
				return chatMessage{}, nil, errorf(bp+".id", "tool_use ids must be unique within a message")
			}
			name, e := str(f["name"], bp+".name")
			if e != nil || name == "" {
				return chatMessage{}, nil, errorf(bp+".name", "is required and must be a non-empty string")
			}
			if !isKind(f["input"], '{') {
				return chatMessage{}, nil, errorf(bp+".input", "is required and must be an object")
			}
			args := string(compact(f["input"]))
			t.chars += len(name) + len(args)
			ids = append(ids, id)
			calls = append(calls, chatToolCall{ID: id, Type: "function", Function: chatFunction{Name: name, Arguments: args}})
		case "image", "tool_result":
			return chatMessage{}, nil, errorf(bp+".type", "%s blocks belong in user messages", typ)
		default:
			return chatMessage{}, nil, errorf(bp+".type", "blocks of type %q cannot be translated to chat completions for this model; assistant messages may hold text and tool_use blocks", typ)
		}
	}
	msg := chatMessage{Role: "assistant", ToolCalls: calls}
	if len(texts) > 0 || len(calls) == 0 {
		msg.Content = strings.Join(texts, "\n")
	}
	return msg, ids, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
