package internalapi

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// runs applies a batch of runs and key uses shipped by an edge, once however often it is sent.
func (h *Handler) runs(w http.ResponseWriter, r *http.Request, tok core.EdgeToken) {
	var body io.Reader = http.MaxBytesReader(w, r.Body, edgewire.MaxRunBatchBytes)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(body)
		if err != nil {
			apierr.WriteAPI(w, core.CodeInvalidRequest, "the body is not valid gzip")
			return
		}
		defer zr.Close()
		// The cap applies to what the body inflates to as well.
		body = io.LimitReader(zr, edgewire.MaxRunBatchBytes+1)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			apierr.WriteAPI(w, apierr.CodeBodyTooLarge, fmt.Sprintf("a run batch is at most %d MiB", edgewire.MaxRunBatchBytes>>20))
			return
		}
		apierr.WriteAPI(w, core.CodeInvalidRequest, "could not read the body")
		return
	}
	if len(data) > edgewire.MaxRunBatchBytes {
		apierr.WriteAPI(w, apierr.CodeBodyTooLarge, fmt.Sprintf("a run batch is at most %d MiB", edgewire.MaxRunBatchBytes>>20))
		return
	}
	// Unknown fields are ignored rather than refused: during a rolling upgrade a newer edge may send
	// more than this control plane knows.
	var in edgewire.RunBatch
	if err := json.Unmarshal(data, &in); err != nil {
		apierr.WriteAPI(w, core.CodeInvalidRequest, "the body is not a run batch: "+err.Error())
		return
	}
	batch, err := batchOf(in)
	if err != nil {
		apierr.WriteAPI(w, core.CodeInvalidRequest, err.Error())
		return
	}
	res, err := h.svc.IngestRuns(r.Context(), batch)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if res.Rejected > 0 {
		h.log.Info("edge runs of deleted deployments dropped", "edge_token", tok.Name, "runs", res.Rejected)
	}
	b, _ := json.Marshal(edgewire.RunBatchResult{Inserted: res.Inserted, UsageOnly: res.UsageOnly, Duplicates: res.Duplicates, Rejected: res.Rejected, Replayed: res.Replayed})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(b, '\n'))
}

// batchOf checks a shipped batch and turns it into core's form.
func batchOf(in edgewire.RunBatch) (runs.Batch, error) {
	out := runs.Batch{ID: in.BatchID, Runs: make([]runs.Shipped, 0, len(in.Runs)), Touches: make(map[string]time.Time, len(in.Touches))}
	if in.BatchID == "" || len(in.BatchID) > 100 {
		return out, errors.New("batchId is required (at most 100 characters)")
	}
	for i, r := range in.Runs {
		switch {
		case r.ID == "" || len(r.ID) > 100:
			return out, fmt.Errorf("runs[%d].id is required (at most 100 characters)", i)
		case r.DeploymentID == "":
			return out, fmt.Errorf("runs[%d].deploymentId is required", i)
		case r.Status != "ok" && r.Status != "error":
			return out, fmt.Errorf("runs[%d].status must be \"ok\" or \"error\"", i)
		case r.CreatedAt.IsZero():
			return out, fmt.Errorf("runs[%d].createdAt is required", i)
		case r.TraceID != "" && !isTraceID(r.TraceID):
			return out, fmt.Errorf("runs[%d].traceId is a trace id of 32 hex digits, or empty", i)
		}
		run := runs.Shipped{ID: r.ID, Run: runs.Run{
			DeploymentID: r.DeploymentID, KeyID: r.KeyID, Model: r.Model, Status: r.Status,
			StatusCode: r.StatusCode, ErrorCode: r.ErrorCode, Latency: time.Duration(r.LatencyMs) * time.Millisecond, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			CreatedAt: r.CreatedAt, Request: []byte(r.Request), Response: []byte(r.Response),
			RequestID: r.RequestID, UpstreamRequestID: r.UpstreamRequestID, TraceID: r.TraceID, UsageOnly: r.UsageOnly,
		}}
		if r.ExpiresAt != nil {
			run.ExpiresAt = *r.ExpiresAt
		}
		out.Runs = append(out.Runs, run)
	}
	for i, t := range in.Touches {
		if t.KeyID == "" || t.UsedAt.IsZero() {
			return out, fmt.Errorf("touches[%d] needs keyId and usedAt", i)
		}
		if t.UsedAt.After(out.Touches[t.KeyID]) {
			out.Touches[t.KeyID] = t.UsedAt
		}
	}
	return out, nil
}

// isTraceID reports whether s is a W3C trace id: 32 lowercase hex digits.
func isTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
