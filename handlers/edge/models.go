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
func (h *Handler) models(w http.ResponseWriter, r *http.Request, req *request) {
	list := modelList{Object: "list", Data: []modelObject{}}
	if req.d.BaseModel != "" {
		list.Data = append(list.Data, modelObject{ID: req.d.Served(), Object: "model", OwnedBy: "svc"})
	} else {
		for _, m := range h.rt.Models() {
			if m.Public {
				list.Data = append(list.Data, modelObject{ID: m.ID, Object: "model", OwnedBy: "svc"})
			}
		}
	}
	b, _ := json.Marshal(list)
	writeJSON(w, http.StatusOK, b)
}
