package translate

import (
	"encoding/json"

	"github.com/svcdev/svc/internal/bytememo"
	"github.com/svcdev/svc/internal/conv"
)

// Codex, the AI SDK and the Agents SDK send a Responses conversation whole on every turn: the last
// turn's input items, its answer's items and the new ones. Reading the items again was most of what
// a translated request cost beyond its relayed chat stream (docs/OPERATIONS.md, "Overhead"), so a
// translation keeps where the input items of its last requests left it (inputRead), under the input
// array's bytes up to the end of the last item, and a request whose input begins with those bytes
// takes up from there and reads only the items after them. What it takes is what reading the items
// would have given: TestInputMemoReadsAsTheItems holds the two together. The states are shared by
// every deployment of the process, as the tools are: one is taken up only by a request that sent the
// same bytes, and tells it nothing it did not send (but for how soon it is answered).

// inputRead is the state of a Responses translation after its input items (rtranslator's), the
// messages they made counted from the first of them. Never modified once kept: a translation that
// takes it up copies what it goes on changing.
type inputRead struct {
	secret    string // Options.Secret, which the reasoning items' signatures were checked with
	out       []conv.Message
	asst      int // in out, -1 when none
	reasoning []string
	calls     map[string]bool
	waiting   []string
	deferred  []conv.Message
	images    []conv.Part
	chars     int
	ignored   []string
}

// The input items of the last requests: at most memoInputs states, memoInputBytes in all (each
// counted as twice its items' bytes, what it keeps of them being their text), one of at most a
// quarter of that.
const (
	memoInputs     = 256
	memoInputBytes = 32 << 20
)

var responsesInputs = bytememo.NewPrefixed[*inputRead](memoInputs, memoInputBytes, memoPerHead)

// memoPerHead is how many states are kept for inputs that begin alike (sessions of one agent, whose
// first items are its instructions).
const memoPerHead = 64

// resume takes up the state kept for the longest run of items that begins raw, if any, and returns
// how many items it covers and where the last of them ends in raw (0, 0 when none).
func (t *rtranslator) resume(raw json.RawMessage) (items, end int) {
	r, n, end := responsesInputs.Longest(raw, func(r *inputRead) bool { return r.secret == string(t.opts.Secret) })
	if end == 0 {
		return 0, 0
	}
	base := len(t.out)
	t.out = append(t.out, r.out...)
	if r.asst >= 0 {
		t.asst = base + r.asst
	}
	t.reasoning, t.seen, t.waiting = r.reasoning, r.calls, append([]string(nil), r.waiting...)
	t.deferred, t.images = r.deferred, r.images
	t.chars += r.chars
	for _, n := range r.ignored {
		t.info.ignore(n)
	}
	return n, end
}

// keep keeps the state after the items of raw, count of them, the last of which ends at end, the
// items' messages beginning at base in out, chars and ignored counted since the first item.
func (t *rtranslator) keep(raw json.RawMessage, count, end, base, chars int, ignored []string) {
	r := &inputRead{secret: string(t.opts.Secret), out: clipped(t.out[base:]), asst: -1, reasoning: clip(t.reasoning),
		calls: make(map[string]bool, len(t.seen)+len(t.calls)), waiting: clip(t.waiting), deferred: clip(t.deferred),
		images: clip(t.images), chars: chars, ignored: clip(ignored)}
	if t.asst >= 0 {
		r.asst = t.asst - base
	}
	for id := range t.seen {
		r.calls[id] = true
	}
	for id := range t.calls {
		r.calls[id] = true
	}
	responsesInputs.Put(raw[:end], count, end, r)
}

// clipped copies msgs with their tool calls clipped, so that a message taken up and given another
// call copies its calls first.
func clipped(msgs []conv.Message) []conv.Message {
	out := make([]conv.Message, len(msgs))
	copy(out, msgs)
	for i := range out {
		out[i].ToolCalls = clip(out[i].ToolCalls)
	}
	return out
}

// clip is s copied with no room to spare (append's copy may have some), so that what is appended
// to either is not seen by the other.
func clip[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	c := make([]T, len(s))
	copy(c, s)
	return c
}
