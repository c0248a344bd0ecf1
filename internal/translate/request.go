package translate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/svcdev/svc/internal/bytememo"
	"github.com/svcdev/svc/internal/conv"
)

// topLevel lists the request fields that translate, for error messages.
var topLevel = []string{"model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature",
	"top_p", "top_k", "metadata", "tools", "tool_choice", "thinking", "output_config"}

// hints are top-level fields that change no answer: accepted, ignored and named in RequestInfo.Ignored.
var hints = map[string]bool{"cache_control": true, "context_management": true, "service_tier": true}

// toolName is the shape Anthropic (and OpenAI) accept for a tool name.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// imageTypes are the media types Anthropic accepts for base64 images.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// translator holds the state of one request's translation.
type translator struct {
	info     RequestInfo
	opts     Options
	chars    int
	counting bool // a count_tokens body: max_tokens is not required (nor checked against thinking)
	// toolsJSON is the chat request's tools member when the tools were read before (messagesTools).
	toolsJSON []byte
}

// messagesTools keeps the Messages requests' tools read lately; names are those sent upstream.
var messagesTools = newToolMemo[map[string]bool]()

// MessagesToChatWith validates an Anthropic Messages request body and returns the equivalent OpenAI
// chat completions request, as members the edge's chat path takes without decoding them (Chat), plus
// what the response side needs to know. A body
// that is not valid, or holds a field or block this translation cannot carry, is an *Error naming
// it; hints are accepted and named in info.Ignored.
func MessagesToChatWith(body []byte, opts Options) (chat *Chat, info *RequestInfo, err *Error) {
	t := &translator{opts: opts}
	out, e := t.translate(body)
	if e != nil {
		return nil, nil, e
	}
	chat, mErr := out.chatWith(t.toolsJSON)
	if mErr != nil {
		return nil, nil, errorf("", "request cannot be translated: %s", mErr.Error())
	}
	return chat, &t.info, nil
}

func (t *translator) translate(body []byte) (*chatRequest, *Error) {
	top, e := members(body, t.opts)
	if e != nil {
		return nil, e
	}
	t.info.secret = t.opts.Secret
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case contains(topLevel, k):
		case hints[k]:
			t.info.ignore(k)
		case k == "container":
			return nil, errorf(k, "containers are not supported by this model: svc translates its requests to chat completions, which run no code execution container")
		case k == "thread":
			// Anthropic's message threads (the SDKs' tool runner asks for one by default): svc keeps no
			// thread, and says so with the code on which the SDKs fall back to sending the history.
			e := errorf(k, "message threads are not supported by this endpoint: send the conversation's history in messages")
			e.Unsupported = []string{"thread"}
			return nil, e
		case k == "mcp_servers":
			return nil, errorf(k, "MCP servers are not supported by this model: svc translates its requests to chat completions, which cannot connect to MCP servers; run the MCP client on your side and pass its tools in tools")
		default:
			return nil, errorf(k, "cannot be translated to chat completions for this model; the fields that translate are %s",
				strings.Join(topLevel, ", "))
		}
	}

	var out chatRequest
	if raw := top["model"]; !isNull(raw) {
		m, e := str(raw, "model")
		if e != nil {
			return nil, e
		}
		t.info.Model = m
		out.Model = quoted(m)
	}
	if !t.counting || !isNull(top["max_tokens"]) {
		if e := t.maxTokens(top["max_tokens"], &out); e != nil {
			return nil, e
		}
	}
	if raw := top["stream"]; !isNull(raw) {
		if e := boolean(raw, "stream"); e != nil {
			return nil, e
		}
		t.info.Stream = string(raw) == "true"
	}
	if t.info.Stream {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if e := t.sampling(top, &out); e != nil {
		return nil, e
	}
	if e := t.metadata(top["metadata"], &out); e != nil {
		return nil, e
	}
	if e := t.reasoning(top["thinking"], top["output_config"], &out); e != nil {
		return nil, e
	}
	names, e := t.tools(top["tools"], &out)
	if e != nil {
		return nil, e
	}
	if e := t.toolChoice(top["tool_choice"], names, &out); e != nil {
		return nil, e
	}
	system, e := t.system(top["system"], nil, "system")
	if e != nil {
		return nil, e
	}
	if system != "" {
		out.Messages = append(out.Messages, conv.Message{Role: "system", Content: system})
	}
	msgs, prefill, e := t.messages(top["messages"])
	if e != nil {
		return nil, e
	}
	out.Messages = append(out.Messages, msgs...)
	if prefill {
		no := false
		out.ContinueFinalMessage, out.AddGenerationPrompt = true, &no
	}
	t.info.PromptChars = t.chars
	return &out, nil
}

