package edge

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/svcdev/svc/runtime"
)

// The Anthropic Messages API (POST /v1/messages): passed through to upstreams that serve it, else
// translated to chat completions and back.

type anthropicMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	Stream        bool               `json:"stream"`
	StopSequences json.RawMessage    `json:"stop_sequences"`
	Temperature   json.RawMessage    `json:"temperature"`
	TopP          json.RawMessage    `json:"top_p"`
}

// parseMessages validates a Messages body. Content blocks are checked only when translating, since an
// upstream that serves the API itself may understand more than text.
func parseMessages(body []byte) (map[string]json.RawMessage, *anthropicRequest, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		if err == nil {
			return nil, nil, badRequest("", "request body must be a JSON object")
		}
		return nil, nil, badRequest("", "request body is not a valid JSON object: "+jsonProblem(err))
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, badRequest("", "request body does not have the Messages API shape: "+jsonProblem(err))
	}
	if len(req.Messages) == 0 {
		return nil, nil, badRequest("messages", "messages is required and must not be empty")
	}
	for i, m := range req.Messages {
		if m.Role == nil || (*m.Role != "user" && *m.Role != "assistant") {
			return nil, nil, badRequest(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("messages[%d].role must be \"user\" or \"assistant\"", i))
		}
		if len(m.Content) == 0 || string(m.Content) == "null" {
			return nil, nil, badRequest(fmt.Sprintf("messages[%d].content", i), fmt.Sprintf("messages[%d].content is required", i))
		}
	}
	if req.MaxTokens == nil || *req.MaxTokens < 1 {
		return nil, nil, badRequest("max_tokens", "max_tokens is required and must be a positive integer")
	}
	return fields, &req, nil
}

