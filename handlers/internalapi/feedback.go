package internalapi

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/edgewire"
)

// maxFeedbackBytes bounds POST feedback's body: an id and a comment of at most
// core.MaxFeedbackComment characters (4 bytes each at most), with room to spare.
const maxFeedbackBytes = 64 << 10

// feedback answers POST feedback: the feedback an app sent an svc edge process, stored as the control
// plane's own edge stores it (core.Service.EdgeFeedback). A run that is not the deployment's to score
// is 404 with Svc-Not-Found: run.
func (h *Handler) feedback(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxFeedbackBytes+1))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var f edgewire.Feedback
	if len(raw) > maxFeedbackBytes || json.Unmarshal(raw, &f) != nil || f.DeploymentID == "" {
		h.fail(w, r, &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: "a feedback body is {deploymentId, id, score, comment?}"})
		return
	}
	if err := h.svc.EdgeFeedback(r.Context(), f.DeploymentID, f.ID, f.Score, f.Comment); err != nil {
		if edgemodel.CodeOf(err) == edgemodel.CodeNotFound {
			w.Header().Set(edgewire.NotFoundHeader, "run")
		}
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
