package edge

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/translate"
)

// Canaries on the edge (docs/API.md, "Canary"). A split canary answers a share of the sessions: the
// session is read from the request (edgemodel.SessionOf: a session header, the body's conversation or
// user, the conversation's opening; a Responses previous_response_id chain by its first request) and
// its arm follows from a hash every edge computes alike (edgemodel.ArmOf), so that no edge asks another
// and an agent never changes model mid-conversation. A shadow canary answers nothing: the caller gets the
// primary's answer, and a copy of the call is served by the canary off the request path, through a
// bounded queue, recorded as a run paired with the primary's (ShadowOf) and never returned (shadow.go).

// shadowRoutes are the routes whose calls a shadow canary gets a copy of: the conversations, not
// listings, token counts or embeddings.
var shadowRoutes = map[string]bool{"/v1/chat/completions": true, "/v1/messages": true, "/v1/responses": true}

// pickArm decides the arm of a request of a deployment with a canary, once its members are read and
// before its model is resolved: under a split canary the canary's sessions are served by the canary's
// view of the deployment (x.d becomes it); under a shadow canary the primary answers and the copy to
// make is noted. Without a canary it does nothing.
//
// A call on a surface the canary's target cannot serve (canaryServes) is the primary's: answered and
// recorded as the primary's arm under a split canary, copied to no shadow, so that a canary never turns
// a call the endpoint serves into a 404. A session uses one surface, so it still keeps one arm.
func (h *Handler) pickArm(x *exchange, fields map[string]json.RawMessage) {
	c := x.d.Canary
	if c == nil {
		return
	}
	x.arm, x.canaryID = edgemodel.ArmPrimary, c.ID
	x.armTarget = x.d.Served()
	if !h.canaryServes(c.Deployment, x.route) {
		return
	}
	switch c.Mode {
	case edgemodel.CanaryShadow:
		if shadowRoutes[x.route] {
			x.shadow = c.Deployment
		}
	default:
		var root map[string]json.RawMessage
		if x.route == "/v1/responses" && !hasSessionHeader(x.r.Header) {
			root = h.chainRoot(x, fields)
		}
		if edgemodel.ArmOf(edgemodel.SessionOf(x.r.Header, fields, root), c.Percent) == edgemodel.ArmCanary {
			x.d, x.arm, x.armTarget = c.Deployment, edgemodel.ArmCanary, c.Deployment.Served()
		}
	}
}

// canaryServes reports whether the canary's view of a deployment can serve a call on route: its model
// is still in the catalog and, on the Messages API (and its count_tokens), serves it; on an extra
// route, its catalog entry lists the route. Every model serves chat and, translated where its upstream
// does not, the Responses API.
func (h *Handler) canaryServes(d *edgemodel.EdgeDeployment, route string) bool {
	info, ok := h.rt.Model(d.BaseModel)
	if !ok {
		return false
	}
	switch route {
	case "/v1/messages", "/v1/messages/count_tokens":
		return info.SupportsMessages
	case "/v1/embeddings", "/v1/completions":
		cfg, _ := h.rt.Config(d.BaseModel)
		return cfg.Serves(strings.TrimPrefix(route, "/v1/"))
	}
	return true
}

func hasSessionHeader(h http.Header) bool {
	for _, name := range edgemodel.SessionHeaders {
		if h.Get(name) != "" {
			return true
		}
	}
	return false
}

// chainRoot returns the members of the first request of the previous_response_id chain a Responses
// request continues, which keys the whole chain's session (its later requests carry only new turns);
// nil when it continues none, or the chain cannot be read here (the request then fails, or is passed
// through, as without a canary). The chain read is kept for the request's own translation.
func (h *Handler) chainRoot(x *exchange, fields map[string]json.RawMessage) map[string]json.RawMessage {
	previous := translate.PreviousResponseIDOf(fields)
	if previous == "" {
		return nil
	}
	turns, e := h.previous(x, previous)
	if e != nil || len(turns) == 0 {
		return nil
	}
	x.chain, x.chainOf = turns, previous
	root, _ := bodyFields(turns[0].Request)
	return root
}
