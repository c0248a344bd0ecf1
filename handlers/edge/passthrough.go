package edge

import (
	"encoding/json"

	"github.com/svcdev/svc/internal/inference"
)

// messagesPassthrough relays a Messages request to an upstream that serves the API itself. The runtime
// owns the upstream's answer (it renames the model, reads usage, maps errors); the edge sends it as it
// sends a relayed chat answer.
func (h *Handler) messagesPassthrough(x *exchange, t *target, p inference.Passthrough, body []byte) {
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
	ctx := x.r.Context()
	if stream {
		st, err := p.PassStream(ctx, inference.SurfaceMessages, call, x.r.Header)
		x.relay(inference.SurfaceMessages, t, call, st, err)
		return
	}
	comp, err := p.PassComplete(ctx, inference.SurfaceMessages, call, x.r.Header)
	x.complete(call, comp, err)
}
