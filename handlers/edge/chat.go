package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/strictjson"
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
	return chatCall(fields)
}

// translatedCall is chatCall for the chat request a translation built (translate.Chat): its members
// become the call's body as they are, never decoded, and its messages are judged by the chat surface's
// rule (chatTurn) from the request as built.
func translatedCall(c *translate.Chat) (*inference.Call, *apiError) {
	if c.Turns == nil {
		return nil, badRequest("messages", "messages is required: an array of {role, content} objects")
	}
	msgs, e := judgeTurns(c.Turns)
	if e != nil {
		return nil, e
	}
	return &inference.Call{Body: c.Members, Messages: msgs, Stream: c.Stream, IncludeUsage: c.IncludeUsage, MaxTokens: c.MaxTokens}, nil
}

// chatCall turns the members of a chat completions body into a runtime call (model not yet set).
func chatCall(fields map[string]json.RawMessage) (*inference.Call, string, *apiError) {
	call := &inference.Call{Body: fields}
	var model string
	if raw, ok := fields["model"]; ok && string(raw) != "null" {
		if raw[0] != '"' {
			return nil, "", badRequest("model", "model must be a string")
		}
		model = jsonx.String(raw)
	}
	msgs, e := chatMessages(fields)
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
		on, ok := includeUsage(raw)
		if !ok {
			return nil, "", badRequest("stream_options", "stream_options must be an object")
		}
		call.IncludeUsage = on
	}
	n, e := maxTokens(fields, "max_tokens", "max_completion_tokens")
	if e != nil {
		return nil, "", e
	}
	call.MaxTokens = n
	return call, model, nil
}

// maxTokens reads a body's output caps (chat's max_tokens and max_completion_tokens, /v1/completions'
// max_tokens): each a positive integer when given; the smaller one applies, 0 when none is given.
func maxTokens(fields map[string]json.RawMessage, names ...string) (int, *apiError) {
	limit := 0
	for _, k := range names {
		if raw, ok := fields[k]; ok && string(raw) != "null" {
			n, isInt := jsonx.Integer(raw)
			if !isInt || n < 1 || n != int64(int(n)) {
				return 0, badRequest(k, k+" must be a positive integer")
			}
			if limit == 0 || int(n) < limit {
				limit = int(n)
			}
		}
	}
	return limit, nil
}

// includeUsage reads stream_options (valid JSON, not null) as encoding/json would read it into
// {IncludeUsage bool `json:"include_usage"`}: an object whose include_usage, matched case-folded, is a
// boolean or null; ok is false for anything else. It is read here once: the upstream's body gets
// include_usage spliced in (inference.WithUsage), not decoded again.
func includeUsage(raw []byte) (on, ok bool) {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '{' {
		return false, false
	}
	ok = true
	c.Object(func(name []byte) {
		if !bytes.EqualFold(name, []byte("include_usage")) {
			return
		}
		switch string(c.Raw()) {
		case "true":
			on = true
		case "false", "null":
			on = false
		default:
			ok = false
		}
	})
	return on, ok && !c.Bad()
}

// bodyFields returns the members of a request body that must be a JSON object, of any surface, read
// by the edge's one body walker (strictjson.Walk): one pass judges the JSON, refuses a name written
// twice in one object at any depth (the rule of every body svc reads: the upstream could read the
// other one) and returns the top-level members. Nothing after it checks the body again. A body that
// is not JSON is read again by encoding/json only to say why.
func bodyFields(body []byte) (map[string]json.RawMessage, *apiError) {
	fields, _, e := walkBody(body)
	return fields, e
}

