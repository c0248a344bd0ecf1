package mockupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/stopseq"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// plan is what the mock answers to one chat request: text or tool calls, and how it ends.
//
//   - Tools: with tools and a tool_choice other than "none", the mock calls the named function
//     (tool_choice {"type":"function",...}); for "required", every tool whose name the last user
//     message mentions, or the first tool if it mentions none; for "auto" (or no tool_choice), every
//     mentioned tool, unless the last message is a tool result. parallel_tool_calls false keeps only
//     the first. Arguments are built from the tool's parameters schema (see arguments).
//   - A last message with role "tool" is answered "tool result: <its content>".
//   - Otherwise the answer is Config.Tokens words, preceded by "[N image(s)]" when the last user
//     message holds N image_url parts.
//   - max_tokens cuts the text (finish_reason "length"); a stop string cuts it where it first occurs
//     (finish_reason "stop", and the string in the choice's stop_reason, as vLLM reports it).
type plan struct {
	reasoning  []string   // the reasoning's tokens, before the answer (Config.Reasoning)
	text       []string   // the answer's tokens, when it answers text
	calls      []toolCall // the tool calls, when it calls tools
	tokens     int        // completion tokens
	finish     string
	stopReason any // the stop string that ended the answer, or nil
}

type toolCall struct{ id, name, arguments string }

// tool is a function offered in the request, its parameters schema kept as sent.
type tool struct {
	name   string
	params json.RawMessage
}

func (s *Server) plan(req *Request, cfg Config) (*plan, error) {
	msgs, _ := req.Body["messages"].([]any)
	userText, images := lastUser(msgs)
	lastTool, toolText := false, ""
	if n := len(msgs); n > 0 {
		if m, ok := msgs[n-1].(map[string]any); ok && m["role"] == "tool" {
			lastTool, toolText = true, contentText(m["content"])
		}
	}
	var body struct {
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if req.Body["tools"] != nil {
		json.Unmarshal(req.raw, &body)
	}
	var tools []tool
	for _, t := range body.Tools {
		tools = append(tools, tool{t.Function.Name, t.Function.Parameters})
	}
	chosen, err := chooseTools(req.Body, tools, userText, lastTool)
	if err != nil {
		return nil, err
	}
	var reasoning []string
	if cfg.Reasoning != "" {
		on := true
		if kw, ok := req.Body["chat_template_kwargs"].(map[string]any); ok {
			if v, ok := kw["enable_thinking"].(bool); ok {
				on = v
			}
		}
		if on {
			reasoning = tokenize(reasoningText(userText, lastTool))
		}
	}
	if len(chosen) > 0 {
		p := &plan{finish: "tool_calls", reasoning: reasoning, tokens: len(reasoning)}
		for _, t := range chosen {
			c := toolCall{id: "call_" + strconv.FormatInt(s.callCount.Add(1), 10), name: t.name, arguments: arguments(t.params, userText)}
			p.calls = append(p.calls, c)
			p.tokens += 1 + len(fragments(c.arguments))
		}
		return p, nil
	}

	full := strings.Join(answer(cfg.Tokens), "")
	switch {
	case lastTool:
		full = "tool result: " + toolText
	case images > 0:
		full = fmt.Sprintf("[%d image(s)] ", images) + full
	}
	toks := tokenize(full)
	p := &plan{finish: "stop", reasoning: reasoning}
	// Reasoning counts against max_tokens, as vLLM counts it.
	if limit := maxTokens(req.Body, len(reasoning)+len(toks)); limit < len(reasoning)+len(toks) {
		if limit <= len(reasoning) {
			p.reasoning, toks = reasoning[:limit], nil
		} else {
			toks = toks[:limit-len(reasoning)]
		}
		p.finish = "length"
	}
	if cutToks, stop := stopseq.Cut(toks, stopStrings(req.Body["stop"])); stop != "" {
		toks = cutToks
		p.finish, p.stopReason = "stop", stop
	}
	p.text, p.tokens = toks, len(p.reasoning)+len(toks)
	return p, nil
}

// reasoningText is what the mock thinks before answering.
func reasoningText(userText string, lastTool bool) string {
	if lastTool {
		return "The tool answered; I will report it."
	}
	if w := strings.Fields(userText); len(w) > 8 {
		userText = strings.Join(w[:8], " ")
	}
	return fmt.Sprintf("The user asks about %q. I will answer.", userText)
}

// deltas returns the streamed deltas after the first (role) chunk: one per reasoning token (under
// the reasoning field's name), one per text token; for tool calls, as vLLM streams them, a first
// delta naming each call and then its arguments in fragments.
func (p *plan) deltas(reasoningField string) []map[string]any {
	var out []map[string]any
	for _, t := range p.reasoning {
		out = append(out, map[string]any{reasoningField: t})
	}
	for _, t := range p.text {
		out = append(out, map[string]any{"content": t})
	}
	for i, c := range p.calls {
		out = append(out, map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""}}}})
		for _, f := range fragments(c.arguments) {
			out = append(out, map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": f}}}})
		}
	}
	return out
}

