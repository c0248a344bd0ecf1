package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/translate"
)

// parseChat validates a chat completions body and turns it into a runtime call (model not yet set).
// A valid body is read in one pass over its fields (internal/jsonx) rather than decoded: this runs for
// every request. Invalid JSON goes through encoding/json for its error message.
func parseChat(body []byte) (*inference.Call, string, *apiError) {
	fields, e := bodyFields(body)
	if e != nil {
		return nil, "", e
	}
	call := &inference.Call{Body: fields}
	var model string
	if raw, ok := fields["model"]; ok && string(raw) != "null" {
		if raw[0] != '"' {
			return nil, "", badRequest("model", "model must be a string")
		}
		model = jsonx.String(raw)
	}
	raw, ok := fields["messages"]
	if !ok || string(raw) == "null" {
		return nil, "", badRequest("messages", "messages is required: an array of {role, content} objects")
	}
	msgs, e := chatMessages(raw)
	if e != nil {
		return nil, "", e
	}
	call.Messages = msgs
	if raw, ok := fields["stream"]; ok && string(raw) != "null" {
		if string(raw) != "true" && string(raw) != "false" {
			return nil, "", badRequest("stream", "stream must be true or false")
		}
		call.Stream = string(raw) == "true"
	}
	if raw, ok := fields["stream_options"]; ok && string(raw) != "null" {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return nil, "", badRequest("stream_options", "stream_options must be an object")
		}
		call.IncludeUsage = so.IncludeUsage
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if raw, ok := fields[k]; ok && string(raw) != "null" {
			n, isInt := jsonx.Integer(raw)
			if !isInt || n < 1 || n != int64(int(n)) {
				return nil, "", badRequest(k, k+" must be a positive integer")
			}
			if call.MaxTokens == 0 || int(n) < call.MaxTokens {
				call.MaxTokens = int(n)
			}
		}
	}
	return call, model, nil
}

// bodyFields returns the members of a request body that must be a JSON object.
func bodyFields(body []byte) (map[string]json.RawMessage, *apiError) {
	if json.Valid(body) {
		if fields := jsonx.Object(body); fields != nil {
			return fields, nil
		}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, badRequest("", "request body is not a valid JSON object: "+jsonProblem(err))
	}
	return nil, badRequest("", "request body must be a JSON object") // null
}

var errMessagesShape = badRequest("messages", "messages must be an array of {role, content} objects")

// chatMessages reads "messages" (valid JSON): each entry's role and the text of its content.
func chatMessages(raw []byte) ([]inference.Message, *apiError) {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '[' {
		return nil, errMessagesShape
	}
	var (
		msgs []inference.Message
		e    *apiError
	)
	c.Array(func() {
		if e != nil {
			return
		}
		i := len(msgs)
		var role, content, toolCalls []byte
		switch c.Kind() {
		case '{':
			c.Object(func(name []byte) {
				switch string(name) {
				case "role":
					role = c.Raw()
				case "content":
					content = c.Raw()
				case "tool_calls":
					toolCalls = c.Raw()
				}
			})
		case 'n': // null: an entry without a role
		default:
			e = errMessagesShape
			return
		}
		if len(role) > 0 && role[0] != '"' && string(role) != "null" {
			e = errMessagesShape
			return
		}
		r := jsonx.String(role)
		if r == "" {
			e = badRequest(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("messages[%d].role is required", i))
			return
		}
		text, ok := contentText(content)
		// An assistant turn that only calls tools may have null content.
		if !ok && !(r == "assistant" && len(toolCalls) > 0 && string(toolCalls) != "null") {
			e = badRequest(fmt.Sprintf("messages[%d].content", i),
				fmt.Sprintf("messages[%d].content is required: a string or an array of content parts", i))
			return
		}
		msgs = append(msgs, inference.Message{Role: r, Content: text})
	})
	if e != nil {
		return nil, e
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	return msgs, nil
}

// contentText returns the text of a message's content (valid JSON): a string, or the text parts of an
// array.
func contentText(raw []byte) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	if raw[0] == '"' {
		return jsonx.String(raw), true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}

// jsonProblem describes a JSON syntax error for people.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "expected a JSON object"
	}
	return err.Error()
}

