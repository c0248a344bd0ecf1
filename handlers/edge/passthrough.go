package edge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/sse"
)

// messagesPassthrough relays a Messages request to an upstream that serves the API itself, naming the
// served model in the answer and keeping the run (text, tool use and usage) as the events pass.
func (h *Handler) messagesPassthrough(x *exchange, t *target, p inference.MessagesProxy, body []byte) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		x.fail(badRequest("", "request body must be a JSON object"))
		return
	}
	var stream bool
	if raw, ok := fields["stream"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &stream) != nil {
			x.fail(badRequest("stream", "stream must be true or false"))
			return
		}
	}
	call := t.call(&inference.Call{Body: fields, Stream: stream}, x)
	resp, err := p.ProxyMessages(x.r.Context(), call, x.r.Header)
	x.relayUpstreamID(call.UpstreamRequestID)
	if err != nil {
		x.fail(fromRuntime(err))
		return
	}
	defer resp.Body.Close()
	served := jsonx.AppendString(nil, t.served)
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		re := inference.ResponseError(t.model, resp, b)
		e := fromRuntime(re)
		var env anthropicErrorBody
		if re.Code != inference.CodeUpstreamAuth && json.Unmarshal(b, &env) == nil && env.Type == "error" && env.Error.Message != "" {
			// Already in the Anthropic shape: its type and message are relayed as they are.
			e.anthropicType, e.message = env.Error.Type, env.Error.Message
		}
		x.fail(e)
		return
	}
	if !stream {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			x.fail(&apiError{status: http.StatusBadGateway, typ: "api_error", code: inference.CodeUpstreamError,
				message: "the upstream's answer was cut short", cause: err})
			return
		}
		var m struct {
			Usage anthropicUsage `json:"usage"`
		}
		json.Unmarshal(b, &m)
		out := inference.RewriteModel(b, served)
		writeJSON(x.w, http.StatusOK, out)
		x.ok(inference.Usage{PromptTokens: m.Usage.InputTokens, CompletionTokens: m.Usage.OutputTokens,
			TotalTokens: m.Usage.InputTokens + m.Usage.OutputTokens}, out)
		return
	}

	out := x.streaming()
	out.Start()
	rd := sse.NewReader(resp.Body)
	defer rd.Release()
	var asm messageAssembler
	for {
		ev, err := rd.Next()
		if err != nil {
			e := &apiError{status: http.StatusBadGateway, typ: "api_error", code: inference.CodeUpstreamError,
				message: fmt.Sprintf("the upstream serving %q ended the stream early", t.served), cause: err}
			x.cut(e, asm.usage(), func(errJSON []byte) []byte { return withError(asm.message(served), errJSON) })
			return
		}
		data := ev.Data
		typ := asm.add(data)
		if typ == "message_start" {
			// The model sits inside "message" here, out of RewriteModel's reach.
			data = asm.startEvent(served)
		}
		name := ev.Name
		if len(name) == 0 {
			name = []byte(typ)
		}
		// message_stop is not flushed: it leaves with the end of the answer (see sse.Writer.Done).
		out.Event(name, data, rd.Pending() || typ == "message_stop")
		switch typ {
		case "message_stop":
			inference.Drain(resp.Body)
			x.ok(asm.usage(), asm.message(served))
			return
		case "error":
			x.cut(&apiError{status: http.StatusBadGateway, typ: "api_error", code: inference.CodeUpstreamError, message: asm.errMessage},
				asm.usage(), func([]byte) []byte { return withError(asm.message(served), data) })
			return
		}
	}
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// messageAssembler rebuilds an Anthropic message from its stream events, for the run history.
type messageAssembler struct {
	start      map[string]json.RawMessage
	blocks     []map[string]any
	partial    map[int]*[]byte // tool_use input JSON by block index, until the block stops
	stop       json.RawMessage
	stopSeq    json.RawMessage
	in, out    int
	deltas     int
	sawUsage   bool
	errMessage string
}

