package edgemodel

import (
	"encoding/json"
	"hash/fnv"
	"net/http"

	"github.com/svcdev/svc/internal/conv"
)

// Canary modes (docs/API.md, "Canary").
const (
	// CanarySplit answers Percent of the sessions with the canary's target.
	CanarySplit = "split"
	// CanaryShadow answers every call with the primary and sends a copy to the canary, whose answer is
	// recorded and never returned.
	CanaryShadow = "shadow"
)

// The arms of a deployment with a canary, as its runs record them.
const (
	ArmPrimary = "primary"
	ArmCanary  = "canary"
	// ArmEval is the arm of an eval's replays (docs/API.md, "Evals"), whatever the deployment's canary.
	ArmEval = "eval"
)

// EdgeCanary is a deployment's canary as the edge serves it.
type EdgeCanary struct {
	ID      string // the canary's id, which its arms' runs record (so its compare counts its own calls)
	Percent int    // 1-99: the share of sessions (split) the canary answers
	Mode    string // CanarySplit or CanaryShadow
	// Deployment is the deployment as its canary arm serves it: the same id, keys, limits and retention,
	// the canary's target, base model and adapter.
	Deployment *EdgeDeployment
}

// SessionHeaders are the request headers that name an agent's session, read in this order (docs/API.md,
// "Canary"): Codex sends session_id, Claude Code X-Claude-Code-Session-Id; x-session-id is for
// anything else that wants to say it.
var SessionHeaders = []string{"Session_id", "X-Claude-Code-Session-Id", "X-Session-Id"}

// SessionOf is the key of the session a request belongs to, from which its arm follows (ArmOf): a
// session header (SessionHeaders), else the body's conversation (Responses' "conversation" or
// "prompt_cache_key"), else its user ("user", Messages' "metadata.user_id"), else the conversation's
// opening: the first system (or developer) message and the first user message, by their text. root,
// when not nil, is the members of the first request of a Responses previous_response_id chain, whose
// body keys the whole chain (its later requests carry only their new turns). The key is the same on
// every edge for every turn of a session: nothing in it is per process.
func SessionOf(h http.Header, fields, root map[string]json.RawMessage) string {
	for _, name := range SessionHeaders {
		if v := h.Get(name); v != "" {
			return "h:" + v
		}
	}
	if root != nil {
		fields = root
	}
	if v := idOf(fields["conversation"]); v != "" {
		return "c:" + v
	}
	if v := stringOf(fields["prompt_cache_key"]); v != "" {
		return "c:" + v
	}
	if v := stringOf(fields["user"]); v != "" {
		return "u:" + v
	}
	if raw := fields["metadata"]; len(raw) > 0 && raw[0] == '{' {
		var m struct {
			UserID json.RawMessage `json:"user_id"`
		}
		if json.Unmarshal(raw, &m) == nil {
			if v := stringOf(m.UserID); v != "" {
				return "u:" + v
			}
		}
	}
	return "m:" + conv.Opening(fields)
}

// ArmOf is the arm that answers a session under a split canary of percent: the session's bucket (0-99,
// from a hash with no per-process seed, so every edge agrees) is the canary's when below percent. Raising
// the percent only moves sessions from the primary to the canary, never back.
func ArmOf(session string, percent int) string {
	if Bucket(session) < percent {
		return ArmCanary
	}
	return ArmPrimary
}

// Bucket is a session's place among 100: FNV-1a over the key, then a 64-bit finaliser (splitmix64's) so
// that keys differing in their last byte spread over every bucket.
func Bucket(session string) int {
	h := fnv.New64a()
	h.Write([]byte(session))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % 100)
}

// idOf reads a string, or an object's "id" (Responses' conversation may be either).
func idOf(raw json.RawMessage) string {
	if len(raw) > 0 && raw[0] == '{' {
		var o struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(raw, &o) == nil {
			return stringOf(o.ID)
		}
		return ""
	}
	return stringOf(raw)
}

func stringOf(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