// blocksText returns the text of a string or of an array of text blocks; other blocks cannot be
// translated to the chat format.
func blocksText(raw json.RawMessage, where string) (string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		return s, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badRequest(where, where+" must be a string or an array of content blocks")
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type != "text" {
			return "", badRequest(where, fmt.Sprintf("%s: content blocks of type %q are not supported by this model; send text", where, bl.Type))
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// translate turns a Messages request into a chat completions call.
func translate(req *anthropicRequest) (*runtime.Call, *apiError) {
	type chatMsg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var msgs []chatMsg
	system, e := blocksText(req.System, "system")
	if e != nil {
		return nil, e
	}
	if system != "" {
		msgs = append(msgs, chatMsg{"system", system})
	}
	for i, m := range req.Messages {
		text, e := blocksText(m.Content, fmt.Sprintf("messages[%d].content", i))
		if e != nil {
			return nil, e
		}
		msgs = append(msgs, chatMsg{*m.Role, text})
	}
	call := &runtime.Call{Body: map[string]json.RawMessage{}, MaxTokens: *req.MaxTokens, Stream: req.Stream}
	for _, m := range msgs {
		call.Messages = append(call.Messages, runtime.Message{Role: m.Role, Content: m.Content})
	}
	call.Body["messages"], _ = json.Marshal(msgs)
	call.Body["max_tokens"], _ = json.Marshal(*req.MaxTokens)
	call.Body["stream"], _ = json.Marshal(req.Stream)
	for k, v := range map[string]json.RawMessage{"stop": req.StopSequences, "temperature": req.Temperature, "top_p": req.TopP} {
		if len(v) > 0 && string(v) != "null" {
			call.Body[k] = v
		}
	}
	return call, nil
}

func stopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

type anthropicText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicResponse struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []anthropicText `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        anthropicUsage  `json:"usage"`
}

func messageID(completionID string) string {
	return "msg_" + strings.TrimPrefix(completionID, "chatcmpl-")
}

func (h *Handler) messages(w http.ResponseWriter, r *http.Request, req *request) {
	body, e := readBody(w, r)
	if e != nil {
		h.writeError(w, formatAnthropic, e)
		return
	}
	fields, areq, e := parseMessages(body)
	if e != nil {
		h.writeError(w, formatAnthropic, e)
		return
	}
	t, e := h.resolve(req.d, areq.Model, true)
	if e != nil {
		h.record(req, areq.Model, true, runtime.Usage{}, body, h.writeError(w, formatAnthropic, e))
		return
	}
	if p, ok := t.rt.(runtime.MessagesProxy); ok && p.ServesMessages() {
		call := &runtime.Call{Model: t.model, Served: t.served, Adapter: t.adapter, AdapterName: t.adapterName, Body: fields, Stream: areq.Stream}
		h.messagesPassthrough(w, r, req, t, p, call, body)
		return
	}
	call, e := translate(areq)
	if e != nil {
		h.record(req, t.served, true, runtime.Usage{}, body, h.writeError(w, formatAnthropic, e))
		return
	}
	t.address(call)
	if call.Stream {
		h.messagesStream(w, r, req, t, call, body)
		return
	}
	comp, ok := h.complete(w, r, req, t, call, body, formatAnthropic)
	if !ok {
		return
	}
	sr := stopReason(comp.FinishReason)
	out, _ := json.Marshal(anthropicResponse{ID: messageID(comp.ID), Type: "message", Role: "assistant", Model: t.served,
		Content: []anthropicText{{"text", comp.Content}}, StopReason: &sr,
		Usage: anthropicUsage{comp.Usage.PromptTokens, comp.Usage.CompletionTokens}})
	writeJSON(w, http.StatusOK, out)
	h.record(req, t.served, false, comp.Usage, body, out)
}

// sseEvent writes one named event and flushes it.
func sseEvent(w http.ResponseWriter, rc *http.ResponseController, name string, v any) {
	b, _ := json.Marshal(v)
	w.Write([]byte("event: " + name + "\ndata: "))
	w.Write(b)
	w.Write(sseEnd)
	rc.Flush()
}

// messagesStream translates a chat completion stream into Messages API events.
func (h *Handler) messagesStream(w http.ResponseWriter, r *http.Request, req *request, t *target, call *runtime.Call, body []byte) {
	st, err := t.rt.Stream(r.Context(), call)
	if err != nil {
		h.failed(w, r, req, t, body, formatAnthropic, err)
		return
	}
	defer st.Close()
	rc := http.NewResponseController(w)
	var (
		started bool
		text    strings.Builder
		finish  string
		usage   runtime.Usage
		id      string
	)
	result := func(sr *string) []byte {
		b, _ := json.Marshal(anthropicResponse{ID: messageID(id), Type: "message", Role: "assistant", Model: t.served,
			Content: []anthropicText{{"text", text.String()}}, StopReason: sr, Usage: anthropicUsage{usage.PromptTokens, usage.CompletionTokens}})
		return b
	}
	start := func(chID string) {
		id = chID
		startSSE(w)
		sseEvent(w, rc, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": messageID(id), "type": "message", "role": "assistant", "model": t.served, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage{0, 0}}})
		sseEvent(w, rc, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": anthropicText{"text", ""}})
		sseEvent(w, rc, "ping", map[string]any{"type": "ping"})
		started = true
	}
	for {
		ch, err := st.Next()
		if err == io.EOF {
			if !started {
				start(newMessageID())
			}
			sr := stopReason(finish)
			sseEvent(w, rc, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			sseEvent(w, rc, "message_delta", map[string]any{"type": "message_delta",
				"delta": map[string]any{"stop_reason": sr, "stop_sequence": nil},
				"usage": anthropicUsage{usage.PromptTokens, usage.CompletionTokens}})
			sseEvent(w, rc, "message_stop", map[string]any{"type": "message_stop"})
			h.record(req, t.served, false, usage, body, result(&sr))
			return
		}
		if err != nil {
			switch {
			case clientGone(r, err):
				h.record(req, t.served, true, usage, body, result(nil))
			case !started:
				h.record(req, t.served, true, usage, body, h.writeError(w, formatAnthropic, fromRuntime(err)))
			default:
				h.writeStreamError(w, formatAnthropic, fromRuntime(err))
				h.record(req, t.served, true, usage, body, result(nil))
			}
			return
		}
		if ch.Usage != nil {
			usage = *ch.Usage
		}
		if !started {
			start(ch.ID)
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
			if c.Content != "" {
				text.WriteString(c.Content)
				sseEvent(w, rc, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
					"delta": map[string]string{"type": "text_delta", "text": c.Content}})
			}
		}
	}
}

// newMessageID names an answer that got no id from its runtime.
func newMessageID() string {
	var b [12]byte
	rand.Read(b[:])
	return fmt.Sprintf("chatcmpl-%x", b)
}

// messagesPassthrough relays a Messages request to an upstream that serves the API itself.
func (h *Handler) messagesPassthrough(w http.ResponseWriter, r *http.Request, req *request, t *target, p runtime.MessagesProxy, call *runtime.Call, body []byte) {
	resp, err := p.ProxyMessages(r.Context(), call, r.Header)
	if err != nil {
		h.failed(w, r, req, t, body, formatAnthropic, err)
		return
	}
	defer resp.Body.Close()
	served, _ := json.Marshal(t.served)
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var env anthropicErrorBody
		if json.Unmarshal(b, &env) == nil && env.Type == "error" && env.Error.Message != "" {
			// Already in the Anthropic shape: relay it as it is.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(resp.StatusCode)
			w.Write(b)
			h.record(req, t.served, true, runtime.Usage{}, body, b)
			return
		}
		h.record(req, t.served, true, runtime.Usage{}, body, h.writeError(w, formatAnthropic, fromRuntime(runtime.UpstreamError(resp.StatusCode, b))))
		return
	}
	var usage runtime.Usage
	if !call.Stream {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			h.record(req, t.served, true, usage, body, h.writeError(w, formatAnthropic, &apiError{status: http.StatusBadGateway, typ: "api_error",
				code: runtime.CodeUpstreamError, message: "the upstream's answer was cut short", cause: err}))
			return
		}
		var m struct {
			Usage anthropicUsage `json:"usage"`
		}
		json.Unmarshal(b, &m)
		usage = runtime.Usage{PromptTokens: m.Usage.InputTokens, CompletionTokens: m.Usage.OutputTokens}
		out := runtime.RewriteModel(b, served)
		writeJSON(w, http.StatusOK, out)
		h.record(req, t.served, false, usage, body, out)
		return
	}

	rc := http.NewResponseController(w)
	startSSE(w)
	rd := bufio.NewReaderSize(resp.Body, 32<<10)
	var (
		text     strings.Builder
		msg      map[string]json.RawMessage
		stop     json.RawMessage
		finished bool
		failed   bool
	)
	for !finished {
		name, data, err := readEvent(rd)
		if err != nil {
			if r.Context().Err() == nil {
				h.writeStreamError(w, formatAnthropic, &apiError{status: http.StatusBadGateway, typ: "api_error", code: runtime.CodeUpstreamError,
					message: fmt.Sprintf("the upstream serving %q ended the stream early", t.served), cause: err})
			}
			failed = true
			break
		}
		var ev struct {
			Type    string                     `json:"type"`
			Message map[string]json.RawMessage `json:"message"`
			Delta   struct {
				Type       string          `json:"type"`
				Text       string          `json:"text"`
				StopReason json.RawMessage `json:"stop_reason"`
			} `json:"delta"`
			Usage *anthropicUsage `json:"usage"`
		}
		json.Unmarshal(data, &ev)
		switch ev.Type {
		case "message_start":
			if ev.Message != nil {
				// The model sits inside "message" here, out of RewriteModel's reach.
				ev.Message["model"] = served
				msg = ev.Message
				data, _ = json.Marshal(map[string]any{"type": "message_start", "message": ev.Message})
				var u anthropicUsage
				json.Unmarshal(ev.Message["usage"], &u)
				usage.PromptTokens = u.InputTokens
			}
		case "content_block_delta":
			text.WriteString(ev.Delta.Text)
		case "message_delta":
			stop = ev.Delta.StopReason
			if ev.Usage != nil {
				usage.CompletionTokens = ev.Usage.OutputTokens
				if ev.Usage.InputTokens > 0 {
					usage.PromptTokens = ev.Usage.InputTokens
				}
			}
		case "message_stop":
			finished = true
		case "error":
			failed, finished = true, true
		}
		if name == "" {
			name = ev.Type
		}
		w.Write([]byte("event: " + name + "\ndata: "))
		w.Write(data)
		w.Write(sseEnd)
		rc.Flush()
	}
	if msg == nil {
		msg = map[string]json.RawMessage{"model": served}
	}
	msg["content"], _ = json.Marshal([]anthropicText{{"text", text.String()}})
	if stop != nil {
		msg["stop_reason"] = stop
	}
	msg["usage"], _ = json.Marshal(anthropicUsage{usage.PromptTokens, usage.CompletionTokens})
	h.record(req, t.served, failed, usage, body, runtime.EncodeObject(msg))
}

// readEvent reads one server-sent event: its name and its data.
func readEvent(rd *bufio.Reader) (string, []byte, error) {
	var name string
	var data []byte
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return "", nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if data != nil {
				return name, data, nil
			}
			if err != nil {
				return "", nil, err
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			name = string(bytes.TrimSpace(v))
		} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
}
