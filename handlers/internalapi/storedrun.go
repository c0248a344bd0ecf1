package internalapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/edgewire"
)

// storedRunPath reports whether path is runs/{deploymentId}/{runId}: two non-empty segments.
func storedRunPath(path string) bool {
	rest, ok := strings.CutPrefix(path, edgewire.StoredRunsPath)
	if !ok {
		return false
	}
	dep, run, ok := strings.Cut(rest, "/")
	return ok && dep != "" && run != "" && !strings.Contains(run, "/")
}

// storedRun answers GET runs/{deploymentId}/{id}: the request and response the run recorded, named by
// its run id or an id its caller got (svc's response id, or a passed-through answer's upstream id), as
// core.Service.EdgeRun reads them for the control plane's own edge, so that an svc edge process answers
// previous_response_id and GET /v1/responses/{id} (and keeps a split canary's chains on their arm) as
// the control plane does. A run that is not stored
// (retention none, deleted, expired, another deployment's) is 404 with Svc-Not-Found: run.
func (h *Handler) storedRun(w http.ResponseWriter, r *http.Request, deploymentID, runID string) {
	req, resp, err := h.svc.EdgeRun(r.Context(), deploymentID, runID)
	if err != nil {
		if edgemodel.CodeOf(err) == edgemodel.CodeNotFound {
			w.Header().Set(edgewire.NotFoundHeader, "run")
		}
		h.fail(w, r, err)
		return
	}
	b, err := json.Marshal(edgewire.StoredRun{Request: string(req), Response: string(resp)})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(append(b, '\n'))
}