// reasoning translates thinking and output_config (docs/API.md, "Reasoning"): thinking enabled or
// adaptive asks for thinking blocks and reasoning; the effort comes from output_config.effort, else
// from budget_tokens; output_config.format asks for JSON output valid against a schema. Thinking
// disabled sends no reasoning control at all.
func (t *translator) reasoning(thinking, config json.RawMessage, out *chatRequest) *Error {
	var on *bool
	effort, disabled := "", false
	if !isNull(thinking) {
		f, e := object(thinking, "thinking")
		if e != nil {
			return e
		}
		typ, _ := str(f["type"], "")
		switch typ {
		case "disabled":
			if e := t.only(f, "thinking", "thinking of type disabled", "type"); e != nil {
				return e
			}
			disabled = true
		case "enabled", "adaptive", "between_tools":
			allowed := []string{"type", "display"}
			if typ == "enabled" {
				allowed = append(allowed, "budget_tokens")
			}
			if e := t.only(f, "thinking", "thinking of type "+typ, allowed...); e != nil {
				return e
			}
			if typ == "enabled" {
				var n int64
				raw := f["budget_tokens"]
				if isNull(raw) || !isNumber(raw) || json.Unmarshal(raw, &n) != nil || n < 1024 || n > 1<<31-1 {
					return errorf("thinking.budget_tokens", "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
				}
				if !t.counting && int(n) >= t.info.MaxTokens {
					return errorf("thinking.budget_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`")
				}
				effort = effortOfBudget(int(n))
			}
			if d := f["display"]; !isNull(d) {
				s, e := str(d, "thinking.display")
				if e != nil {
					return e
				}
				switch s {
				case "summarized", "omitted":
					t.info.ThinkingOmitted = s == "omitted"
				default:
					// A display svc does not know (Claude Code 2.1.332 sends "updates"): the thinking is
					// shown as with summarized, and the field named as ignored.
					t.info.ignore("thinking.display")
				}
			}
			yes := true
			on = &yes
			t.info.Thinking = true
		default:
			return errorf("thinking.type", "must be one of enabled, adaptive, disabled")
		}
	}
	if !isNull(config) {
		f, e := object(config, "output_config")
		if e != nil {
			return e
		}
		if e := t.only(f, "output_config", "output_config", "effort", "format"); e != nil {
			return e
		}
		if raw := f["effort"]; !isNull(raw) {
			s, _ := str(raw, "")
			if !contains([]string{"low", "medium", "high", "xhigh", "max"}, s) {
				return errorf("output_config.effort", "must be one of low, medium, high, xhigh, max")
			}
			effort = s
		}
		if raw := f["format"]; !isNull(raw) {
			ff, e := object(raw, "output_config.format")
			if e != nil {
				return e
			}
			if e := t.only(ff, "output_config.format", "output_config.format", "type", "schema"); e != nil {
				return e
			}
			if typ, _ := str(ff["type"], ""); typ != "json_schema" {
				return errorf("output_config.format.type", "must be json_schema")
			}
			if !isKind(ff["schema"], '{') {
				return errorf("output_config.format.schema", "is required and must be a JSON Schema object")
			}
			schema := compact(ff["schema"])
			t.chars += len(schema)
			yes := true
			out.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": map[string]any{
				"name": "output", "schema": json.RawMessage(schema), "strict": &yes}}
		}
	}
	if !disabled {
		applyReasoning(out, t.opts.Reasoning, on, effort)
	}
	return nil
}

func (t *translator) maxTokens(raw json.RawMessage, out *chatRequest) *Error {
	var n int64
	if isNull(raw) || !isNumber(raw) || json.Unmarshal(raw, &n) != nil || n < 1 || n > 1<<31-1 {
		return errorf("max_tokens", "is required and must be a positive integer")
	}
	t.info.MaxTokens = int(n)
	out.MaxTokens = int(n)
	return nil
}

