package edge

import (
	"encoding/json"
	"net/http"
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
// one, in the OpenAI list format.
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
	b, _ := json.Marshal(list)
	writeJSON(x.w, http.StatusOK, b)
	x.ok(nil)
}