// walkBody is bodyFields with the body's deepest nesting, which a translation bounds
// (translate.Options.CheckedDepth).
func walkBody(body []byte) (map[string]json.RawMessage, int, *apiError) {
	fields, depth, dup, valid := strictjson.Walk(body)
	if valid {
		if dup != nil {
			return nil, 0, badRequest(dup.Field, "request body has "+dup.Error())
		}
		if fields != nil {
			return fields, depth, nil
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, 0, badRequest("", "request body is not a valid JSON object: "+jsonProblem(err))
	}
	return nil, 0, badRequest("", "request body must be a JSON object") // null
}

var errMessagesShape = badRequest("messages", "messages must be an array of {role, content} objects")

// chatMessages reads a chat body's messages (valid JSON) by internal/conv's reading: each entry's role
// and the text of its content, judged by chatTurn.
func chatMessages(fields map[string]json.RawMessage) ([]inference.Message, *apiError) {
	var (
		msgs []inference.Message
		e    *apiError
	)
	err := conv.ChatTurns(fields, func(t conv.Turn) bool {
		var m inference.Message
		if m, e = chatTurn(len(msgs), t); e == nil {
			msgs = append(msgs, m)
		}
		return e == nil
	})
	switch {
	case err == conv.ErrNoMessages:
		return nil, badRequest("messages", "messages is required: an array of {role, content} objects")
	case err != nil:
		return nil, errMessagesShape
	case e != nil:
		return nil, e
	case len(msgs) == 0:
		return nil, badRequest("messages", "messages must not be empty")
	}
	return msgs, nil
}

// judgeTurns holds each turn of a translated request to chatTurn.
func judgeTurns(turns []conv.Turn) ([]inference.Message, *apiError) {
	if len(turns) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	msgs := make([]inference.Message, len(turns))
	for i, t := range turns {
		m, e := chatTurn(i, t)
		if e != nil {
			return nil, e
		}
		msgs[i] = m
	}
	return msgs, nil
}

// chatTurn is the rule of one chat message, read from a body or from a translation: it has a role, and
// content (a string or an array of parts, hasContent) unless it is an assistant turn that only calls
// tools.
func chatTurn(i int, t conv.Turn) (inference.Message, *apiError) {
	if t.Role == "" {
		return inference.Message{}, badRequest(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("messages[%d].role is required", i))
	}
	if !t.HasContent && !(t.Role == "assistant" && t.ToolCalls) {
		return inference.Message{}, badRequest(fmt.Sprintf("messages[%d].content", i),
			fmt.Sprintf("messages[%d].content is required: a string or an array of content parts", i))
	}
	return inference.Message{Role: t.Role, Content: t.Text}, nil
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
	fields, e := bodyFields(body)
	if e != nil {
		x.fail(e)
		return
	}
	call, model, e := chatCall(fields)
	x.model = model
	if e != nil {
		x.fail(e)
		return
	}
	x.canary = h.pickArm(x, fields)
	t, e := h.resolve(x.served(), model, false)
	if e != nil {
		x.fail(e)
		return
	}
	x.trace.asked, x.model, x.base = x.model, t.served, t.model
	var ok bool
	if x.turn, ok = h.takeTurn(x, t, fields); !ok {
		return
	}
	t.call(call, x)
	x.answerID(call)
	if call.Stream {
		st, err := t.rt.Stream(x.r.Context(), call)
		x.relay(inference.SurfaceChat, t, call, st, err)
		return
	}
	comp, err := t.rt.Complete(x.r.Context(), call)
	x.complete(call, comp, err)
}

// clientClosed is what a run records when its client went away before the answer was complete.
var clientClosed = &apiError{status: 499, typ: "invalid_request_error", code: "client_closed_request", message: "the client closed the connection"}

// complete sends a non-streamed answer of any surface (relayed, passed through), as the runtime gave it.
func (x *exchange) complete(call *inference.Call, comp *inference.Completion, err error) {
	x.answerWith(call, comp, err, "", nil)
}

// answerWith is the one non-streamed ending of every surface: the runtime's answer, as it gave it or
// translated by answer (to the surface it names in errors), or a 502 that says why it could not be
// translated. It returns the answer sent (nil when none was).
func (x *exchange) answerWith(call *inference.Call, comp *inference.Completion, err error, surface string, answer func(*inference.Completion) ([]byte, error)) []byte {
	x.relayUpstreamID(call.UpstreamRequestID)
	if err != nil {
		x.fail(fromRuntime(err))
		return nil
	}
	x.took(call)
	x.answered(comp)
	out := comp.JSON
	if answer != nil {
		if out, err = answer(comp); err != nil {
			x.fail(&apiError{status: http.StatusBadGateway, typ: "api_error", code: inference.CodeUpstreamError, cause: err,
				message: "the upstream's answer could not be translated to the " + surface + " API: " + err.Error()})
			return nil
		}
	}
	writeJSON(x.w, http.StatusOK, out)
	x.ok(out)
	return out
}

// relay sends a stream of any surface (relayed chat, passed through) event by event, as the runtime
// read it: chat chunks as unnamed events ending with "data: [DONE]", a passed-through surface's events
// under their names, its own last event included. Each event leaves at once, unless the next one has
// already arrived: then both leave in one flush. A client that went away surfaces at the next Next.
func (x *exchange) relay(s inference.Surface, t *target, call *inference.Call, st inference.Stream, err error) {
	x.relayUpstreamID(call.UpstreamRequestID)
	if err != nil {
		x.fail(fromRuntime(err))
		return
	}
	defer st.Close()
	x.took(call)
	if x.recording() {
		x.answer = inference.NewAnswer(s, t.served)
	}
	out := x.streaming()
	pender, _ := st.(inference.Pender)
	for {
		ch, err := st.Next()
		if err == io.EOF {
			if s == inference.SurfaceChat || s == inference.SurfaceCompletions {
				out.Done()
			}
			x.ok(nil)
			return
		}
		if err != nil {
			x.fail(fromRuntime(err))
			return
		}
		more := pender != nil && pender.Pending()
		switch {
		case ch.Event != nil:
			// The last event is not flushed: it leaves with the end of the answer (see sse.Writer.Done).
			out.Event(ch.Event, ch.JSON, more || ch.Last)
		case !ch.UsageOnly() || call.IncludeUsage:
			// The usage chunk svc asked the upstream for is for the run's counts, not for a client that
			// did not ask for it.
			out.Data(ch.JSON, more)
		}
		x.read(ch) // after the write: the answer goes first
	}
}