// lastUser returns the text of the last user message and how many image_url parts it holds.
func lastUser(msgs []any) (string, int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m, ok := msgs[i].(map[string]any)
		if !ok || m["role"] != "user" {
			continue
		}
		images := 0
		if parts, ok := m["content"].([]any); ok {
			for _, p := range parts {
				if pm, ok := p.(map[string]any); ok && pm["type"] == "image_url" {
					images++
				}
			}
		}
		return contentText(m["content"]), images
	}
	return "", 0
}

// contentText returns a message content's text: the string, or its text parts joined by newlines.
func contentText(c any) string {
	switch c := c.(type) {
	case string:
		return c
	case []any:
		var texts []string
		for _, p := range c {
			if pm, ok := p.(map[string]any); ok && pm["type"] == "text" {
				t, _ := pm["text"].(string)
				texts = append(texts, t)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

func chooseTools(body map[string]any, tools []tool, userText string, lastTool bool) ([]tool, error) {
	mode := "auto"
	named := ""
	switch c := body["tool_choice"].(type) {
	case string:
		mode = c
	case map[string]any:
		fn, _ := c["function"].(map[string]any)
		named, _ = fn["name"].(string)
		mode = "named"
	}
	if len(tools) == 0 || mode == "none" {
		return nil, nil
	}
	var mentioned []tool
	for _, t := range tools {
		if t.name != "" && strings.Contains(userText, t.name) {
			mentioned = append(mentioned, t)
		}
	}
	var chosen []tool
	switch mode {
	case "named":
		for _, t := range tools {
			if t.name == named {
				chosen = []tool{t}
			}
		}
		if chosen == nil {
			return nil, fmt.Errorf("tool_choice names the function %q, which is not in tools", named)
		}
	case "required":
		chosen = mentioned
		if len(chosen) == 0 {
			chosen = tools[:1]
		}
	case "auto":
		if !lastTool {
			chosen = mentioned
		}
	default:
		return nil, fmt.Errorf("tool_choice must be none, auto, required or a named function, not %q", mode)
	}
	if parallel, ok := body["parallel_tool_calls"].(bool); ok && !parallel && len(chosen) > 1 {
		chosen = chosen[:1]
	}
	return chosen, nil
}

// arguments builds a tool call's arguments from its parameters schema: each required property (or
// the first property when none is required) gets a value by its type: string → the last user
// message's text, integer and number → 42, boolean → true, array → [], object → {}.
func arguments(params json.RawMessage, userText string) string {
	var schema struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	json.Unmarshal(params, &schema)
	names, props := jsonx.Members(schema.Properties)
	keys := schema.Required
	if len(keys) == 0 && len(names) > 0 {
		keys = names[:1]
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(sampleValue(props[k], userText))
	}
	b.WriteByte('}')
	return b.String()
}

func sampleValue(prop json.RawMessage, userText string) []byte {
	var p struct {
		Type any `json:"type"`
	}
	json.Unmarshal(prop, &p)
	typ, _ := p.Type.(string)
	if list, ok := p.Type.([]any); ok { // ["string", "null"]
		for _, t := range list {
			if s, _ := t.(string); s != "null" {
				typ = s
				break
			}
		}
	}
	switch typ {
	case "integer", "number":
		return []byte("42")
	case "boolean":
		return []byte("true")
	case "array":
		return []byte("[]")
	case "object":
		return []byte("{}")
	}
	b, _ := json.Marshal(userText)
	return b
}

// fragments splits arguments into three pieces (fewer only when shorter than three characters), on
// character boundaries, as a streaming tool parser would send them.
func fragments(s string) []string {
	n := utf8.RuneCountInString(s)
	size := (n + 2) / 3
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < size {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

var tokenRE = regexp.MustCompile(`\s*\S+`)

// tokenize splits text into word tokens, each keeping the spaces before it.
func tokenize(s string) []string { return tokenRE.FindAllString(s, -1) }

// stopStrings reads a request's stop: a string or an array of strings.
func stopStrings(stop any) []string {
	switch v := stop.(type) {
	case string:
		return []string{v}
	case []any:
		var list []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				list = append(list, s)
			}
		}
		return list
	}
	return nil
}
