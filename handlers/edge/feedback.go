package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/strictjson"
)

// POST /v1/feedback (docs/API.md, "Feedback"): an app scores an answer it got, with the endpoint's
// key, naming it by the id it got (a chat completion, message or response id: all are run ids). The
// edge judges the body and hands the feedback to its FeedbackWriter; which runs may be scored is
// core's rule (core.Service.EdgeFeedback), asked on the control plane by svc edge processes.

// FeedbackWriter stores feedback on a run of a deployment: core's on svc server, an svc edge process's
// cache (edgesync.Cache), which sends it to its control plane. A run that is not the deployment's to
// score is a not-found error; a control plane out of reach, an unavailable one.
type FeedbackWriter interface {
	EdgeFeedback(ctx context.Context, deploymentID, id string, score int, comment string) error
}

// feedbackBody is the body of POST /v1/feedback.
type feedbackBody struct {
	ID      *string `json:"id"`
	Score   *int    `json:"score"`
	Comment *string `json:"comment"`
}

// feedbackAnswer is what an accepted feedback answers.
type feedbackAnswer struct {
	Object  string `json:"object"`
	ID      string `json:"id"`
	Score   int    `json:"score"`
	Comment string `json:"comment,omitempty"`
}

// feedbackNotFound is the one answer to an id of no run this endpoint may score: unknown, another
// endpoint's, never stored (retention none) or expired, alike.
var feedbackNotFound = &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", param: "id",
	message: "no run of this endpoint has this id (runs are kept as the endpoint's retention says; with retention none, none are)"}

// MaxFeedbackBody caps a feedback's body: room for the longest comment (edgemodel.MaxFeedbackComment
// characters, each at most 12 bytes as JSON escapes) and the id, far below the 4 MiB of an inference
// call, so that a key cannot make the edge read megabytes per score.
const MaxFeedbackBody = 64 << 10

var feedbackTooLarge = &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "body_too_large", param: "comment",
	message: fmt.Sprintf("a feedback body is at most %d KiB; its comment at most %d characters", MaxFeedbackBody>>10, edgemodel.MaxFeedbackComment)}

func (h *Handler) feedback(x *exchange) {
	body, e := readBodyUpTo(x.w, x.r, MaxFeedbackBody, feedbackTooLarge)
	if e != nil {
		x.fail(e)
		return
	}
	var in feedbackBody
	if err := strictjson.Decode(body, &in); err != nil {
		field := ""
		if se, ok := err.(*strictjson.Error); ok {
			field = se.Field
		}
		x.fail(badRequest(field, "invalid feedback body: "+err.Error()))
		return
	}
	switch {
	case in.ID == nil || *in.ID == "":
		x.fail(badRequest("id", "id is required: the id of the chat completion, message or response the endpoint answered"))
		return
	case in.Score == nil:
		x.fail(badRequest("score", "score is required: -1, 0 or 1"))
		return
	}
	comment := ""
	if in.Comment != nil {
		comment = *in.Comment
	}
	if field, msg := edgemodel.FeedbackProblem(*in.Score, comment); msg != "" {
		x.fail(badRequest(field, msg))
		return
	}
	id := *in.ID
	if runID, ok := h.passed.get(x.d.ID, id); ok {
		id = runID // a passed-through response this process answered: its run, waited for if not yet written
	}
	if err := h.svc.EdgeFeedback(x.r.Context(), x.d.ID, id, *in.Score, comment); err != nil {
		switch edgemodel.CodeOf(err) {
		case edgemodel.CodeNotFound:
			x.fail(feedbackNotFound)
		case edgemodel.CodeInvalidRequest:
			var ee *edgemodel.Error
			errors.As(err, &ee)
			x.fail(badRequest("", ee.Message))
		case edgemodel.CodeUnavailable:
			x.fail(unavailable(err))
		default:
			x.fail(internalError(err))
		}
		return
	}
	out, _ := json.Marshal(feedbackAnswer{Object: "feedback", ID: *in.ID, Score: *in.Score, Comment: comment})
	writeJSON(x.w, http.StatusOK, out)
	x.ok(nil)
}

// passedResponses maps the upstream's ids of the latest passed-through Responses answers of this process
// (at most maxPassed) to their runs, so that feedback sent as soon as the answer came finds its run
// before it is written (or shipped, on svc edge): the store finds the id only once the run is there.
type passedResponses struct {
	mu    sync.Mutex
	runOf map[string]string // deployment id + "/" + upstream response id → run id
	order []string          // oldest first
}

// maxPassed bounds the passed-through responses remembered.
const maxPassed = 4096

func (p *passedResponses) put(deploymentID, upstreamID, runID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runOf == nil {
		p.runOf = map[string]string{}
	}
	key := deploymentID + "/" + upstreamID
	if _, ok := p.runOf[key]; !ok {
		p.order = append(p.order, key)
	}
	p.runOf[key] = runID
	for len(p.order) > maxPassed {
		delete(p.runOf, p.order[0])
		p.order = p.order[1:]
	}
}

func (p *passedResponses) get(deploymentID, upstreamID string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	runID, ok := p.runOf[deploymentID+"/"+upstreamID]
	return runID, ok
}
