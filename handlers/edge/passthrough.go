package edge

import (
	"encoding/json"

	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/runs"
)

// messagesPassthrough relays a Messages request to an upstream that serves the API itself. The runtime
// owns the upstream's answer (it renames the model, reads usage, maps errors); the edge sends it as it
// sends a relayed chat answer.
func (h *Handler) messagesPassthrough(x *exchange, t *target, p inference.Passthrough, fields map[string]json.RawMessage) {
	var stream bool
	if raw, ok := fields["stream"]; ok && string(raw) != "null" {
		if string(raw) != "true" && string(raw) != "false" {
			x.fail(badRequest("stream", "stream must be true or false"))
			return
		}
		stream = string(raw) == "true"
	}
	call := t.call(&inference.Call{Body: fields, Stream: stream}, x)
	x.runID = runs.NewID(x.start)
	call.ID = runs.MessageID(x.runID) // docs/API.md, "Ids are run ids"
	ctx := x.r.Context()
	if stream {
		st, err := p.PassStream(ctx, inference.SurfaceMessages, call, x.r.Header)
		x.relay(inference.SurfaceMessages, t, call, st, err)
		return
	}
	comp, err := p.PassComplete(ctx, inference.SurfaceMessages, call, x.r.Header)
	x.complete(call, comp, err)
}
