package edgemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

func members(t *testing.T, body string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Every turn of a session keys the same, whatever the surface says it with; different sessions key
// apart.
func TestSessionOfKeysEveryTurnOfASessionAlike(t *testing.T) {
	none := http.Header{}
	codex := http.Header{"Session_id": {"0199-codex"}}
	claude := http.Header{"X-Claude-Code-Session-Id": {"cc-1"}}
	for _, tc := range []struct {
		name         string
		h1, h2       http.Header
		turn1, turn2 string
		root         string // the chain's first request, for turn2
		same         bool
	}{
		{"codex header beats the body", codex, codex, `{"input":"a"}`, `{"input":"b","user":"x"}`, "", true},
		{"claude code header", claude, claude, `{"messages":[{"role":"user","content":"a"}]}`, `{"messages":[{"role":"user","content":"z"}]}`, "", true},
		{"user", none, none, `{"user":"u1","messages":[{"role":"user","content":"a"}]}`, `{"user":"u1","messages":[{"role":"user","content":"b"}]}`, "", true},
		{"messages metadata.user_id", none, none, `{"metadata":{"user_id":"s1"},"messages":[{"role":"user","content":"a"}]}`, `{"metadata":{"user_id":"s1"},"messages":[]}`, "", true},
		{"responses conversation", none, none, `{"conversation":"conv_1","input":"a"}`, `{"conversation":{"id":"conv_1"},"input":"b"}`, "", true},
		{"chat opening, later turns added", none, none,
			`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`,
			`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"},{"role":"assistant","content":"hi"},{"role":"user","content":"more"}]}`, "", true},
		{"messages opening with a system prompt", none, none,
			`{"system":"sys","messages":[{"role":"user","content":"hello"}]}`,
			`{"system":"sys","messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"x"},{"role":"user","content":"y"}]}`, "", true},
		{"responses chain keyed by its first request", none, none,
			`{"instructions":"i","input":"first"}`, `{"previous_response_id":"resp_1","input":"second"}`, `{"instructions":"i","input":"first"}`, true},
		{"different users", none, none, `{"user":"a"}`, `{"user":"b"}`, "", false},
		{"different openings", none, none, `{"messages":[{"role":"user","content":"one"}]}`, `{"messages":[{"role":"user","content":"two"}]}`, "", false},
	} {
		var root map[string]json.RawMessage
		if tc.root != "" {
			root = members(t, tc.root)
		}
		k1, k2 := SessionOf(tc.h1, members(t, tc.turn1), nil), SessionOf(tc.h2, members(t, tc.turn2), root)
		if (k1 == k2) != tc.same {
			t.Errorf("%s: keys %q and %q, same=%v", tc.name, k1, k2, tc.same)
		}
	}
	// A client that keeps its form (all strings, or all parts) keys alike with moved cache marks.
	a := SessionOf(none, members(t, `{"messages":[{"role":"user","content":[{"type":"text","text":"hello","cache_control":{"type":"ephemeral"}}]}]}`), nil)
	b := SessionOf(none, members(t, `{"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]},{"role":"assistant","content":"x"}]}`), nil)
	if a != b {
		t.Fatalf("a moved cache_control changed the session: %q %q", a, b)
	}
}

// ArmOf sends percent of sessions to the canary, the same on every call (no per-process seed), and a
// raised percent only moves sessions to the canary.
func TestArmOfSplitsSessionsByPercent(t *testing.T) {
	const n = 20000
	for _, percent := range []int{1, 10, 30, 50, 99} {
		canary := 0
		for i := range n {
			s := fmt.Sprintf("u:session-%d", i)
			if ArmOf(s, percent) == ArmCanary {
				canary++
				if ArmOf(s, percent+1) != ArmCanary && percent < 99 {
					t.Fatalf("session %q left the canary when the percent rose to %d", s, percent+1)
				}
			}
		}
		if got := float64(canary) * 100 / n; got < float64(percent)-1.5 || got > float64(percent)+1.5 {
			t.Errorf("percent %d: %.2f%% of sessions on the canary", percent, got)
		}
	}
	// Pinned values: a change of the hash would move live sessions between arms on an upgrade.
	if b, e := Bucket("h:0199-codex"), Bucket(""); b != 93 || e != 3 {
		t.Fatalf("buckets moved: %d %d", b, e)
	}
}
