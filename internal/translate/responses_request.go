package translate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/svcdev/svc/internal/bytememo"
	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/jsonx"
)

// The OpenAI Responses API (POST /v1/responses) translated to chat completions (docs/API.md,
// "Responses API"): ResponsesToChat here, ChatToResponse and ResponsesStream for the answers,
// WithPrevious for previous_response_id.

// responsesFields are the request fields that translate, for error messages.
var responsesFields = []string{"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
	"reasoning", "max_output_tokens", "temperature", "top_p", "user", "metadata", "stream", "store", "previous_response_id"}

// translatedField is responsesFields as a set.
var translatedField = func() map[string]bool {
	m := make(map[string]bool, len(responsesFields))
	for _, f := range responsesFields {
		m[f] = true
	}
	return m
}()

// responsesHints change no answer: accepted, ignored and named in Ignored.
var responsesHints = map[string]bool{"include": true, "prompt_cache_key": true, "prompt_cache_retention": true,
	"prompt_cache_options": true, "client_metadata": true, "service_tier": true, "safety_identifier": true,
	"stream_options": true}

// hostedTools are tool types that OpenAI runs on its side; svc leaves them out and names them.
var hostedTools = map[string]bool{"web_search": true, "web_search_preview": true, "web_search_preview_2025_03_11": true,
	"web_search_2025_08_26": true, "file_search": true, "code_interpreter": true, "computer_use": true,
	"computer_use_preview": true, "computer": true, "image_generation": true, "tool_search": true}

// customInput is the parameters schema of a custom tool (free text input) offered as a function.
var customInput = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string"}},"required":["input"],"additionalProperties":false}`)

// ResponsesInfo is what the answer side of a Responses translation needs: the shared RequestInfo and
// what the response object echoes of the request.
type ResponsesInfo struct {
	RequestInfo
	echo responsesEcho
	// custom names the custom tools offered as functions: their calls answer as custom_tool_call.
	custom map[string]bool
	// toolsJSON is the chat request's tools member, the tools being read before (responsesTools).
	toolsJSON []byte
	// summary: the request asked for reasoning summaries (reasoning.summary): svc cannot summarise, so
	// the reasoning text is the summary, as clients that show only summaries (Codex, the AI SDK) read it.
	summary bool
}

// responsesEcho holds the request's settings as the response object repeats them.
type responsesEcho struct {
	instructions       json.RawMessage
	maxOutputTokens    json.RawMessage
	parallelToolCalls  bool
	previousResponseID json.RawMessage
	reasoning          json.RawMessage
	store              bool
	temperature        json.RawMessage
	text               json.RawMessage
	toolChoice         json.RawMessage
	tools              json.RawMessage
	topP               json.RawMessage
	user               json.RawMessage
	metadata           json.RawMessage
}

// rtranslator holds the state of one Responses request's translation.
type rtranslator struct {
	info  *ResponsesInfo
	opts  Options
	chars int
	out   []conv.Message

	asst      int             // index in out of the assistant message being built, -1 when none
	reasoning []string        // reasoning items waiting for their assistant message
	calls     map[string]bool // call_ids of the function calls read, besides seen's
	seen      map[string]bool // those of the items taken up from responsesInputs (shared: read only)
	waiting   []string        // call_ids of function calls not answered yet, in order
	deferred  []conv.Message  // system messages met while calls wait for their outputs
	images    []conv.Part     // images of the outputs answered so far, for a user message after them
}

// ResponsesToChat validates a Responses request body and returns the equivalent chat completions
// request, as members the edge's chat path takes without decoding them (Chat), plus what the answer side needs. A body this translation cannot carry is an *Error
// naming the field; hints are accepted and named in info.Ignored. previous_response_id is only
// echoed: the caller resolves it first (WithPrevious).
func ResponsesToChat(body []byte, opts Options) (chat *Chat, info *ResponsesInfo, err *Error) {
	out, info, e := responsesRequest(body, opts)
	if e != nil {
		return nil, nil, e
	}
	chat, mErr := out.chatWith(info.toolsJSON)
	if mErr != nil {
		return nil, nil, errorf("", "request cannot be translated: %s", mErr.Error())
	}
	return chat, info, nil
}

// ResponsesTools returns the function tools a Responses request body declares as its translation gives
// them to a chat model (custom text tools as functions; hosted tools, namespaces and grammar tools left
// out): what the export declares for the later turns of a chain that sent no tools of their own.
func ResponsesTools(body []byte) ([]conv.Tool, *Error) {
	top, e := object(body, "")
	if e != nil {
		return nil, e
	}
	t := &rtranslator{info: &ResponsesInfo{}, asst: -1, calls: map[string]bool{}}
	var out chatRequest
	if _, e := t.tools(top["tools"], &out); e != nil {
		return nil, e
	}
	return out.Tools, nil
}

