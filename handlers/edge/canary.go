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

// armChoice is a canary's decision for one call, made once (pickArm) and read where the call is served
// (exchange.served) and where it ends (its run's arm, the copy it makes). The zero value is a call of a
// deployment without a canary.
type armChoice struct {
	arm      string // the run's arm: "" without a canary, else primary or canary
	target   string // the model id the arm serves under
	canaryID string // the canary the call was counted under
	// serve is the deployment as the canary's arm serves it, when a split canary answers the call; nil
	// when the primary does.
	serve *edgemodel.EdgeDeployment
	// shadow is the canary's view of the deployment a copy of the call goes to (a shadow canary).
	shadow *edgemodel.EdgeDeployment
	// chain is the previous_response_id chain read to key the session (chainOf its id), which the
	// call's translation reuses.
	chain   []translate.Turn
	chainOf string
}

// pickArm decides the arm of a request of a deployment with a canary, once its members are read and
// before its model is resolved: under a split canary the canary's sessions are served by the canary's
// view of the deployment (armChoice.serve); under a shadow canary the primary answers and the copy to
// make is noted. Without a canary the choice is empty; a shadow copy keeps the one its primary made.
//
// A call on a surface the canary's target cannot serve (canaryServes) is the primary's: answered and
// recorded as the primary's arm under a split canary, copied to no shadow, so that a canary never turns
// a call the endpoint serves into a 404. A session uses one surface, so it still keeps one arm.
func (h *Handler) pickArm(x *exchange, fields map[string]json.RawMessage) armChoice {
	c := x.d.Canary
	if c == nil || x.svcCopy() {
		return x.canary
	}
	choice := armChoice{arm: edgemodel.ArmPrimary, target: x.d.Served(), canaryID: c.ID}
	if !h.canaryServes(c.Deployment, x.route) {
		return choice
	}
	switch c.Mode {
	case edgemodel.CanaryShadow:
		if shadowRoutes[x.route] {
			choice.shadow = c.Deployment
		}
	default:
		var root map[string]json.RawMessage
		if x.route == "/v1/responses" && !hasSessionHeader(x.r.Header) {
			root, choice.chain, choice.chainOf = h.chainRoot(x, fields)
		}
		if edgemodel.ArmOf(edgemodel.SessionOf(x.r.Header, fields, root), c.Percent) == edgemodel.ArmCanary {
			choice.serve, choice.arm, choice.target = c.Deployment, edgemodel.ArmCanary, c.Deployment.Served()
		}
	}
	return choice
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
// request continues, which keys the whole chain's session (its later requests carry only new turns),
// and the chain read (turns, of the id previous), for the request's own translation to reuse; nil when
// it continues none, or the chain cannot be read here (the request then fails, or is passed through,
// as without a canary).
func (h *Handler) chainRoot(x *exchange, fields map[string]json.RawMessage) (root map[string]json.RawMessage, turns []translate.Turn, previous string) {
	previous = translate.PreviousResponseIDOf(fields)
	if previous == "" {
		return nil, nil, ""
	}
	turns, e := h.previous(x, previous)
	if e != nil || len(turns) == 0 {
		return nil, nil, ""
	}
	root, _ = bodyFields(turns[0].Request)
	return root, turns, previous
}
