package translate

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/svcdev/svc/internal/conv"
)

// An agent sends the same tools on every request of a session (Claude Code's 5 KB of them, Codex's),
// and their translation was a third of a translated request's work: a translation keeps the tools it
// read lately (toolMemo) and takes them from there when the request's tools are byte for byte the same.
// A request whose tools are refused is translated again each time (errors are not kept).

// toolsRead is what reading a request's tools gives: the tools offered to the chat model, written as
// the chat request's member (json.Marshal's bytes, appendTools), what the translation notes (the size
// the prompt estimate counts, the fields named ignored), and what the surface keeps of the names.
// Shared between requests: never modified once kept.
type toolsRead[N any] struct {
	raw     []byte // the request's tools as sent (the key, compared whole)
	tools   []conv.Tool
	encoded []byte
	chars   int
	ignored []string
	names   N
}

// toolMemo keeps the tools of the last requests (at most memoTools of them, memoToolBytes in all).
type toolMemo[N any] struct {
	seed  maphash.Seed
	mu    sync.Mutex
	byKey map[uint64]*toolsRead[N]
	order []uint64 // oldest first
	bytes int
}

const (
	memoTools     = 64
	memoToolBytes = 8 << 20
)

func newToolMemo[N any]() *toolMemo[N] {
	return &toolMemo[N]{seed: maphash.MakeSeed(), byKey: map[uint64]*toolsRead[N]{}}
}

// get returns the tools read from raw before, or nil.
func (m *toolMemo[N]) get(raw []byte) (*toolsRead[N], uint64) {
	key := maphash.Bytes(m.seed, raw)
	m.mu.Lock()
	r := m.byKey[key]
	m.mu.Unlock()
	if r != nil && bytes.Equal(r.raw, raw) {
		return r, key
	}
	return nil, key
}

// put keeps r under key (get's), forgetting the oldest past the bounds.
func (m *toolMemo[N]) put(key uint64, r *toolsRead[N]) {
	size := len(r.raw) + len(r.encoded)
	if size > memoToolBytes/4 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.byKey[key]; ok {
		m.bytes -= len(old.raw) + len(old.encoded)
	} else {
		m.order = append(m.order, key)
	}
	m.byKey[key] = r
	m.bytes += size
	for len(m.order) > 0 && (len(m.order) > memoTools || m.bytes > memoToolBytes) {
		old := m.byKey[m.order[0]]
		m.bytes -= len(old.raw) + len(old.encoded)
		delete(m.byKey, m.order[0])
		m.order = m.order[1:]
	}
}

// use puts the kept tools into the request being translated.
func (r *toolsRead[N]) use(out *chatRequest, chars *int, info *RequestInfo) {
	out.Tools = r.tools[:len(r.tools):len(r.tools)]
	*chars += r.chars
	for _, n := range r.ignored {
		info.ignore(n)
	}
}