// responsesRequest translates a Responses request body to the chat request it becomes.
func responsesRequest(body []byte, opts Options) (*chatRequest, *ResponsesInfo, *Error) {
	top, e := members(body, opts)
	if e != nil {
		return nil, nil, e
	}
	t := &rtranslator{info: &ResponsesInfo{}, opts: opts, asst: -1, calls: map[string]bool{}}
	t.info.secret = opts.Secret
	t.info.Thinking = true // reasoning is answered as reasoning items whenever the upstream reasons
	out, e := t.translate(top)
	if e != nil {
		return nil, nil, e
	}
	t.info.PromptChars = t.chars
	return out, t.info, nil
}

func (t *rtranslator) translate(top fields) (*chatRequest, *Error) {
	// The members other than those that translate are judged in the order of their names, so that the
	// same request meets the same error and names its ignored members alike; a request of only members
	// that translate (an agent's, each turn) is not sorted.
	var keys []string
	for k := range top {
		if !translatedField[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw := top[k]
		switch {
		case responsesHints[k]:
			if !isNull(raw) {
				t.info.ignore(k)
			}
		case k == "truncation":
			if s, _ := str(raw, ""); s == "auto" {
				return nil, errorf(k, "\"auto\" is not supported: svc does not drop input to fit the context; send \"disabled\" or leave it out")
			}
			if !isNull(raw) && string(raw) != `"disabled"` {
				return nil, errorf(k, "must be \"disabled\" or \"auto\"")
			}
			if !isNull(raw) {
				t.info.ignore(k)
			}
		case k == "background":
			if string(raw) == "true" {
				return nil, errorf(k, "not supported: svc answers no background responses; send the request without background and read its answer (or stream it)")
			}
			if !isNull(raw) && string(raw) != "false" {
				return nil, errorf(k, "must be true or false")
			}
		case k == "conversation" || k == "prompt":
			if !isNull(raw) {
				return nil, errorf(k, "not supported: svc keeps no conversations or prompt templates; send the input items (or previous_response_id)")
			}
		default:
			return nil, errorf(k, "cannot be translated to chat completions for this model; the fields that translate are %s",
				strings.Join(responsesFields, ", "))
		}
	}
	echo := &t.info.echo
	echo.parallelToolCalls, echo.store = true, true
	echo.metadata = json.RawMessage("{}")

	var out chatRequest
	if raw := top["model"]; !isNull(raw) {
		m, e := str(raw, "model")
		if e != nil {
			return nil, e
		}
		t.info.Model = m
		out.Model = quoted(m)
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
	if raw := top["store"]; !isNull(raw) {
		if e := boolean(raw, "store"); e != nil {
			return nil, e
		}
		// Runs are the store: store true needs nothing more, store false changes no answer.
		echo.store = string(raw) == "true"
		if !echo.store {
			t.info.ignore("store")
		}
	}
	if raw := top["previous_response_id"]; !isNull(raw) {
		if _, e := str(raw, "previous_response_id"); e != nil {
			return nil, e
		}
		echo.previousResponseID = compact(raw)
	}
	if raw := top["max_output_tokens"]; !isNull(raw) {
		var n int64
		if !isNumber(raw) || json.Unmarshal(raw, &n) != nil || n < 1 || n > 1<<31-1 {
			return nil, errorf("max_output_tokens", "must be a positive integer")
		}
		t.info.MaxTokens, out.MaxTokens = int(n), int(n)
		echo.maxOutputTokens = compact(raw)
	}
	if e := number(top["temperature"], "temperature", 2, &out.Temperature); e != nil {
		return nil, e
	}
	if e := number(top["top_p"], "top_p", 1, &out.TopP); e != nil {
		return nil, e
	}
	echo.temperature, echo.topP = out.Temperature, out.TopP
	if raw := top["user"]; !isNull(raw) {
		u, e := str(raw, "user")
		if e != nil {
			return nil, e
		}
		out.User, echo.user = u, compact(raw)
	}
	if e := t.metadata(top["metadata"]); e != nil {
		return nil, e
	}
	if e := t.text(top["text"], &out); e != nil {
		return nil, e
	}
	if e := t.reasoningConfig(top["reasoning"], &out); e != nil {
		return nil, e
	}
	names, e := t.tools(top["tools"], &out)
	if e != nil {
		return nil, e
	}
	if e := t.toolChoice(top["tool_choice"], names, &out); e != nil {
		return nil, e
	}
	if raw := top["parallel_tool_calls"]; !isNull(raw) {
		if e := boolean(raw, "parallel_tool_calls"); e != nil {
			return nil, e
		}
		echo.parallelToolCalls = string(raw) == "true"
		if len(out.Tools) > 0 && !echo.parallelToolCalls {
			no := false
			out.ParallelToolCalls = &no
		}
	}
	if raw := top["instructions"]; !isNull(raw) {
		s, e := str(raw, "instructions")
		if e != nil {
			return nil, e
		}
		echo.instructions = compact(raw)
		if s != "" {
			t.chars += len(s)
			t.out = append(t.out, conv.Message{Role: "system", Content: s})
		}
	}
	if e := t.input(top["input"]); e != nil {
		return nil, e
	}
	out.Messages = t.out
	return &out, nil
}

func (t *rtranslator) metadata(raw json.RawMessage) *Error {
	if isNull(raw) {
		return nil
	}
	f, e := object(raw, "metadata")
	if e != nil {
		return e
	}
	if len(f) > 16 {
		return errorf("metadata", "must have at most 16 keys")
	}
	for k, v := range f {
		if s, e := str(v, "metadata."+k); e != nil || len(s) > 512 || len(k) > 64 {
			return errorf("metadata."+k, "metadata values must be strings of at most 512 characters, keys at most 64")
		}
	}
	// Metadata is the caller's: it is kept in the response (and the run), never sent upstream.
	t.info.echo.metadata = compact(raw)
	return nil
}

// text translates text.format into response_format; verbosity is a hint.
func (t *rtranslator) text(raw json.RawMessage, out *chatRequest) *Error {
	t.info.echo.text = json.RawMessage(`{"format":{"type":"text"}}`)
	if isNull(raw) {
		return nil
	}
	f, e := object(raw, "text")
	if e != nil {
		return e
	}
	if e := onlyKeys(f, "text", "text", []string{"format", "verbosity"}, nil); e != nil {
		return e
	}
	if v := f["verbosity"]; !isNull(v) {
		t.info.ignore("text.verbosity")
	}
	t.info.echo.text = compact(raw)
	if isNull(f["format"]) {
		return nil
	}
	ff, e := object(f["format"], "text.format")
	if e != nil {
		return e
	}
	typ, _ := str(ff["type"], "")
	switch typ {
	case "text":
		return onlyKeys(ff, "text.format", "a text format", []string{"type"}, nil)
	case "json_object":
		if e := onlyKeys(ff, "text.format", "a json_object format", []string{"type"}, nil); e != nil {
			return e
		}
		out.ResponseFormat = map[string]string{"type": "json_object"}
	case "json_schema":
		if e := onlyKeys(ff, "text.format", "a json_schema format", []string{"type", "name", "schema", "strict", "description"}, nil); e != nil {
			return e
		}
		name, e := str(ff["name"], "text.format.name")
		if e != nil || !toolName.MatchString(name) || len(name) > 64 {
			return errorf("text.format.name", "is required: 1 to 64 letters, digits, underscores or hyphens")
		}
		if !isKind(ff["schema"], '{') {
			return errorf("text.format.schema", "is required and must be a JSON Schema object")
		}
		schema := compact(ff["schema"])
		t.chars += len(schema)
		js := map[string]any{"name": name, "schema": json.RawMessage(schema)}
		if s := ff["strict"]; !isNull(s) {
			if e := boolean(s, "text.format.strict"); e != nil {
				return e
			}
			js["strict"] = string(s) == "true"
		}
		if d := ff["description"]; !isNull(d) {
			s, e := str(d, "text.format.description")
			if e != nil {
				return e
			}
			js["description"] = s
		}
		out.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": js}
	default:
		return errorf("text.format.type", "must be one of text, json_object, json_schema")
	}
	return nil
}

// reasoningFields are the members a reasoning object may hold.
var reasoningFields = []string{"effort", "summary", "generate_summary"}

// reasoningConfig translates reasoning.effort, and notes reasoning.summary: whatever level is asked
// for (auto, concise, detailed), the reasoning text is answered as the summary too (docs/API.md).
func (t *rtranslator) reasoningConfig(raw json.RawMessage, out *chatRequest) *Error {
	t.info.echo.reasoning = json.RawMessage(`{"effort":null,"summary":null}`)
	if isNull(raw) {
		applyReasoning(out, t.opts.Reasoning, nil, "")
		return nil
	}
	at := loc{name: "reasoning", index: -1}
	var room [4]member
	f, e := readNode(raw, &at, room[:])
	if e != nil {
		return e
	}
	if e := f.only(&at, "reasoning", reasoningFields, nil); e != nil {
		return e
	}
	effort := ""
	if r := f.get("effort"); !isNull(r) {
		effort, _ = str(r, "")
		if !contains([]string{"none", "minimal", "low", "medium", "high", "xhigh"}, effort) {
			return errorf("reasoning.effort", "must be one of none, minimal, low, medium, high, xhigh")
		}
	}
	for _, k := range reasoningFields[1:] {
		if r := f.get(k); !isNull(r) {
			if s, _ := str(r, ""); !contains([]string{"auto", "concise", "detailed"}, s) {
				return errorf("reasoning."+k, "must be one of auto, concise, detailed")
			}
			t.info.summary = true
		}
	}
	// {"effort":…,"summary":…} as json.Marshal writes it from those two raw members (null when absent).
	echo := appendRaw(append(make([]byte, 0, 48), `{"effort":`...), compact(f.get("effort")))
	echo = appendRaw(append(echo, `,"summary":`...), compact(f.get("summary")))
	t.info.echo.reasoning = append(echo, '}')
	applyReasoning(out, t.opts.Reasoning, nil, effort)
	return nil
}

// tools translates function tools (and custom tools with free text input); hosted tools and tools
// svc cannot call are left out and named. It returns the names offered, with their kind.
func (t *rtranslator) tools(raw json.RawMessage, out *chatRequest) (map[string]string, *Error) {
	t.info.echo.tools = json.RawMessage("[]")
	if isNull(raw) {
		return map[string]string{}, nil
	}
	kept, key, ok := responsesTools.Get(raw)
	if !ok {
		// Read here, and kept with the names it ignored and the size it counted.
		before, chars := t.info.Ignored, t.chars
		t.info.Ignored, t.info.custom = nil, nil
		names, e := t.readTools(raw, out)
		ignored, read := t.info.Ignored, t.chars-chars
		t.info.Ignored, t.chars = before, chars
		if e != nil {
			return nil, e
		}
		kept = &toolsRead[responsesToolNames]{tools: out.Tools, chars: read, ignored: ignored,
			names: responsesToolNames{names: names, custom: t.info.custom, echo: t.info.echo.tools}}
		kept.encoded = appendTools(make([]byte, 0, toolsSize(kept.tools)), kept.tools)
		responsesTools.Put(key, raw, len(kept.encoded), kept)
	}
	kept.use(out, &t.chars, &t.info.RequestInfo)
	t.info.toolsJSON, t.info.custom, t.info.echo.tools = kept.encoded, kept.names.custom, kept.names.echo
	return kept.names.names, nil
}

// responsesToolNames is what a Responses translation keeps of its tools beside the chat model's: the
// names offered with their kind, the custom tools, and the tools as the response echoes them.
type responsesToolNames struct {
	names  map[string]string
	custom map[string]bool
	echo   json.RawMessage
}

// responsesTools keeps the Responses requests' tools read lately.
var responsesTools = newToolMemo[responsesToolNames]()

// readTools is tools' reading of the tool definitions.
func (t *rtranslator) readTools(raw json.RawMessage, out *chatRequest) (map[string]string, *Error) {
	names := map[string]string{}
	// Compacted once, for the response's echo; the tools are read from the compact bytes, so that their
	// parameters are compact already.
	raw = compact(raw)
	var list []json.RawMessage
	if !isKind(raw, '[') || !elementsInto(raw, &list) {
		return nil, errorf("tools", "must be an array of tools")
	}
	t.info.echo.tools = raw
	for i, r := range list {
		path := fmt.Sprintf("tools[%d]", i)
		f, e := object(r, path)
		if e != nil {
			return nil, e
		}
		typ, e := str(f["type"], path+".type")
		if e != nil {
			return nil, e
		}
		switch {
		case hostedTools[typ] || typ == "namespace":
			t.info.ignore("tools[]:" + typ)
			continue
		case typ == "function", typ == "custom":
		default:
			return nil, errorf(path+".type", "tools of type %q are not supported by this model: svc translates to chat completions, which call function tools only", typ)
		}
		allowed := []string{"type", "name", "description", "parameters", "strict"}
		if typ == "custom" {
			allowed = []string{"type", "name", "description", "format"}
		}
		if e := onlyKeys(f, path, "a "+typ+" tool", allowed, nil); e != nil {
			return nil, e
		}
		name, e := str(f["name"], path+".name")
		if e != nil || !toolName.MatchString(name) {
			return nil, errorf(path+".name", "is required: 1 to 128 letters, digits, underscores or hyphens")
		}
		if typ == "custom" {
			if fm := f["format"]; !isNull(fm) {
				ff, e := object(fm, path+".format")
				if e != nil {
					return nil, e
				}
				if ft, _ := str(ff["type"], ""); ft != "text" {
					// A grammar svc cannot hold a chat completions model to: the tool is left out.
					t.info.ignore("tools[]:custom:" + name)
					continue
				}
			}
		}
		if names[name] != "" {
			return nil, errorf(path+".name", "tool names must be unique; %q appears twice", name)
		}
		names[name] = typ
		fn := conv.ToolFunc{Name: name}
		if d := f["description"]; !isNull(d) {
			if fn.Description, e = str(d, path+".description"); e != nil {
				return nil, e
			}
		}
		if typ == "custom" {
			if t.info.custom == nil {
				t.info.custom = map[string]bool{}
			}
			t.info.custom[name] = true
			fn.Parameters = customInput
		} else {
			switch p := f["parameters"]; {
			case isNull(p):
				fn.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
			case isKind(p, '{'):
				fn.Parameters = p // a slice of the compacted tools
			default:
				return nil, errorf(path+".parameters", "must be a JSON Schema object")
			}
			if s := f["strict"]; !isNull(s) {
				if e := boolean(s, path+".strict"); e != nil {
					return nil, e
				}
				strict := string(s) == "true"
				fn.Strict = &strict
			}
		}
		t.chars += len(name) + len(fn.Description) + len(fn.Parameters)
		out.Tools = append(out.Tools, conv.Tool{Type: "function", Function: fn})
	}
	return names, nil
}

func (t *rtranslator) toolChoice(raw json.RawMessage, names map[string]string, out *chatRequest) *Error {
	t.info.echo.toolChoice = json.RawMessage(`"auto"`)
	if isNull(raw) {
		return nil
	}
	t.info.echo.toolChoice = compact(raw)
	if isKind(raw, '"') {
		s, _ := str(raw, "")
		if !contains([]string{"none", "auto", "required"}, s) {
			return errorf("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"name\": ...}")
		}
		if len(out.Tools) == 0 {
			if s == "required" {
				return errorf("tool_choice", "\"required\" needs tools")
			}
			return nil
		}
		out.ToolChoice = s
		return nil
	}
	f, e := object(raw, "tool_choice")
	if e != nil {
		return e
	}
	typ, _ := str(f["type"], "")
	if typ != "function" && typ != "custom" {
		return errorf("tool_choice.type", "tool_choice of type %q is not supported by this model: svc calls function tools only", typ)
	}
	if e := onlyKeys(f, "tool_choice", "tool_choice", []string{"type", "name"}, nil); e != nil {
		return e
	}
	name, e := str(f["name"], "tool_choice.name")
	if e != nil {
		return e
	}
	if names[name] != typ {
		return errorf("tool_choice.name", "names no %s tool in tools that svc can call", typ)
	}
	out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": name}}
	return nil
}

// input translates the input: a string (one user message) or a list of items, read in one walk of
// jsonx's cursor (each item's members into a node on the stack; no map, no path written unless an
// error or an ignored field names it).
func (t *rtranslator) input(raw json.RawMessage) *Error {
	if isNull(raw) {
		return errorf("input", "is required: a string or an array of input items")
	}
	if isKind(raw, '"') {
		s, e := str(raw, "input")
		if e != nil {
			return e
		}
		t.chars += len(s)
		t.out = append(t.out, conv.Message{Role: "user", Content: s})
		return nil
	}
	if !isKind(raw, '[') {
		return errorf("input", "must be a string or an array of input items")
	}
	base, chars, ignored := len(t.out), t.chars, len(t.info.Ignored)
	from, at := t.resume(raw)
	items, ends, ok := bytememo.Elements(raw, at)
	if !ok {
		return errorf("input", "must be a string or an array of input items")
	}
	if from+len(items) == 0 {
		return errorf("input", "must not be empty")
	}
	for i, item := range items {
		at := loc{name: "input", index: from + i}
		if e := t.item(item, &at); e != nil {
			return e
		}
	}
	if len(items) > 0 && (from > 0 || responsesInputs.Offered(raw)) { // kept once its head comes again (Offered)
		t.keep(raw, from+len(items), ends[len(ends)-1], base, t.chars-chars, t.info.Ignored[ignored:])
	}
	if len(t.waiting) > 0 {
		return errorf("input", "No tool output found for function call %s.", t.waiting[0])
	}
	t.flushAssistant()
	for _, m := range t.out {
		if m.Role != "system" {
			return nil
		}
	}
	return errorf("input", "must hold at least one user or assistant message")
}

// The members each kind of input item and content part may hold.
var (
	messageKeys          = []string{"type", "role", "content", "id", "status", "phase"}
	inputTextKeys        = []string{"type", "text", "prompt_cache_breakpoint"}
	outputTextKeys       = []string{"type", "text", "annotations", "logprobs"}
	refusalKeys          = []string{"type", "refusal"}
	inputImageKeys       = []string{"type", "image_url", "file_id", "detail", "prompt_cache_breakpoint"}
	functionCallKeys     = []string{"type", "call_id", "name", "arguments", "id", "status"}
	customToolCallKeys   = []string{"type", "call_id", "name", "input", "id", "status"}
	callOutputKeys       = []string{"type", "call_id", "output", "id", "status"}
	reasoningItemKeys    = []string{"type", "id", "summary", "content", "encrypted_content", "status"}
	messageRoles         = []string{"user", "assistant", "system", "developer"}
	reasoningItemMembers = []string{"content", "summary"}
)

// item translates one input item.
func (t *rtranslator) item(raw json.RawMessage, at *loc) *Error {
	var buf [8]member
	f, e := readNode(raw, at, buf[:])
	if e != nil {
		return e
	}
	typ := "message"
	if r := f.get("type"); !isNull(r) {
		if typ, e = at.word(r, "type"); e != nil {
			return e
		}
	}
	switch typ {
	case "message":
		return t.message(f, at)
	case "function_call", "custom_tool_call":
		return t.call(f, at, typ)
	case "function_call_output", "custom_tool_call_output":
		return t.callOutput(f, at, typ)
	case "reasoning":
		return t.reasoningItem(f, at)
	case "item_reference":
		e := errorf(at.key("type"), "item references are not supported: svc keeps no items apart from responses; send the items themselves, or previous_response_id")
		e.References = true
		return e
	}
	return errorf(at.key("type"), "input items of type %q are not supported by this model: svc translates to chat completions, which carry messages, function calls and their outputs", typ)
}

// message translates a message item (roles user, assistant, system, developer).
func (t *rtranslator) message(f node, at *loc) *Error {
	if e := f.only(at, "a message", messageKeys, nil); e != nil {
		return e
	}
	if p := f.get("phase"); !isNull(p) {
		at.ignore(&t.info.RequestInfo, ".phase")
	}
	role, _ := word(f.get("role"))
	if !contains(messageRoles, role) {
		return errorf(at.key("role"), "must be one of user, assistant, system, developer")
	}
	var buf [4]conv.Part
	parts, e := t.content(f.get("content"), at, "content", role, buf[:0])
	if e != nil {
		return e
	}
	if role == "assistant" {
		if len(t.waiting) > 0 {
			return errorf(at.String(), "No tool output found for function call %s.", t.waiting[0])
		}
		msg := t.assistant()
		text := ""
		for _, p := range parts {
			text += *p.Text
		}
		if s, _ := msg.Content.(string); s != "" {
			text = s + "\n" + text
		}
		msg.Content = text
		return nil
	}
	if role == "system" || role == "developer" {
		msg := textMessage("system", parts)
		if len(t.waiting) > 0 {
			t.deferred = append(t.deferred, msg)
			return nil
		}
		t.flushAssistant()
		t.out = append(t.out, msg)
		return nil
	}
	if len(t.waiting) > 0 {
		return errorf(at.String(), "No tool output found for function call %s.", t.waiting[0])
	}
	t.flushAssistant()
	t.out = append(t.out, textMessage("user", parts))
	return nil
}

// content translates the member name of the item at at, a message's content or an output: a string or
// a list of content parts, appended to parts.
func (t *rtranslator) content(raw json.RawMessage, at *loc, name, role string, parts []conv.Part) ([]conv.Part, *Error) {
	if isKind(raw, '"') {
		s, e := at.str(raw, name)
		if e != nil {
			return nil, e
		}
		t.chars += len(s)
		return append(parts, conv.Part{Type: "text", Text: &s}), nil
	}
	_, e, ok := eachElement(raw, func(el json.RawMessage, i int) *Error {
		l := loc{up: at, name: name, index: i}

		p, e := t.part(el, &l, role)
		parts = append(parts, p)
		return e
	})
	if !ok {
		return nil, errorf(at.key(name), "is required and must be a string or an array of content parts")
	}
	if e != nil {
		return nil, e
	}
	return parts, nil
}

// part translates one content part: input_text, input_image (user messages), output_text and
// refusal (assistant messages).
func (t *rtranslator) part(raw json.RawMessage, at *loc, role string) (conv.Part, *Error) {
	var buf [6]member
	f, e := readNode(raw, at, buf[:])
	if e != nil {
		return conv.Part{}, e
	}
	typ, _ := word(f.get("type"))
	switch {
	case typ == "input_text" || (typ == "output_text" && role == "assistant"):
		allowed, what := inputTextKeys, "an input_text part"
		if typ == "output_text" {
			allowed, what = outputTextKeys, "an output_text part"
		}
		if e := f.only(at, what, allowed, nil); e != nil {
			return conv.Part{}, e
		}
		if b := f.get("prompt_cache_breakpoint"); !isNull(b) {
			at.ignore(&t.info.RequestInfo, ".prompt_cache_breakpoint")
		}
		s, e := at.str(f.get("text"), "text")
		if e != nil {
			return conv.Part{}, e
		}
		t.chars += len(s)
		return conv.Part{Type: "text", Text: &s}, nil
	case typ == "refusal" && role == "assistant":
		if e := f.only(at, "a refusal part", refusalKeys, nil); e != nil {
			return conv.Part{}, e
		}
		s, e := at.str(f.get("refusal"), "refusal")
		if e != nil {
			return conv.Part{}, e
		}
		t.chars += len(s)
		return conv.Part{Type: "text", Text: &s}, nil
	case typ == "input_image" && (role == "user" || role == "tool"):
		return t.imagePart(f, at)
	case typ == "input_file":
		return conv.Part{}, errorf(at.key("type"), "input_file parts are not supported by this model: svc translates to chat completions, which take no files; send the file's text in an input_text part")
	}
	return conv.Part{}, errorf(at.key("type"), "content parts of type %q cannot be translated for a %s message; user messages may hold input_text and input_image, assistant messages output_text and refusal, system and developer messages input_text", typ, role)
}

func (t *rtranslator) imagePart(f node, at *loc) (conv.Part, *Error) {
	if e := f.only(at, "an input_image part", inputImageKeys, nil); e != nil {
		return conv.Part{}, e
	}
	if b := f.get("prompt_cache_breakpoint"); !isNull(b) {
		at.ignore(&t.info.RequestInfo, ".prompt_cache_breakpoint")
	}
	if id := f.get("file_id"); !isNull(id) {
		return conv.Part{}, errorf(at.key("file_id"), "file ids are not supported: svc keeps no files; send the image as image_url (an https or data: URL)")
	}
	u, ok := unquote(f.get("image_url"))
	if !ok {
		return conv.Part{}, errorf(at.key("image_url"), "is required: an https or data: URL")
	}
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "data:image/") {
		return conv.Part{}, errorf(at.key("image_url"), "must be an http(s) URL or a data:image/ URL")
	}
	img := &conv.ImageURL{URL: u}
	if d := f.get("detail"); !isNull(d) {
		s, _ := unquote(d)
		switch s {
		case "low", "high", "auto":
			img.Detail = s
		case "original":
		default:
			return conv.Part{}, errorf(at.key("detail"), "must be one of low, high, auto, original")
		}
	}
	return conv.Part{Type: "image_url", ImageURL: img}, nil
}

// assistant returns the assistant message being built, starting one if needed.
func (t *rtranslator) assistant() *conv.Message {
	if t.asst < 0 {
		t.out = append(t.out, conv.Message{Role: "assistant"})
		t.asst = len(t.out) - 1
		if len(t.reasoning) > 0 {
			t.out[t.asst].ReasoningContent = strings.Join(t.reasoning, "\n")
			t.reasoning = nil
		}
	}
	return &t.out[t.asst]
}

// flushAssistant ends the assistant message being built; reasoning items that no assistant output
// followed are left out (they answer nothing).
func (t *rtranslator) flushAssistant() {
	if t.asst >= 0 {
		m := &t.out[t.asst]
		if m.Content == nil && len(m.ToolCalls) == 0 {
			m.Content = ""
		}
	}
	t.asst = -1
	t.reasoning = nil
}

// call translates a function_call (or custom_tool_call) item into a tool call of the assistant.
func (t *rtranslator) call(f node, at *loc, typ string) *Error {
	args, allowed, what := "arguments", functionCallKeys, "a function_call item"
	if typ == "custom_tool_call" {
		args, allowed, what = "input", customToolCallKeys, "a custom_tool_call item"
	}
	if e := f.only(at, what, allowed, nil); e != nil {
		return e
	}
	id, ok := unquote(f.get("call_id"))
	if !ok || id == "" {
		return errorf(at.key("call_id"), "is required and must be a non-empty string")
	}
	if t.calls[id] || t.seen[id] {
		return errorf(at.key("call_id"), "Duplicate function call with call_id %s.", id)
	}
	name, ok := unquote(f.get("name"))
	if !ok || name == "" {
		return errorf(at.key("name"), "is required and must be a non-empty string")
	}
	a, e := at.str(f.get(args), args)
	if e != nil {
		return e
	}
	if typ == "custom_tool_call" {
		b, _ := json.Marshal(map[string]string{"input": a})
		a = string(b)
	}
	t.calls[id] = true
	t.waiting = append(t.waiting, id)
	t.chars += len(name) + len(a)
	msg := t.assistant()
	msg.ToolCalls = append(msg.ToolCalls, conv.ToolCall{ID: id, Type: "function", Function: conv.Function{Name: name, Arguments: a}})
	return nil
}

// callOutput translates a function_call_output (or custom_tool_call_output) item into a tool message.
// Images it holds follow, with the images of the outputs next to it, in a user message after the
// last output.
func (t *rtranslator) callOutput(f node, at *loc, typ string) *Error {
	what := "a function_call_output item"
	if typ == "custom_tool_call_output" {
		what = "a custom_tool_call_output item"
	}
	if e := f.only(at, what, callOutputKeys, nil); e != nil {
		return e
	}
	id, ok := unquote(f.get("call_id"))
	if !ok || !(t.calls[id] || t.seen[id]) {
		return errorf(at.key("call_id"), "No tool call found for function call output with call_id %s.", id)
	}
	i := indexOf(t.waiting, id)
	if i < 0 {
		return errorf(at.key("call_id"), "the function call %s was already answered", id)
	}
	t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
	var text string
	switch o := f.get("output"); {
	case isKind(o, '"'):
		text, _ = unquote(o)
		t.chars += len(text)
	case isKind(o, '['):
		var buf [4]conv.Part
		parts, e := t.content(o, at, "output", "tool", buf[:0])
		if e != nil {
			return e
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, *p.Text)
			} else {
				t.images = append(t.images, p)
			}
		}
		text = strings.Join(texts, "\n")
	default:
		return errorf(at.key("output"), "is required: a string or an array of input_text and input_image parts")
	}
	t.flushAssistant()
	t.out = append(t.out, conv.Message{Role: "tool", ToolCallID: id, Content: text})
	if len(t.waiting) == 0 {
		if len(t.images) > 0 {
			label := "The tool calls returned these images:"
			t.chars += len(label)
			t.out = append(t.out, conv.Message{Role: "user", Content: append([]conv.Part{{Type: "text", Text: &label}}, t.images...)})
			t.images = nil
		}
		t.out = append(t.out, t.deferred...)
		t.deferred = nil
	}
	return nil
}

