package api

import (
	"bytes"
	"encoding/json"

	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/strictjson"
)

// queueTimeoutNullable is the path where a deployment's PATCH may send null: the model's queueTimeoutMs
// again (docs/API.md, "Admission").
const queueTimeoutNullable = "queueTimeoutMs"

// queueTimeoutBody is the "queueTimeoutMs" field of a deployment's PATCH: absent leaves it, null clears
// it (the model's), a number sets it (core.ValidateQueueTimeout judges it).
type queueTimeoutBody struct {
	change core.LimitChange
}

func (q *queueTimeoutBody) UnmarshalJSON(b []byte) error {
	q.change = core.LimitChange{Set: true}
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return &strictjson.Error{Field: "queueTimeoutMs", Reason: "must be a whole number of milliseconds, or null for the model's"}
	}
	q.change.Value = &n
	return nil
}
