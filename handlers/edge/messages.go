package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/translate"
)

// The Anthropic Messages API (POST /v1/messages): passed through to upstreams that serve it, else
// translated to chat completions and back by package translate (docs/API.md, "Messages API").

func (h *Handler) messages(x *exchange) {
	fields, depth, t, ok := h.readModelBody(x, true)
	if !ok {
		return
	}
	body := x.reqBody
	if p, ok := t.rt.(inference.Passthrough); ok && p.Passes(inference.SurfaceMessages) {
		h.messagesPassthrough(x, t, p, fields)
		return
	}
	chat, info, terr := translate.MessagesToChatWith(body, h.translation(t, fields, depth))
	if terr != nil {
		e := badRequest(terr.Param, terr.Message)
		e.unsupported = terr.Unsupported
		x.fail(e)
		return
	}
	x.ignored(info.Ignored, x.r.Header.Get("Anthropic-Beta") != "")
	call, e := translatedCall(chat)
	if e != nil {
		// The translation produced something the chat surface refuses: say so in Messages terms.
		x.fail(badRequest(e.param, e.message))
		return
	}
	t.call(call, x)
	x.answerID(call)
	if call.Stream {
		h.messagesStream(x, t, call, info)
		return
	}
	x.completeTranslated(t, call, "Messages", func(comp *inference.Completion) ([]byte, error) {
		out, _, err := translate.ChatToMessage(comp.JSON, t.served, info)
		return out, err
	})
}

// messagesStream translates a chat completion stream into Messages API events as it arrives.
func (h *Handler) messagesStream(x *exchange, t *target, call *inference.Call, info *translate.RequestInfo) {
	tr := translate.NewStream(t.served, info, inference.PromptTokensOf(t.rt, call, info.InputTokensEstimate()))
	x.translateStream(t, call, "Messages", tr, translated{tr}, nil, nil)
}

// eventTranslation is a translated stream of either surface (translate.Stream, ResponsesStream).
type eventTranslation interface {
	Add(*translate.StreamChunk) ([]translate.Event, error)
	Finish() ([]translate.Event, error)
}

// translateStream is the one loop of a translated stream, Messages or Responses (surface names it in
// errors): the chat chunks the runtime read go through tr and leave as the surface's events. Each
// event leaves at once, unless more have arrived: then they leave in one flush. answer is the run's
// answer; fail, when not nil, ends a started stream with the surface's own failure event; done runs
// after a complete answer.
func (x *exchange) translateStream(t *target, call *inference.Call, surface string, tr eventTranslation, answer inference.Answer,
	fail func(write func([]translate.Event, bool), e *apiError), done func()) {
	call.PromptUsage = true // message_start's input_tokens, where the upstream can count before the first token
	st, err := t.rt.Stream(x.r.Context(), call)
	x.relayUpstreamID(call.UpstreamRequestID)
	if err != nil {
		x.fail(fromRuntime(err))
		return
	}
	defer st.Close()
	x.took(call)
	out := x.streaming()
	pender, _ := st.(inference.Pender)
	if x.recording() {
		x.answer = answer
	}
	write := func(evs []translate.Event, more bool) {
		for i, ev := range evs {
			out.Event([]byte(ev.Name), ev.Data, more || i < len(evs)-1)
		}
	}
	if fail != nil {
		x.streamFail = func(e *apiError) { fail(write, e) }
	}
	var sc translate.StreamChunk
	for {
		ch, err := st.Next()
		if err == io.EOF {
			// Events returned with an error happened before it: they are sent first, then the error.
			// The last events are not flushed: they leave with the end of the answer (see sse.Writer.Done).
			evs, ferr := tr.Finish()
			write(evs, true)
			if ferr == nil {
				x.ok(nil)
				if done != nil {
					done()
				}
				return
			}
			err = &inference.Error{Status: http.StatusBadGateway, Type: "api_error", Code: inference.CodeUpstreamError,
				Message: "the upstream's answer could not be translated to the " + surface + " API: " + ferr.Error()}
		} else if err == nil {
			evs, cerr := tr.Add(streamChunk(&sc, ch)) // the runtime has read the chunk: no second parse
			write(evs, cerr != nil || (pender != nil && pender.Pending()))
			x.read(ch)
			if cerr == nil {
				continue
			}
			err = &inference.Error{Status: http.StatusBadGateway, Type: "api_error", Code: inference.CodeUpstreamError,
				Message: "the upstream sent a chunk that could not be translated to the " + surface + " API: " + cerr.Error()}
		}
		x.fail(fromRuntime(err))
		return
	}
}

