package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/jsonx"
)

// GET /v1/models/{id}, and the extra OpenAI routes a model's catalog entry lists (`routes`):
// POST /v1/embeddings and /v1/completions, passed through unchanged but for the model name, or answered
// by the simulator.

// model answers one model in OpenAI's format: the pinned model of a single-target endpoint, or a
// public model of a multi-model one.
func (h *Handler) model(x *exchange) {
	id := strings.TrimPrefix(x.r.URL.Path, "/v1/models/")
	var obj *modelObject
	if x.d.BaseModel != "" {
		if id == x.d.Served() {
			obj = &modelObject{ID: id, Object: "model", Created: x.d.CreatedAt.Unix(), OwnedBy: "svc"}
		}
	} else if info, ok := h.rt.Model(id); ok && info.Public {
		obj = &modelObject{ID: id, Object: "model", Created: h.started.Unix(), OwnedBy: "svc"}
	}
	if obj == nil {
		e := notFound("model_not_found", fmt.Sprintf("The model '%s' does not exist on this endpoint; GET /v1/models lists the models", id))
		e.param = "model"
		x.fail(e)
		return
	}
	var b []byte
	if anthropicCaller(x.r) {
		b, _ = json.Marshal(anthropicModelOf(*obj))
	} else {
		b, _ = json.Marshal(obj)
	}
	writeJSON(x.w, http.StatusOK, b)
	x.ok(nil)
}

func (h *Handler) embeddings(x *exchange)  { h.extraRoute(x, inference.SurfaceEmbeddings) }
func (h *Handler) completions(x *exchange) { h.extraRoute(x, inference.SurfaceCompletions) }

// extraRoute serves an extra route for the models whose catalog entry lists it; any other model is a
// 404 naming it.
func (h *Handler) extraRoute(x *exchange, s inference.Surface) {
	fields, _, t, ok := h.readModelBody(x, false)
	if !ok {
		return
	}
	body := x.reqBody
	if cfg, _ := h.rt.Config(t.model); !cfg.Serves(string(s)) {
		e := notFound("model_not_found", fmt.Sprintf("the model %q does not serve /v1/%s (its catalog entry does not list %s in routes); /v1/chat/completions serves it", t.served, s, s))
		e.param = "model"
		x.fail(e)
		return
	}
	stream := false
	if raw, ok := fields["stream"]; ok && string(raw) != "null" {
		if s != inference.SurfaceCompletions || (string(raw) != "true" && string(raw) != "false") {
			x.fail(badRequest("stream", "stream must be true or false, on /v1/completions only"))
			return
		}
		stream = string(raw) == "true"
	}
	call := t.call(&inference.Call{Body: fields, Stream: stream}, x)
	if s == inference.SurfaceCompletions {
		// Checked as chat checks it: a bad cap is svc's 400, not whatever the upstream makes of it.
		n, e := maxTokens(fields, "max_tokens")
		if e != nil {
			x.fail(e)
			return
		}
		call.MaxTokens = n
	}
	if raw, ok := fields["stream_options"]; ok && string(raw) != "null" {
		call.IncludeUsage = string(jsonx.Field(raw, "include_usage")) == "true"
	}
	ctx := x.r.Context()
	if rr, ok := t.rt.(inference.RouteRuntime); ok {
		switch {
		case s == inference.SurfaceEmbeddings:
			comp, err := rr.Embeddings(ctx, t.served, body)
			x.complete(call, comp, err)
		case stream:
			st, err := rr.TextCompletionStream(ctx, t.served, body)
			x.relay(s, t, call, st, err)
		default:
			comp, err := rr.TextCompletion(ctx, t.served, body)
			x.complete(call, comp, err)
		}
		return
	}
	p, ok := t.rt.(inference.Passthrough)
	if !ok || !p.Passes(s) {
		x.fail(notFound("model_not_found", fmt.Sprintf("the model %q does not serve /v1/%s", t.served, s)))
		return
	}
	if stream {
		st, err := p.PassStream(ctx, s, call, x.r.Header)
		x.relay(s, t, call, st, err)
		return
	}
	comp, err := p.PassComplete(ctx, s, call, x.r.Header)
	x.complete(call, comp, err)
}

// readModelBody reads a body that names its model (Messages, count_tokens, Responses, the extra
// routes): its fields, its deepest nesting (for a translation: translate.Options.CheckedDepth) and the
// target its model resolves to, with the exchange told both. The model is
// needed before anything else: it decides between passthrough and translation, and an upstream that
// serves the surface itself is the judge of the rest of the body. false: the failure is answered.
func (h *Handler) readModelBody(x *exchange, messagesAPI bool) (map[string]json.RawMessage, int, *target, bool) {
	body, e := readBody(x.w, x.r)
	x.reqBody = body
	if e != nil {
		x.fail(e)
		return nil, 0, nil, false
	}
	fields, depth, e := walkBody(body)
	if e != nil {
		x.fail(e)
		return nil, 0, nil, false
	}
	if raw := fields["model"]; len(raw) > 0 && string(raw) != "null" {
		if raw[0] != '"' {
			x.fail(badRequest("model", "model must be a string"))
			return nil, 0, nil, false
		}
		x.model = jsonx.String(raw)
	}
	x.canary = h.pickArm(x, fields)
	t, e := h.resolve(x.served(), x.model, messagesAPI)
	if e != nil {
		x.fail(e)
		return nil, 0, nil, false
	}
	x.trace.asked, x.model, x.base = x.model, t.served, t.model
	var ok bool
	if x.turn, ok = h.takeTurn(x, t, fields); !ok {
		return nil, 0, nil, false
	}
	return fields, depth, t, true
}
