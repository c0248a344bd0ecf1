package edge

import (
	"encoding/json"
	"net/http"
	"time"
)

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// models lists the pinned model of a single-target endpoint, or every public model of a multi-model
// one: in the OpenAI list format, or in Anthropic's when the caller sends anthropic-version (as
// Anthropic's SDKs and Claude Code do), so that each client reads its own shape.
//
// "created" is when the model became available at this URL: the deployment's creation for a pinned
// model, the moment the catalog was loaded for the models of a multi-model endpoint.
func (h *Handler) models(x *exchange) {
	list := modelList{Object: "list", Data: []modelObject{}}
	if x.d.BaseModel != "" {
		list.Data = append(list.Data, modelObject{ID: x.d.Served(), Object: "model", Created: x.d.CreatedAt.Unix(), OwnedBy: "svc"})
	} else {
		for _, m := range h.rt.Models() {
			if m.Public {
				list.Data = append(list.Data, modelObject{ID: m.ID, Object: "model", Created: h.started.Unix(), OwnedBy: "svc"})
			}
		}
	}
	var b []byte
	if anthropicCaller(x.r) {
		al := anthropicModelList{Data: make([]anthropicModel, len(list.Data))}
		for i, m := range list.Data {
			al.Data[i] = anthropicModelOf(m)
		}
		if n := len(al.Data); n > 0 {
			al.FirstID, al.LastID = &al.Data[0].ID, &al.Data[n-1].ID
		}
		b, _ = json.Marshal(al)
	} else {
		b, _ = json.Marshal(list)
	}
	writeJSON(x.w, http.StatusOK, b)
	x.ok(nil)
}

// anthropicCaller tells an Anthropic client: its SDKs send anthropic-version on every request.
func anthropicCaller(r *http.Request) bool { return r.Header.Get("Anthropic-Version") != "" }

// anthropicModel is a model in Anthropic's Models API shape.
type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// anthropicModelList is Anthropic's page of models; svc's list is always one page.
type anthropicModelList struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

func anthropicModelOf(m modelObject) anthropicModel {
	return anthropicModel{Type: "model", ID: m.ID, DisplayName: m.ID, CreatedAt: time.Unix(m.Created, 0).UTC().Format(time.RFC3339)}
}