// reasoningItem keeps a reasoning item's text for the assistant message that follows, when its
// encrypted_content is svc's signature of it; reasoning svc cannot vouch for (another provider's,
// or altered) is left out and named.
func (t *rtranslator) reasoningItem(f node, at *loc) *Error {
	if e := f.only(at, "a reasoning item", reasoningItemKeys, nil); e != nil {
		return e
	}
	var texts []string
	for _, k := range reasoningItemMembers {
		raw := f.get(k)
		if isNull(raw) {
			continue
		}
		list, ok := reasoningTexts(raw)
		if !ok {
			return errorf(at.key(k), "must be an array of text parts")
		}
		if len(texts) == 0 {
			texts = list
		}
	}
	text := strings.Join(texts, "\n")
	sig, _ := unquote(f.get("encrypted_content"))
	if text == "" {
		return nil
	}
	if !verifyThinking(t.opts.Secret, text, sig) {
		at.ignore(&t.info.RequestInfo, ":reasoning")
		return nil
	}
	t.chars += len(text)
	if t.asst >= 0 {
		// Reasoning between two outputs of one turn (between tool calls): the chat assistant message
		// holds one reasoning, so the texts are joined.
		m := &t.out[t.asst]
		if m.ReasoningContent != "" {
			text = m.ReasoningContent + "\n" + text
		}
		m.ReasoningContent = text
		return nil
	}
	t.reasoning = append(t.reasoning, text)
	return nil
}

// reasoningTexts reads a reasoning item's summary or content, an array of text parts, as
// json.Unmarshal into []struct{Type, Text string} reads it (false where it fails): the parts as agents
// write them ({"type": ..., "text": ...}) with the cursor, anything else by encoding/json.
func reasoningTexts(raw json.RawMessage) ([]string, bool) {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '[' {
		return nil, false
	}
	var texts []string
	plain := true
	c.Array(func() {
		if !plain || c.Kind() != '{' {
			plain = false
			return
		}
		text := ""
		c.Object(func(name []byte) {
			switch string(name) {
			case "type", "text":
				s, ok := unquote(c.Raw())
				if !ok {
					plain = false
				} else if string(name) == "text" {
					text = s
				}
			default:
				plain = false
			}
		})
		texts = append(texts, text)
	})
	if plain && !c.Bad() {
		return texts, true
	}
	var list []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return nil, false
	}
	texts = texts[:0]
	for _, p := range list {
		texts = append(texts, p.Text)
	}
	return texts, true
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
