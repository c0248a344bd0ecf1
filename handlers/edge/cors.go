package edge

import (
	"net/http"
	"strings"
)

// cors answers browsers calling endpoints from the origins the operator allowed (--edge-cors-origins).
// Off unless configured; it applies to edge routes only.
type cors struct {
	any     bool
	origins map[string]bool
}

func newCORS(origins []string) *cors {
	c := &cors{origins: map[string]bool{}}
	for _, o := range origins {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		switch o {
		case "":
		case "*":
			c.any = true
		default:
			c.origins[strings.ToLower(o)] = true
		}
	}
	if !c.any && len(c.origins) == 0 {
		return nil
	}
	return c
}

// exposed are the answer headers a browser script may read: ids and rate-limit state.
const exposed = "X-Request-Id, X-Upstream-Request-Id, Retry-After, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, " +
	"x-ratelimit-reset-requests, x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens"

// handle adds the CORS headers for an allowed origin and answers preflights; it reports whether the
// request was a preflight it answered.
func (c *cors) handle(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if c == nil || origin == "" || !(c.any || c.origins[strings.ToLower(origin)]) {
		return false
	}
	h := w.Header()
	if c.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Expose-Headers", exposed)
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	// Authorization is never covered by a "*" wildcard: the headers asked for are named back.
	if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
		h.Set("Access-Control-Allow-Headers", asked)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}
