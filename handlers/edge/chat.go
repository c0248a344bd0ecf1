package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/svcdev/svc/runtime"
)

// chatMessage is one entry of "messages" as far as the edge checks it.
type chatMessage struct {
	Role      *string         `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// parseChat validates a chat completions body and turns it into a runtime call (model not yet set).
func parseChat(body []byte) (*runtime.Call, string, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, "", badRequest("", "request body is not a valid JSON object: "+jsonProblem(err))
	}
	if fields == nil {
		return nil, "", badRequest("", "request body must be a JSON object")
	}
	call := &runtime.Call{Body: fields}
	var model string
	if raw, ok := fields["model"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &model); err != nil {
			return nil, "", badRequest("model", "model must be a string")
		}
	}
	raw, ok := fields["messages"]
	if !ok || string(raw) == "null" {
		return nil, "", badRequest("messages", "messages is required: an array of {role, content} objects")
	}
	var msgs []chatMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, "", badRequest("messages", "messages must be an array of {role, content} objects")
	}
	if len(msgs) == 0 {
		return nil, "", badRequest("messages", "messages must not be empty")
	}
	call.Messages = make([]runtime.Message, len(msgs))
	for i, m := range msgs {
		if m.Role == nil || *m.Role == "" {
			return nil, "", badRequest(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("messages[%d].role is required", i))
		}
		text, ok := contentText(m.Content)
		// An assistant turn that only calls tools may have null content.
		if !ok && !(*m.Role == "assistant" && len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null") {
			return nil, "", badRequest(fmt.Sprintf("messages[%d].content", i),
				fmt.Sprintf("messages[%d].content is required: a string or an array of content parts", i))
		}
		call.Messages[i] = runtime.Message{Role: *m.Role, Content: text}
	}
	if raw, ok := fields["stream"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &call.Stream); err != nil {
			return nil, "", badRequest("stream", "stream must be true or false")
		}
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
			var n int
			if err := json.Unmarshal(raw, &n); err != nil || n < 1 {
				return nil, "", badRequest(k, k+" must be a positive integer")
			}
			if call.MaxTokens == 0 || n < call.MaxTokens {
				call.MaxTokens = n
			}
		}
	}
	return call, model, nil
}

// contentText returns the text of a message's content: a string, or the text parts of an array.
func contentText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
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

func (h *Handler) chat(w http.ResponseWriter, r *http.Request, req *request) {
	body, e := readBody(w, r)
	if e != nil {
		h.writeError(w, formatOpenAI, e)
		return
	}
	call, model, e := parseChat(body)
	if e != nil {
		h.writeError(w, formatOpenAI, e)
		return
	}
	t, e := h.resolve(req.d, model, false)
	if e != nil {
		h.record(req, model, true, runtime.Usage{}, body, h.writeError(w, formatOpenAI, e))
		return
	}
	t.address(call)
	if call.Stream {
		h.chatStream(w, r, req, t, call, body)
		return
	}
	comp, ok := h.complete(w, r, req, t, call, body, formatOpenAI)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, comp.JSON)
	h.record(req, t.served, false, comp.Usage, body, comp.JSON)
}

// complete runs a non-streamed call. On failure it answers the client in format f (unless the client
// is gone), records the failed run, and reports false.
func (h *Handler) complete(w http.ResponseWriter, r *http.Request, req *request, t *target, call *runtime.Call, body []byte, f format) (*runtime.Completion, bool) {
	comp, err := t.rt.Complete(r.Context(), call)
	if err != nil {
		h.failed(w, r, req, t, body, f, err)
		return nil, false
	}
	return comp, true
}

// failed handles a runtime call that failed before anything was sent: it answers the client in format f
// (unless the client is gone) and records the failed run.
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, req *request, t *target, body []byte, f format, err error) {
	if clientGone(r, err) {
		h.record(req, t.served, true, runtime.Usage{}, body, errorJSON(f, clientClosed))
		return
	}
	h.record(req, t.served, true, runtime.Usage{}, body, h.writeError(w, f, fromRuntime(err)))
}

// address points a call at the target's model and adapter.
func (t *target) address(call *runtime.Call) {
	call.Model, call.Served, call.Adapter, call.AdapterName = t.model, t.served, t.adapter, t.adapterName
}

// clientClosed is what a run records when its client went away before the answer was complete.
var clientClosed = &apiError{status: 499, typ: "invalid_request_error", code: "client_closed_request", message: "the client closed the connection"}

var (
	sseData = []byte("data: ")
	sseEnd  = []byte("\n\n")
	sseDone = []byte("data: [DONE]\n\n")
)

func (h *Handler) chatStream(w http.ResponseWriter, r *http.Request, req *request, t *target, call *runtime.Call, body []byte) {
	recording := h.rec != nil && req.d.Retention.Records()
	st, err := t.rt.Stream(r.Context(), call)
	if err != nil {
		h.failed(w, r, req, t, body, formatOpenAI, err)
		return
	}
	defer st.Close()
	rc := http.NewResponseController(w)
	var asm assembler
	started := false
	for {
		ch, err := st.Next()
		if err == io.EOF {
			if !started {
				startSSE(w)
			}
			w.Write(sseDone)
			rc.Flush()
			h.record(req, t.served, false, asm.usage, body, asm.completion(t.served, recording))
			return
		}
		if err != nil {
			var errBody []byte
			switch {
			case clientGone(r, err):
				errBody = errorJSON(formatOpenAI, clientClosed)
			case !started:
				// Nothing sent yet: a plain error answer keeps the status for the client.
				errBody = h.writeError(w, formatOpenAI, fromRuntime(err))
			default:
				errBody = h.writeStreamError(w, formatOpenAI, fromRuntime(err))
			}
			if recording {
				errBody = asm.partial(t.served, errBody)
			}
			h.record(req, t.served, true, asm.usage, body, errBody)
			return
		}
		if recording || ch.Usage != nil {
			asm.add(ch)
		}
		if ch.UsageOnly() && !call.IncludeUsage {
			continue // asked of the upstream for the run's counts, not by the client
		}
		if !started {
			startSSE(w)
			started = true
		}
		w.Write(sseData)
		w.Write(ch.JSON)
		w.Write(sseEnd)
		// Each event leaves at once, unless the next one has already arrived: then both leave in one
		// flush. A client that went away surfaces at the next Next.
		if p, ok := st.(runtime.Pender); !ok || !p.Pending() {
			rc.Flush()
		}

	}
}

// assembler rebuilds a chat.completion from streamed chunks, for the run history.
type assembler struct {
	id      string
	created int64
	choices []assembledChoice
	usage   runtime.Usage
}

type assembledChoice struct {
	role    string
	content strings.Builder
	finish  string
}

func (a *assembler) add(ch *runtime.Chunk) {
	if a.id == "" {
		a.id, a.created = ch.ID, ch.Created
	}
	if ch.Usage != nil {
		a.usage = *ch.Usage
	}
	for _, c := range ch.Choices {
		for len(a.choices) <= c.Index && c.Index < 128 {
			a.choices = append(a.choices, assembledChoice{})
		}
		if c.Index >= len(a.choices) {
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
	}
}

type assembledMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type assembledCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int              `json:"index"`
		Message      assembledMessage `json:"message"`
		FinishReason *string          `json:"finish_reason"`
	} `json:"choices"`
	Usage runtime.Usage    `json:"usage"`
	Error *json.RawMessage `json:"error,omitempty"`
}

func (a *assembler) build(model string) assembledCompletion {
	out := assembledCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: model, Usage: a.usage}
	out.Choices = make([]struct {
		Index        int              `json:"index"`
		Message      assembledMessage `json:"message"`
		FinishReason *string          `json:"finish_reason"`
	}, len(a.choices))
	for i := range a.choices {
		c := &a.choices[i]
		role := c.role
		if role == "" {
			role = "assistant"
		}
		out.Choices[i].Index = i
		out.Choices[i].Message = assembledMessage{Role: role, Content: c.content.String()}
		out.Choices[i].FinishReason = nullable(c.finish)
	}
	return out
}

// completion returns the assembled chat.completion object (nil when not recording).
func (a *assembler) completion(model string, recording bool) []byte {
	if !recording {
		return nil
	}
	b, _ := json.Marshal(a.build(model))
	return b
}

// partial returns what was streamed before an error, with the error beside it.
func (a *assembler) partial(model string, errBody []byte) []byte {
	out := a.build(model)
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(errBody, &env) == nil && env.Error != nil {
		out.Error = &env.Error
	} else {
		raw := json.RawMessage(errBody)
		out.Error = &raw
	}
	b, _ := json.Marshal(out)
	return b
}