// add takes one event's data and returns its type.
func (a *messageAssembler) add(data []byte) string {
	var ev struct {
		Type         string                     `json:"type"`
		Index        int                        `json:"index"`
		Message      map[string]json.RawMessage `json:"message"`
		ContentBlock map[string]any             `json:"content_block"`
		Delta        struct {
			Type         string          `json:"type"`
			Text         string          `json:"text"`
			PartialJSON  string          `json:"partial_json"`
			StopReason   json.RawMessage `json:"stop_reason"`
			StopSequence json.RawMessage `json:"stop_sequence"`
		} `json:"delta"`
		Usage *anthropicUsage `json:"usage"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return ""
	}
	switch ev.Type {
	case "message_start":
		a.start = ev.Message
		var u anthropicUsage
		if ev.Message != nil && json.Unmarshal(ev.Message["usage"], &u) == nil {
			a.in, a.sawUsage = u.InputTokens, true
		}
	case "content_block_start":
		if ev.Index >= 0 && ev.Index < 1024 {
			for len(a.blocks) <= ev.Index {
				a.blocks = append(a.blocks, nil)
			}
			a.blocks[ev.Index] = ev.ContentBlock
		}
	case "content_block_delta":
		a.deltas++
		if ev.Index < 0 || ev.Index >= len(a.blocks) || a.blocks[ev.Index] == nil {
			break
		}
		switch ev.Delta.Type {
		case "text_delta":
			text, _ := a.blocks[ev.Index]["text"].(string)
			a.blocks[ev.Index]["text"] = text + ev.Delta.Text
		case "input_json_delta":
			if a.partial == nil {
				a.partial = map[int]*[]byte{}
			}
			buf := a.partial[ev.Index]
			if buf == nil {
				buf = new([]byte)
				a.partial[ev.Index] = buf
			}
			*buf = append(*buf, ev.Delta.PartialJSON...)
		}
	case "content_block_stop":
		a.closeBlock(ev.Index)
	case "message_delta":
		a.stop, a.stopSeq = ev.Delta.StopReason, ev.Delta.StopSequence
		if ev.Usage != nil {
			a.out, a.sawUsage = ev.Usage.OutputTokens, true
			if ev.Usage.InputTokens > 0 {
				a.in = ev.Usage.InputTokens
			}
		}
	case "error":
		a.errMessage = ev.Error.Message
	}
	return ev.Type
}

func (a *messageAssembler) closeBlock(i int) {
	buf, ok := a.partial[i]
	if !ok || i < 0 || i >= len(a.blocks) || a.blocks[i] == nil {
		return
	}
	var input any
	if json.Unmarshal(*buf, &input) == nil {
		a.blocks[i]["input"] = input
	} else {
		a.blocks[i]["input"] = string(*buf) // cut mid-way: keep what arrived
	}
	delete(a.partial, i)
}

// startEvent is the message_start event naming the served model.
func (a *messageAssembler) startEvent(served []byte) []byte {
	msg := map[string]json.RawMessage{}
	for k, v := range a.start {
		msg[k] = v
	}
	msg["model"] = served
	b, _ := json.Marshal(map[string]any{"type": "message_start", "message": msg})
	return b
}

func (a *messageAssembler) usage() inference.Usage {
	if !a.sawUsage {
		return inference.Usage{CompletionTokens: a.deltas, TotalTokens: a.deltas}
	}
	out := a.out
	if out == 0 {
		out = a.deltas
	}
	return inference.Usage{PromptTokens: a.in, CompletionTokens: out, TotalTokens: a.in + out}
}

// message is the assembled message so far.
func (a *messageAssembler) message(served []byte) []byte {
	for i := range a.partial {
		a.closeBlock(i)
	}
	msg := map[string]json.RawMessage{}
	for k, v := range a.start {
		msg[k] = v
	}
	msg["model"] = served
	blocks := []map[string]any{}
	for _, b := range a.blocks {
		if b != nil {
			blocks = append(blocks, b)
		}
	}
	msg["content"], _ = json.Marshal(blocks)
	if a.stop != nil {
		msg["stop_reason"] = a.stop
	}
	if a.stopSeq != nil {
		msg["stop_sequence"] = a.stopSeq
	}
	u := a.usage()
	msg["usage"], _ = json.Marshal(anthropicUsage{u.PromptTokens, u.CompletionTokens})
	return inference.EncodeObject(msg)
}
