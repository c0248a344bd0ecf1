package translate

import "encoding/json"

// Shorthands that only the tests use.

// TokenizeCount reads the count of a vLLM /tokenize answer ({"count": N, "tokens": [...],
// "max_model_len": M}); ok is false when the answer holds no count.
func TokenizeCount(answer []byte) (count int, ok bool) {
	var r struct {
		Count *int `json:"count"`
	}
	if json.Unmarshal(answer, &r) != nil || r.Count == nil || *r.Count < 0 {
		return 0, false
	}
	return *r.Count, true
}
