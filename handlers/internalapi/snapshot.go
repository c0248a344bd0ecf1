package internalapi

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgewire"
)

// snapshot answers GET deployments/{slug}: the deployment with its enabled key hashes, or 404 when the
// slug serves nothing. Both carry the feed head in Svc-Change-Id.
func (h *Handler) snapshot(w http.ResponseWriter, r *http.Request, slug string) {
	snap, err := h.svc.EdgeSnapshot(r.Context(), slug)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set(edgewire.ChangeIDHeader, strconv.FormatInt(snap.ChangeID, 10))
	w.Header().Set("Cache-Control", "no-store")
	if snap.Deployment == nil {
		apierr.WriteAPI(w, edgemodel.CodeNotFound, "no endpoint is served at this slug")
		return
	}
	if snap.Disabled {
		envelope := apierr.API{Status: http.StatusNotFound, Code: edgemodel.CodeNotFound, Message: "no endpoint is served at this slug"}.JSON()
		var e struct{ Error json.RawMessage }
		_ = json.Unmarshal(envelope, &e)
		b, err := json.Marshal(edgewire.Disabled{Error: e.Error, Disabled: deploymentWire(snap)})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write(append(b, '\n'))
		return
	}
	b, err := json.Marshal(edgewire.Snapshot{ChangeID: snap.ChangeID, Deployment: deploymentWire(snap)})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(b, '\n'))
}

func deploymentWire(snap *core.EdgeSnapshot) edgewire.Deployment {
	d := snap.Deployment
	out := edgewire.Deployment{
		ID: d.ID, Slug: d.Slug, ProjectID: d.ProjectID,
		Target:    edgewire.Target{Kind: d.Target.Kind, JobID: d.Target.JobID, Step: d.Target.Step, Model: d.Target.Model},
		BaseModel: d.BaseModel, Adapter: d.Adapter, AdapterName: d.AdapterName, AuthMode: d.AuthMode,
		RunRetentionMode: d.Retention.Mode, RunRetentionDays: d.Retention.Days, CreatedAt: d.CreatedAt,
		Limits: limitsWire(d.Limits), Budget: budgetWire(d.Budget), QueueTimeoutMs: d.QueueTimeout.Milliseconds(), Keys: make([]edgewire.Key, len(snap.Keys)),
	}
	if t := d.ExpiresAt(); !t.IsZero() {
		out.ExpiresAt = &t
	}
	if c := d.Canary; c != nil {
		a := c.Deployment
		out.Canary = &edgewire.Canary{ID: c.ID, Percent: c.Percent, Mode: c.Mode,
			Target:    edgewire.Target{Kind: a.Target.Kind, JobID: a.Target.JobID, Step: a.Target.Step, Model: a.Target.Model},
			BaseModel: a.BaseModel, Adapter: a.Adapter, AdapterName: a.AdapterName}
	}
	for i, k := range snap.Keys {
		out.Keys[i] = edgewire.Key{ID: k.ID, Hash: hex.EncodeToString(k.Hash[:]), Limits: limitsWire(k.Limits), Budget: budgetWire(k.Budget), Weight: k.Weight}
	}
	return out
}

func budgetWire(b *edgemodel.Budget) *edgewire.Budget {
	if b == nil {
		return nil
	}
	return &edgewire.Budget{Tokens: b.Tokens, Period: b.Period}
}

func limitsWire(l edgemodel.RateLimits) edgewire.Limits {
	return edgewire.Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute}
}
