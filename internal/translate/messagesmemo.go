package translate

import (
	"encoding/json"
	"slices"

	"github.com/svcdev/svc/internal/bytememo"
	"github.com/svcdev/svc/internal/conv"
)

// Claude Code sends its whole conversation on every turn, the last turn's messages and a few new
// ones, and reading them again was a large part of what a translated Messages request cost beyond a
// relayed chat request, the more so the longer the session. As for the Responses input (inputmemo.go), a translation keeps where the messages of
// its last requests left it (messagesRead), under the messages array's bytes up to the end of the
// last entry, and a request whose messages begin with those bytes takes up from there and reads only
// the entries after them. What it takes is what reading the entries would have given:
// TestMessagesMemoReadsAsTheEntries holds the two together.

// messagesRead is the state of a Messages translation after entries of its messages array
// ((*translator).messages' walk), counted from the first entry. Never modified once kept: its slices
// are clipped, so that a translation that takes them up and appends to them appends to a copy.
type messagesRead struct {
	secret   string         // Options.Secret, which the thinking blocks' signatures were checked with
	out      []conv.Message // the messages made; none is changed once appended
	pending  []string       // tool_use ids of the last assistant message awaiting their tool_result (read only)
	deferred []conv.Message // system messages met while pending waits
	prefill  bool           // the last entry is an assistant message
	last     int            // the index of the last non-system entry, -1 when none
	chars    int            // counted from the first entry
	ignored  []string       // the names the entries ignored, in the order met
}

// The messages of the last requests, bounded as the Responses input items are.
var messagesInputs = bytememo.NewPrefixed[*messagesRead](memoInputs, memoInputBytes, memoPerHead)

// resumeMessages returns the state kept for the longest run of entries that begins raw under the
// translation's secret, how many entries it covers and where the last of them ends in raw; a state of
// no entry (and 0, 0) when none is kept.
func (t *translator) resumeMessages(raw json.RawMessage) (messagesRead, int, int) {
	r, n, end := messagesInputs.Longest(raw, func(r *messagesRead) bool { return r.secret == string(t.opts.Secret) })
	if end == 0 {
		return messagesRead{last: -1}, 0, 0
	}
	return *r, n, end
}

// keepMessages keeps st, the state after the entries of raw, count of them, the last of which ends
// at end, with chars and ignored counted since the first entry. The translation changes none of its
// slices after its last entry (the request's messages are a copy of out), so they are kept as they
// are, clipped.
func (t *translator) keepMessages(raw json.RawMessage, count, end int, st messagesRead, chars int, ignored []string) {
	st.secret, st.chars, st.ignored = string(t.opts.Secret), chars, slices.Clip(ignored)
	st.out, st.pending, st.deferred = slices.Clip(st.out), slices.Clip(st.pending), slices.Clip(st.deferred)
	messagesInputs.Put(raw[:end], count, end, &st)
}