func (h *Handler) chat(x *exchange) {
	body, e := readBody(x.w, x.r)
	x.reqBody = body
	if e != nil {
		x.fail(e)
		return
	}
	call, model, e := parseChat(body)
	x.model = model
	if e != nil {
		x.fail(e)
		return
	}
	t, e := h.resolve(x.d, model, false)
	if e != nil {
		x.fail(e)
		return
	}
	x.model, x.base = t.served, t.model
	t.call(call, x)
	if call.Stream {
		h.chatStream(x, t, call)
		return
	}
	comp, err := t.rt.Complete(x.r.Context(), call)
	x.relayUpstreamID(call.UpstreamRequestID)
	if err != nil {
		x.fail(fromRuntime(err))
		return
	}
	writeJSON(x.w, http.StatusOK, comp.JSON)
	usage := comp.Usage
	if usage == (inference.Usage{}) {
		// The upstream reported no usage: counted by svc, as a stream's and a Messages answer's are, so
		// that the call is not recorded (nor charged to a tokens limit) as free.
		usage = estimateUsage(call.Messages, translate.EstimateTokens(len(comp.Content)))
	}
	x.ok(usage, comp.JSON)
}

// clientClosed is what a run records when its client went away before the answer was complete.
var clientClosed = &apiError{status: 499, typ: "invalid_request_error", code: "client_closed_request", message: "the client closed the connection"}

// chatStream relays a chat completion stream chunk by chunk.
func (h *Handler) chatStream(x *exchange, t *target, call *inference.Call) {
	st, err := t.rt.Stream(x.r.Context(), call)
	x.relayUpstreamID(call.UpstreamRequestID)
	if err != nil {
		x.fail(fromRuntime(err))
		return
	}
	defer st.Close()
	out := x.streaming()
	pender, _ := st.(inference.Pender)
	asm := assembler{text: x.recording(), prompt: call.Messages}
	for {
		ch, err := st.Next()
		if err == io.EOF {
			out.Done()
			x.ok(asm.total(), asm.completion(t.served))
			return
		}
		if err != nil {
			x.cut(fromRuntime(err), asm.total(), func(errJSON []byte) []byte { return asm.partial(t.served, errJSON) })
			return
		}
		// Each event leaves at once, unless the next one has already arrived: then both leave in one
		// flush. A client that went away surfaces at the next Next. The usage chunk svc asked the
		// upstream for is for the run's counts, not for a client that did not ask for it.
		if !ch.UsageOnly() || call.IncludeUsage {
			out.Data(ch.JSON, pender != nil && pender.Pending())
		}
		asm.add(ch) // after the write: the answer goes first
	}
}

// assembler follows a streamed answer: it counts what was delivered, for the run's usage when the
// upstream sends none (a stream cut short, or an upstream that ignores include_usage), and, when the run
// is kept, rebuilds the chat.completion object with its text and tool calls.
type assembler struct {
	text    bool // rebuild the answer, not only count it
	prompt  []inference.Message
	id      string
	created int64
	choices []assembledChoice
	usage   *inference.Usage
	deltas  int // chunks that delivered content or tool-call arguments
}

type assembledChoice struct {
	role      string
	content   strings.Builder
	finish    string
	toolCalls []assembledToolCall
}

type assembledToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	args strings.Builder
}