// completeTranslated asks for a translated call's answer and ends it (answerWith), translated by answer.
func (x *exchange) completeTranslated(t *target, call *inference.Call, surface string, answer func(*inference.Completion) ([]byte, error)) []byte {
	comp, err := t.rt.Complete(x.r.Context(), call)
	return x.answerWith(call, comp, err, surface, answer)
}

// translated is the run's answer of a translated Messages stream: the message the translation
// assembled.
type translated struct{ tr *translate.Stream }

func (translated) Add(*inference.Chunk) {}

func (a translated) JSON(_ inference.Usage, errJSON []byte) []byte {
	if errJSON == nil {
		return a.tr.Message()
	}
	return inference.WithError(a.tr.Message(), errJSON)
}

// streamChunk puts what the runtime read of a chunk into sc (its buffers reused) for the translation.
func streamChunk(sc *translate.StreamChunk, ch *inference.Chunk) *translate.StreamChunk {
	sc.ID, sc.Usage, sc.Choices = ch.ID, nil, sc.Choices[:0]
	if ch.Usage != nil {
		sc.Usage = &translate.Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens, ReasoningTokens: ch.Usage.ReasoningTokens,
			CachedTokens: ch.Usage.CachedTokens}
	}
	for _, c := range ch.Choices {
		choice := translate.StreamChoice{Index: c.Index, Reasoning: c.Reasoning, Content: c.Content, FinishReason: c.FinishReason, StopReason: c.StopReason}
		for _, t := range c.ToolCalls {
			choice.ToolCalls = append(choice.ToolCalls, translate.StreamToolCall{Index: t.Index, ID: t.ID, Name: t.Name, Arguments: t.Arguments})
		}
		sc.Choices = append(sc.Choices, choice)
	}
	return sc
}

// translation returns what a translation needs to know of the target: its model's reasoning controls
// and the edge's signing secret. checked, when not nil, holds the top-level members readModelBody's
// walker returned for the body to translate (whose JSON bodyFields judged already), and depth its
// deepest nesting: the translation opens them instead of splitting the body again, and reads it no
// more to judge its depth.
func (h *Handler) translation(t *target, checked map[string]json.RawMessage, depth int) translate.Options {
	cfg, _ := h.rt.Config(t.model)
	return translate.Options{Reasoning: cfg.Reasoning, Secret: h.thinkingSecret(), Checked: checked, CheckedDepth: depth}
}

// ignoredHeader names what a translated request carried that svc accepted without effect.
const ignoredHeader = "Svc-Ignored-Fields"

// ignored sends the names of the fields a translation accepted and ignored (and the anthropic-beta
// header, which a translated call cannot honour), before the answer starts.
func (x *exchange) ignored(names []string, beta bool) {
	if beta {
		names = append(names, "anthropic-beta")
	}
	if len(names) > 0 {
		x.w.Header().Set(ignoredHeader, strings.Join(names, ", "))
	}
}

// countTokens answers POST /v1/messages/count_tokens (countPrompt).
func (h *Handler) countTokens(x *exchange) {
	h.countPrompt(x, inference.SurfaceCountTokens, translate.CountTokens, `{"input_tokens":`)
}

// countPrompt answers a count of a request's prompt tokens (Messages' count_tokens, the Responses API's
// input_tokens): passed through to upstreams that serve the surface; else the upstream's /tokenize count
// of the translated request, where it has one (vLLM), else the runtime's or svc's estimate. The call
// generates nothing: its run counts no tokens. The answer is opening, the count and "}".
func (h *Handler) countPrompt(x *exchange, s inference.Surface, count func([]byte, translate.Options) ([]byte, int, *translate.Error), opening string) {
	fields, depth, t, ok := h.readModelBody(x, s == inference.SurfaceCountTokens)
	if !ok {
		return
	}
	call := t.call(&inference.Call{Body: fields}, x)
	if p, ok := t.rt.(inference.Passthrough); ok && p.Passes(s) {
		comp, err := p.PassComplete(x.r.Context(), s, call, x.r.Header)
		x.relayUpstreamID(call.UpstreamRequestID)
		if err != nil {
			x.fail(fromRuntime(err))
			return
		}
		writeJSON(x.w, http.StatusOK, comp.JSON)
		x.ok(comp.JSON)
		return
	}
	tok, n, terr := count(x.reqBody, h.translation(t, fields, depth))
	if terr != nil {
		x.fail(badRequest(terr.Param, terr.Message))
		return
	}
	if tz, ok := t.rt.(inference.Tokenizer); ok {
		if counted, ok := tz.Tokenize(x.r.Context(), call, tok); ok {
			n = counted
		}
	}
	out := []byte(opening + itoa(n) + "}")
	writeJSON(x.w, http.StatusOK, out)
	x.ok(out)
}
