package runs

import "strings"

// The ids a caller gets are its run's id (docs/API.md, "Ids are run ids"): a chat completion's id is
// chatcmpl- and the run id's tail, an Anthropic message's msg- and the tail (translated from that
// completion), a translated response's resp_ and the tail. Feedback names a run by any of them.

// Tail is a run id without its run_ prefix.
func Tail(runID string) string { return strings.TrimPrefix(runID, "run_") }

// CompletionID is the id of the chat completion a run answered.
func CompletionID(runID string) string { return "chatcmpl-" + Tail(runID) }

// MessageID is the id of the Anthropic message a run answered (a translated one is named after its
// chat completion, which gives the same).
func MessageID(runID string) string { return "msg_" + Tail(runID) }

// ResponseID is the id of the translated response a run answered.
func ResponseID(runID string) string { return "resp_" + Tail(runID) }

// idPrefixes are the prefixes of the ids made of a run id, the run's own first.
var idPrefixes = []string{"run_", "chatcmpl-", "msg_", "resp_"}

// IDOf is the run id an id a caller got names (a run id, or a completion, message or response id made
// of one), and whether it has that form: a known prefix and a tail of 1-64 letters and digits.
func IDOf(id string) (string, bool) {
	for _, p := range idPrefixes {
		tail, ok := strings.CutPrefix(id, p)
		if !ok {
			continue
		}
		if tail == "" || len(tail) > 64 {
			return "", false
		}
		for _, c := range []byte(tail) {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return "", false
			}
		}
		return "run_" + tail, true
	}
	return "", false
}