func (a *assembler) add(ch *inference.Chunk) {
	if a.id == "" {
		a.id, a.created = ch.ID, ch.Created
	}
	if ch.Usage != nil {
		u := *ch.Usage
		a.usage = &u
	}
	for _, c := range ch.Choices {
		if c.Content != "" || len(c.ToolCalls) > 0 {
			a.deltas++
		}
		if !a.text {
			continue
		}
		for len(a.choices) <= c.Index && c.Index < 128 {
			a.choices = append(a.choices, assembledChoice{})
		}
		if c.Index < 0 || c.Index >= len(a.choices) {
			continue
		}
		ac := &a.choices[c.Index]
		if c.Role != "" {
			ac.role = c.Role
		}
		ac.content.WriteString(c.Content)
		if c.FinishReason != "" {
			ac.finish = c.FinishReason
		}
		for _, tc := range c.ToolCalls {
			for len(ac.toolCalls) <= tc.Index && tc.Index < 128 {
				ac.toolCalls = append(ac.toolCalls, assembledToolCall{Type: "function"})
			}
			if tc.Index < 0 || tc.Index >= len(ac.toolCalls) {
				continue
			}
			call := &ac.toolCalls[tc.Index]
			if tc.ID != "" {
				call.ID = tc.ID
			}
			if tc.Name != "" {
				call.Function.Name = tc.Name
			}
			call.args.WriteString(tc.Arguments)
		}
	}
}

// total is the usage to record: the upstream's when it sent it, else counted by svc: one completion
// token per delivered chunk (inference servers send a token per chunk) and the prompt estimated at
// four characters a token. Counted figures are approximate; they are there so that a cut stream is
// not recorded as free.
func (a *assembler) total() inference.Usage {
	if a.usage != nil {
		return *a.usage
	}
	return estimateUsage(a.prompt, a.deltas)
}

// estimateUsage counts a request whose upstream reported no usage.
func estimateUsage(prompt []inference.Message, delivered int) inference.Usage {
	chars := 0
	for _, m := range prompt {
		chars += len(m.Content)
	}
	u := inference.Usage{PromptTokens: translate.EstimateTokens(chars), CompletionTokens: delivered}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

type assembledMessage struct {
	Role      string              `json:"role"`
	Content   *string             `json:"content"`
	ToolCalls []assembledToolCall `json:"tool_calls,omitempty"`
}

type assembledCompletionChoice struct {
	Index        int              `json:"index"`
	Message      assembledMessage `json:"message"`
	FinishReason *string          `json:"finish_reason"`
}

type assembledCompletion struct {
	ID      string                      `json:"id"`
	Object  string                      `json:"object"`
	Created int64                       `json:"created"`
	Model   string                      `json:"model"`
	Choices []assembledCompletionChoice `json:"choices"`
	Usage   inference.Usage             `json:"usage"`
	Error   json.RawMessage             `json:"error,omitempty"`
}

func (a *assembler) build(model string) assembledCompletion {
	out := assembledCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: model, Usage: a.total()}
	out.Choices = make([]assembledCompletionChoice, len(a.choices))
	for i := range a.choices {
		c := &a.choices[i]
		role := c.role
		if role == "" {
			role = "assistant"
		}
		msg := assembledMessage{Role: role}
		if text := c.content.String(); text != "" || len(c.toolCalls) == 0 {
			msg.Content = &text
		}
		for j := range c.toolCalls {
			c.toolCalls[j].Function.Arguments = c.toolCalls[j].args.String()
		}
		msg.ToolCalls = c.toolCalls
		out.Choices[i] = assembledCompletionChoice{Index: i, Message: msg, FinishReason: nullable(c.finish)}
	}
	return out
}

// completion returns the assembled chat.completion object (nil when the run is not kept).
func (a *assembler) completion(model string) []byte {
	if !a.text {
		return nil
	}
	b, _ := json.Marshal(a.build(model))
	return b
}

// partial returns what was streamed before an error, with the error beside it.
func (a *assembler) partial(model string, errJSON []byte) []byte {
	if !a.text {
		return errJSON
	}
	out := a.build(model)
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(errJSON, &env) == nil && env.Error != nil {
		out.Error = env.Error
	} else {
		out.Error = errJSON
	}
	b, _ := json.Marshal(out)
	return b
}