// sampling translates stop_sequences, temperature, top_p and top_k.
func (t *translator) sampling(top fields, out *chatRequest) *Error {
	if raw := top["stop_sequences"]; !isNull(raw) {
		var list []json.RawMessage
		if !isKind(raw, '[') || !elementsInto(raw, &list) {
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
		if e := number(top[p.name], p.name, p.max, p.dst); e != nil {
			return e
		}
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

// number copies a number from 0 to max (temperature, top_p) into dst.
func number(raw json.RawMessage, name string, max float64, dst *json.RawMessage) *Error {
	if isNull(raw) {
		return nil
	}
	var v float64
	if !isNumber(raw) || json.Unmarshal(raw, &v) != nil || v < 0 || v > max {
		return errorf(name, "must be a number from 0 to %g", max)
	}
	*dst = compact(raw)
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
	if e := t.only(f, "metadata", "metadata", "user_id"); e != nil {
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

// serverTool reports a tool type that Anthropic runs itself (or defines for a client that knows
// it): svc cannot run it, and a chat completions model knows no schema for it.
func serverTool(typ string) bool {
	for _, p := range []string{"web_search_", "web_fetch_", "code_execution_", "computer_", "bash_", "text_editor_",
		"memory_", "tool_search_tool_", "browser_", "mcp_"} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// tools translates the tool definitions and returns the names of those sent upstream. Server tools
// are left out and named.
func (t *translator) tools(raw json.RawMessage, out *chatRequest) (map[string]bool, *Error) {
	if isNull(raw) {
		return map[string]bool{}, nil
	}
	kept, key, ok := messagesTools.Get(raw)
	if ok {
		kept.use(out, &t.chars, &t.info)
		t.toolsJSON = kept.encoded
		return kept.names, nil
	}
	// Read here, and kept with the names it ignored and the size it counted.
	before, chars := t.info.Ignored, t.chars
	t.info.Ignored = nil
	names, e := t.readTools(raw, out)
	ignored := t.info.Ignored
	t.info.Ignored = before
	if e != nil {
		return nil, e
	}
	r := &toolsRead[map[string]bool]{tools: out.Tools, chars: t.chars - chars, ignored: ignored, names: names}
	t.chars = chars
	r.use(out, &t.chars, &t.info)
	r.encoded = appendTools(make([]byte, 0, toolsSize(r.tools)), r.tools)
	messagesTools.Put(key, raw, len(r.encoded), r)
	t.toolsJSON = r.encoded
	return names, nil
}

// readTools is tools' reading of the tool definitions.
func (t *translator) readTools(raw json.RawMessage, out *chatRequest) (map[string]bool, *Error) {
	names := map[string]bool{}
	var list []json.RawMessage
	if !isKind(raw, '[') || !elementsInto(raw, &list) {
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
			if serverTool(s) {
				t.info.ignore("tools[]:" + s)
				continue
			}
			if s != "custom" {
				return nil, errorf(path+".type", "the tool type %q cannot be translated to chat completions for this model; only custom tools (name, description, input_schema) can", s)
			}
		}
		if e := t.only(f, path, "a tool", "type", "name", "description", "input_schema", "strict", "eager_input_streaming", "defer_loading"); e != nil {
			return nil, e
		}
		if d, ok := f["defer_loading"]; ok {
			// Anthropic's tool search loads a deferred tool when the model looks for it; a chat
			// completions model is given every tool at once (Claude Code 2.1.332 defers its MCP tools).
			if e := boolean(d, path+".defer_loading"); e != nil {
				return nil, e
			}
			t.info.ignore(path + ".defer_loading")
		}
		if _, ok := f["eager_input_streaming"]; ok {
			// Anthropic streams a tool's input without buffering it when asked; svc streams it as the
			// upstream sends it either way.
			t.info.ignore(path + ".eager_input_streaming")
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
		fn := conv.ToolFunc{Name: name}
		if d := f["description"]; !isNull(d) {
			if fn.Description, e = str(d, path+".description"); e != nil {
				return nil, e
			}
		}
		if s := f["strict"]; !isNull(s) {
			if e := boolean(s, path+".strict"); e != nil {
				return nil, e
			}
			strict := string(s) == "true"
			fn.Strict = &strict
		}
		schema := f["input_schema"]
		if !isKind(schema, '{') {
			return nil, errorf(path+".input_schema", "is required and must be a JSON Schema object")
		}
		fn.Parameters = compact(schema)
		t.chars += len(name) + len(fn.Description) + len(fn.Parameters)
		out.Tools = append(out.Tools, conv.Tool{Type: "function", Function: fn})
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
	if e := t.only(f, "tool_choice", "tool_choice of type "+typ, allowed...); e != nil {
		return e
	}
	noParallel := false
	if r := f["disable_parallel_tool_use"]; !isNull(r) {
		if e := boolean(r, "tool_choice.disable_parallel_tool_use"); e != nil {
			return e
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
			return errorf("tool_choice.name", "names no tool in tools that svc can call (server tools are left out)")
		}
		out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": name}}
	}
	if len(out.Tools) == 0 {
		if typ == "any" || typ == "tool" {
			return errorf("tool_choice", "of type %q needs tools", typ)
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

// system returns the text of a system prompt: the top-level system (at nil), or a system-role entry's
// content; name is its member's name.
func (t *translator) system(raw json.RawMessage, at *loc, name string) (string, *Error) {
	if isNull(raw) {
		return "", nil
	}
	if isKind(raw, '"') {
		s, e := at.str(raw, name)
		t.chars += len(s)
		return s, e
	}
	var parts []string
	_, e, ok := eachElement(raw, func(el json.RawMessage, i int) *Error {
		l := loc{up: at, name: name, index: i}

		b, e := t.textOnly(el, &l, "system")
		parts = append(parts, b)
		return e
	})
	if !ok {
		return "", errorf(at.key(name), "must be a string or an array of text blocks")
	}
	if e != nil {
		return "", e
	}
	return strings.Join(parts, "\n"), nil
}

// textOnly reads a block that must be a text block (in a system prompt).
func (t *translator) textOnly(raw json.RawMessage, at *loc, where string) (string, *Error) {
	var buf [4]member
	typ, f, e := block(raw, at, buf[:])
	if e != nil {
		return "", e
	}
	if typ != "text" {
		return "", errorf(at.key("type"), "blocks of type %q cannot be translated to chat completions for this model; %s may hold text blocks only", typ, where)
	}
	return t.text(f, at)
}

// The members each kind of message and block may hold.
var (
	messageEntryKeys  = []string{"role", "content"}
	textBlockKeys     = []string{"type", "text", "citations"}
	imageBlockKeys    = []string{"type", "source"}
	base64SourceKeys  = []string{"type", "media_type", "data"}
	urlSourceKeys     = []string{"type", "url"}
	documentBlockKeys = []string{"type", "source", "title", "context", "citations"}
	textSourceKeys    = []string{"type", "media_type", "data"}
	contentSourceKeys = []string{"type", "content"}
	documentTexts     = []string{"title", "context"}
	toolResultKeys    = []string{"type", "tool_use_id", "content", "is_error"}
	thinkingBlockKeys = []string{"type", "thinking", "signature"}
	toolUseBlockKeys  = []string{"type", "id", "name", "input"}
)

// text reads a text block's text.
func (t *translator) text(f node, at *loc) (string, *Error) {
	if e := f.only(at, "a text block", textBlockKeys, &t.info); e != nil {
		return "", e
	}
	if c := f.get("citations"); !isNull(c) && string(c) != "[]" {
		return "", errorf(at.key("citations"), "cannot be translated to chat completions for this model")
	}
	s, e := at.str(f.get("text"), "text")
	if e != nil {
		return "", e
	}
	t.chars += len(s)
	return s, nil
}

// messages translates the conversation, read in one walk of jsonx's cursor (each entry and block into
// a node on the stack; no map, no path written unless an error or an ignored field names it). prefill
// reports a final assistant message, which the answer continues. System-role entries become system
// messages where they stand, except between an assistant's tool_use blocks and the tool_result blocks
// that answer them: there they follow the tool messages, which chat templates expect right after the
// tool calls. The entries a recent request read already (the same bytes from the array's start) are
// taken up from messagesInputs, and only those after them read (messagesmemo.go).
func (t *translator) messages(raw json.RawMessage) ([]conv.Message, bool, *Error) {
	if isNull(raw) {
		return nil, false, errorf("messages", "is required and must be a non-empty array")
	}
	if !isKind(raw, '[') {
		return nil, false, errorf("messages", "is required and must be a non-empty array")
	}
	st, from, at := t.resumeMessages(raw)
	entries, ends, ok := bytememo.Elements(raw, at)
	if !ok || from+len(entries) == 0 {
		return nil, false, errorf("messages", "is required and must be a non-empty array")
	}
	// The entries' ignored names are gathered apart, to be kept with them, then added to the others.
	before, chars := t.info.Ignored, t.chars
	t.info.Ignored, t.chars = st.ignored, t.chars+st.chars
	for i, entry := range entries {
		if e := t.entry(entry, from+i, &st); e != nil {
			return nil, false, e
		}
	}
	if len(entries) > 0 && (from > 0 || messagesInputs.Offered(raw)) { // kept once its head comes again (Offered)
		t.keepMessages(raw, from+len(entries), ends[len(ends)-1], st, t.chars-chars, t.info.Ignored)
	}
	ignored := t.info.Ignored
	t.info.Ignored = before
	for _, n := range ignored {
		t.info.ignore(n)
	}
	if len(st.pending) > 0 {
		return nil, false, errorf(fmt.Sprintf("messages[%d]", st.last), "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
			strings.Join(st.pending, ", "))
	}
	if st.last < 0 {
		return nil, false, errorf("messages", "must hold at least one user or assistant message")
	}
	return st.out, st.prefill, nil
}

// entry translates the messages array's entry el, at index i, going on from st.
func (t *translator) entry(el json.RawMessage, i int, st *messagesRead) *Error {
	at := loc{name: "messages", index: i}
	st.prefill = false
	var buf [4]member
	f, e := readNode(el, &at, buf[:])
	if e != nil {
		return e
	}
	if e := f.only(&at, "a message", messageEntryKeys, &t.info); e != nil {
		return e
	}
	role, _ := word(f.get("role"))
	if role != "user" && role != "assistant" && role != "system" {
		return errorf(at.key("role"), "Unexpected role %q. Allowed roles are \"user\", \"assistant\" and \"system\"", role)
	}
	content := f.get("content")
	if isNull(content) || !(isKind(content, '"') || isKind(content, '[')) {
		return errorf(at.key("content"), "is required and must be a string or an array of content blocks")
	}
	if role == "system" {
		s, e := t.system(content, &at, "content")
		if e != nil {
			return e
		}
		msg := conv.Message{Role: "system", Content: s}
		if len(st.pending) > 0 {
			st.deferred = append(st.deferred, msg)
		} else {
			st.out = append(st.out, msg)
		}
		return nil
	}
	st.last = i
	if role == "user" {
		msgs, e := t.userTurn(content, &at, st.pending, st.deferred)
		if e != nil {
			return e
		}
		st.out = append(st.out, msgs...)
		st.pending, st.deferred = nil, nil
		return nil
	}
	if len(st.pending) > 0 {
		return errorf(fmt.Sprintf("messages[%d]", i-1), "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
			strings.Join(st.pending, ", "))
	}
	msg, ids, e := t.assistantTurn(content, &at)
	if e != nil {
		return e
	}
	st.out = append(st.out, msg)
	st.pending = ids
	st.prefill = true
	return nil
}

// block reads a content block's type and members, into buf's room.
func block(raw json.RawMessage, at *loc, buf []member) (string, node, *Error) {
	f, e := readNode(raw, at, buf)
	if e != nil {
		return "", nil, e
	}
	typ, ok := word(f.get("type"))
	if !ok {
		return "", nil, errorf(at.key("type"), "is required and must be a string")
	}
	return typ, f, nil
}

// userTurn translates a user message: its tool_result blocks become tool messages, placed before the
// rest of its content (chat templates expect tool answers right after the assistant's tool calls);
// images that tools returned follow in a user message of their own (tool messages carry text only).
// pending are the tool_use ids that the previous assistant message asked for; deferred are system
// messages that came between that message and this one.
func (t *translator) userTurn(content json.RawMessage, at *loc, pending []string, deferred []conv.Message) ([]conv.Message, *Error) {
	if isKind(content, '"') {
		s, e := at.str(content, "content")
		if e != nil {
			return nil, e
		}
		if len(pending) > 0 {
			return nil, errorf(at.String(), "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
				strings.Join(pending, ", "))
		}
		t.chars += len(s)
		return append(deferred, conv.Message{Role: "user", Content: s}), nil
	}
	var (
		tools      []conv.Message
		toolImages []conv.Part
		buf        [4]conv.Part
		parts      = buf[:0]
		answered   []string
	)
	_, e, ok := eachElement(content, func(el json.RawMessage, i int) *Error {
		bp := loc{up: at, name: "content", index: i}

		var nbuf [6]member
		typ, f, e := block(el, &bp, nbuf[:])
		if e != nil {
			return e
		}
		switch typ {
		case "text":
			s, e := t.text(f, &bp)
			if e != nil {
				return e
			}
			parts = append(parts, conv.Part{Type: "text", Text: &s})
		case "image":
			p, e := t.image(f, &bp)
			if e != nil {
				return e
			}
			parts = append(parts, p)
		case "document":
			ps, e := t.document(f, &bp)
			if e != nil {
				return e
			}
			parts = append(parts, ps...)
		case "tool_result":
			msg, id, images, e := t.toolResult(f, &bp)
			if e != nil {
				return e
			}
			if !contains(pending, id) {
				return errorf(bp.key("tool_use_id"), "names no tool_use block of the previous assistant message; each tool_result block needs a matching tool_use block in the message before it")
			}
			if contains(answered, id) {
				return errorf(bp.key("tool_use_id"), "answers a tool_use that an earlier tool_result block of this message already answered")
			}
			answered = append(answered, id)
			tools = append(tools, msg)
			if len(images) > 0 {
				label := fmt.Sprintf("The tool call %s returned these images:", id)
				t.chars += len(label)
				toolImages = append(toolImages, conv.Part{Type: "text", Text: &label})
				toolImages = append(toolImages, images...)
			}
		case "tool_use", "thinking", "redacted_thinking":
			return errorf(bp.key("type"), "%s blocks belong in assistant messages", typ)
		default:
			return errorf(bp.key("type"), "blocks of type %q cannot be translated to chat completions for this model; user messages may hold text, image, document and tool_result blocks", typ)
		}
		return nil
	})
	if !ok {
		return nil, errorf(at.key("content"), "must be a string or an array of content blocks")
	}
	if e != nil {
		return nil, e
	}
	var missing []string
	for _, id := range pending {
		if !contains(answered, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, errorf(at.String(), "tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block needs a tool_result block in the next message",
			strings.Join(missing, ", "))
	}
	out := append(tools, deferred...)
	if len(toolImages) > 0 {
		parts = append(toolImages, parts...)
	}
	if len(parts) > 0 || len(tools) == 0 {
		out = append(out, textMessage("user", parts))
	}
	return out, nil
}

// image turns an image block into an image_url part: its url, or a data: URL holding its base64 data.
func (t *translator) image(f node, at *loc) (conv.Part, *Error) {
	if e := f.only(at, "an image block", imageBlockKeys, &t.info); e != nil {
		return conv.Part{}, e
	}
	sp := &loc{up: at, name: "source", index: -1}
	var buf [4]member
	src, e := readNode(f.get("source"), sp, buf[:])
	if e != nil {
		return conv.Part{}, errorf(sp.String(), "is required and must be an object")
	}
	typ, _ := word(src.get("type"))
	var url string
	switch typ {
	case "base64":
		if e := src.only(sp, "a base64 image source", base64SourceKeys, &t.info); e != nil {
			return conv.Part{}, e
		}
		mt, e := sp.str(src.get("media_type"), "media_type")
		if e != nil {
			return conv.Part{}, e
		}
		if !contains(imageTypes, mt) {
			return conv.Part{}, errorf(sp.key("media_type"), "must be one of %s", strings.Join(imageTypes, ", "))
		}
		data, e := sp.str(src.get("data"), "data")
		if e != nil {
			return conv.Part{}, e
		}
		if data == "" {
			return conv.Part{}, errorf(sp.key("data"), "must not be empty")
		}
		url = "data:" + mt + ";base64," + data
	case "url":
		if e := src.only(sp, "a url image source", urlSourceKeys, &t.info); e != nil {
			return conv.Part{}, e
		}
		u, e := sp.str(src.get("url"), "url")
		if e != nil {
			return conv.Part{}, e
		}
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return conv.Part{}, errorf(sp.key("url"), "must be an http or https URL")
		}
		url = u
	default:
		return conv.Part{}, errorf(sp.key("type"), "image sources of type %q cannot be translated to chat completions for this model; send base64 or url", typ)
	}
	return conv.Part{Type: "image_url", ImageURL: &conv.ImageURL{URL: url}}, nil
}

// document turns a document block with a text or content source into parts: its title and context,
// then its text (and the images of a content source).
func (t *translator) document(f node, at *loc) ([]conv.Part, *Error) {
	if e := f.only(at, "a document block", documentBlockKeys, &t.info); e != nil {
		return nil, e
	}
	if c := f.get("citations"); !isNull(c) {
		var buf [4]member
		if cf, e := readNode(c, at, buf[:]); e != nil || string(cf.get("enabled")) == "true" {
			return nil, errorf(at.key("citations"), "not supported by this model: svc translates its requests to chat completions, which cite nothing")
		}
	}
	var texts []string
	for _, k := range documentTexts {
		if raw := f.get(k); !isNull(raw) {
			s, e := at.str(raw, k)
			if e != nil {
				return nil, e
			}
			texts = append(texts, s)
		}
	}
	sp := &loc{up: at, name: "source", index: -1}
	var buf [4]member
	src, e := readNode(f.get("source"), sp, buf[:])
	if e != nil {
		return nil, errorf(sp.String(), "is required and must be an object")
	}
	typ, _ := word(src.get("type"))
	var images []conv.Part
	switch typ {
	case "text":
		if e := src.only(sp, "a text document source", textSourceKeys, &t.info); e != nil {
			return nil, e
		}
		if mt, _ := unquote(src.get("media_type")); mt != "text/plain" {
			return nil, errorf(sp.key("media_type"), "must be text/plain")
		}
		s, e := sp.str(src.get("data"), "data")
		if e != nil {
			return nil, e
		}
		texts = append(texts, s)
	case "content":
		if e := src.only(sp, "a content document source", contentSourceKeys, &t.info); e != nil {
			return nil, e
		}
		c := src.get("content")
		if isKind(c, '"') {
			s, e := sp.str(c, "content")
			if e != nil {
				return nil, e
			}
			texts = append(texts, s)
			break
		}
		bad := !isKind(c, '[')
		if !bad {
			var e *Error
			_, e, ok := eachElement(c, func(el json.RawMessage, i int) *Error {
				bp := loc{up: sp, name: "content", index: i}

				var nbuf [4]member
				btyp, bf, e := block(el, &bp, nbuf[:])
				if e != nil {
					return e
				}
				switch btyp {
				case "text":
					s, e := t.text(bf, &bp)
					if e != nil {
						return e
					}
					t.chars -= len(s) // counted below with the document's other texts
					texts = append(texts, s)
				case "image":
					p, e := t.image(bf, &bp)
					if e != nil {
						return e
					}
					images = append(images, p)
				default:
					return errorf(bp.key("type"), "a content document source may hold text and image blocks only")
				}
				return nil
			})
			if ok && e != nil {
				return nil, e
			}
			bad = !ok
		}
		if bad {
			return nil, errorf(sp.key("content"), "must be a string or an array of text and image blocks")
		}
	case "base64", "url":
		return nil, errorf(sp.key("type"), "PDF documents are not supported by this model: svc translates its requests to chat completions, which take no PDF; send the document's text (a document with a text source, or a text block)")
	default:
		return nil, errorf(sp.key("type"), "document sources of type %q are not supported by this model; send a text or content source", typ)
	}
	s := strings.Join(texts, "\n\n")
	t.chars += len(s)
	return append([]conv.Part{{Type: "text", Text: &s}}, images...), nil
}

// toolResult turns a tool_result block into a tool message; the images it holds are returned apart.
func (t *translator) toolResult(f node, at *loc) (conv.Message, string, []conv.Part, *Error) {
	if e := f.only(at, "a tool_result block", toolResultKeys, &t.info); e != nil {
		return conv.Message{}, "", nil, e
	}
	id, ok := unquote(f.get("tool_use_id"))
	if !ok || id == "" {
		return conv.Message{}, "", nil, errorf(at.key("tool_use_id"), "is required and must be a non-empty string")
	}
	var (
		text   string
		images []conv.Part
	)
	switch c := f.get("content"); {
	case isNull(c):
	case isKind(c, '"'):
		var e *Error
		if text, e = at.str(c, "content"); e != nil {
			return conv.Message{}, "", nil, e
		}
		t.chars += len(text)
	case isKind(c, '['):
		var parts []string
		_, e, ok := eachElement(c, func(el json.RawMessage, i int) *Error {
			bp := loc{up: at, name: "content", index: i}

			var nbuf [4]member
			typ, bf, e := block(el, &bp, nbuf[:])
			if e != nil {
				return e
			}
			switch typ {
			case "text":
				s, e := t.text(bf, &bp)
				if e != nil {
					return e
				}
				parts = append(parts, s)
			case "image":
				p, e := t.image(bf, &bp)
				if e != nil {
					return e
				}
				images = append(images, p)
			case "document":
				ps, e := t.document(bf, &bp)
				if e != nil {
					return e
				}
				parts = append(parts, *ps[0].Text)
				images = append(images, ps[1:]...)
			default:
				return errorf(bp.key("type"), "blocks of type %q cannot be translated to chat completions for this model; a tool_result may hold text, image and document blocks", typ)
			}
			return nil
		})
		if !ok {
			return conv.Message{}, "", nil, errorf(at.key("content"), "must be a string or an array of text, image and document blocks")
		}
		if e != nil {
			return conv.Message{}, "", nil, e
		}
		text = strings.Join(parts, "\n")
	default:
		return conv.Message{}, "", nil, errorf(at.key("content"), "must be a string or an array of text, image and document blocks")
	}
	if r := f.get("is_error"); !isNull(r) {
		if string(r) != "true" && string(r) != "false" {
			return conv.Message{}, "", nil, boolean(r, at.key("is_error"))
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
	return conv.Message{Role: "tool", ToolCallID: id, Content: text}, id, images, nil
}

// assistantTurn translates an assistant message: text blocks become its content, tool_use blocks its
// tool_calls, thinking blocks (whose signatures must be svc's) its reasoning. It returns the tool_use
// ids, which the next message must answer.
func (t *translator) assistantTurn(content json.RawMessage, at *loc) (conv.Message, []string, *Error) {
	if isKind(content, '"') {
		s, e := at.str(content, "content")
		t.chars += len(s)
		return conv.Message{Role: "assistant", Content: s}, nil, e
	}
	var (
		texts     []string
		reasoning []string
		calls     []conv.ToolCall
		ids       []string
	)
	_, e, ok := eachElement(content, func(el json.RawMessage, i int) *Error {
		bp := loc{up: at, name: "content", index: i}

		var nbuf [6]member
		typ, f, e := block(el, &bp, nbuf[:])
		if e != nil {
			return e
		}
		switch typ {
		case "text":
			s, e := t.text(f, &bp)
			if e != nil {
				return e
			}
			texts = append(texts, s)
		case "thinking":
			if e := f.only(&bp, "a thinking block", thinkingBlockKeys, &t.info); e != nil {
				return e
			}
			s, e := bp.str(f.get("thinking"), "thinking")
			if e != nil {
				return e
			}
			sig, e := bp.str(f.get("signature"), "signature")
			if e != nil {
				return e
			}
			if !verifyThinking(t.opts.Secret, s, sig) {
				// Thinking svc did not sign (another provider's, another svc's, or altered) never reaches
				// the upstream as the assistant's reasoning: it is left out and named.
				bp.ignore(&t.info, ":thinking")
				return nil
			}
			if s != "" {
				t.chars += len(s)
				reasoning = append(reasoning, s)
			}
		case "redacted_thinking":
			// Encrypted by Anthropic: nothing svc could give to the upstream.
			bp.ignore(&t.info, ":redacted_thinking")
		case "tool_use":
			if e := f.only(&bp, "a tool_use block", toolUseBlockKeys, &t.info); e != nil {
				return e
			}
			id, ok := unquote(f.get("id"))
			if !ok || id == "" {
				return errorf(bp.key("id"), "is required and must be a non-empty string")
			}
			if contains(ids, id) {
				return errorf(bp.key("id"), "tool_use ids must be unique within a message")
			}
			name, ok := unquote(f.get("name"))
			if !ok || name == "" {
				return errorf(bp.key("name"), "is required and must be a non-empty string")
			}
			if !isKind(f.get("input"), '{') {
				return errorf(bp.key("input"), "is required and must be an object")
			}
			args := string(compact(f.get("input")))
			t.chars += len(name) + len(args)
			ids = append(ids, id)
			calls = append(calls, conv.ToolCall{ID: id, Type: "function", Function: conv.Function{Name: name, Arguments: args}})
		case "image", "tool_result", "document":
			return errorf(bp.key("type"), "%s blocks belong in user messages", typ)
		default:
			return errorf(bp.key("type"), "blocks of type %q cannot be translated to chat completions for this model; assistant messages may hold text, thinking and tool_use blocks", typ)
		}
		return nil
	})
	if !ok {
		return conv.Message{}, nil, errorf(at.key("content"), "must be a string or an array of content blocks")
	}
	if e != nil {
		return conv.Message{}, nil, e
	}
	msg := conv.Message{Role: "assistant", ToolCalls: calls, ReasoningContent: strings.Join(reasoning, "\n")}
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
