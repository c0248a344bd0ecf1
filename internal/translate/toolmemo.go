package translate

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/svcdev/svc/internal/conv"
)

// An agent sends the same tools on every request of a session (Claude Code's 5 KB of them, Codex's),
// and their translation was a third of a translated request's work: a translation keeps the tools it
// read lately (a memo of toolsRead) and takes them from there when the request's tools are byte for
// byte the same. An agent also sends its whole conversation again on every turn, the last turn's
// items and a few new ones: a Responses translation keeps what the input items of its last requests
// made (inputmemo.go). A request whose tools or items are refused is translated again each time
// (errors are not kept).

// memo keeps values made from a request's bytes, under those bytes (compared whole: a hash that
// matches is never enough), at most entries of them and size bytes in all (as put counts them),
// forgetting the oldest first. Its values are shared between requests: never modified once kept.
type memo[V any] struct {
	seed    maphash.Seed
	entries int
	size    int
	mu      sync.Mutex
	byKey   map[uint64]*kept[V]
	order   []uint64 // oldest first
	bytes   int
}

type kept[V any] struct {
	raw  []byte
	size int
	v    V
}

func newMemo[V any](entries, size int) *memo[V] {
	return &memo[V]{seed: maphash.MakeSeed(), entries: entries, size: size, byKey: map[uint64]*kept[V]{}}
}

// get returns the value kept for raw, and raw's key for put.
func (m *memo[V]) get(raw []byte) (v V, key uint64, ok bool) {
	key = maphash.Bytes(m.seed, raw)
	v, ok = m.at(key, raw)
	return v, key, ok
}

// at returns the value kept for raw, whose key (maphash.Bytes with m.seed, or a maphash.Hash with it
// that was written raw) the caller has.
func (m *memo[V]) at(key uint64, raw []byte) (v V, ok bool) {
	m.mu.Lock()
	k := m.byKey[key]
	m.mu.Unlock()
	if k != nil && bytes.Equal(k.raw, raw) {
		return k.v, true
	}
	return v, false
}

// longest returns the value kept for the longest prefix raw[:ends[k]] (keys[k] its key) that take
// accepts, and k+1, how many of raw's items it covers; 0 when none is kept.
func (m *memo[V]) longest(raw []byte, ends []int, keys []uint64, take func(V) bool) (v V, n int) {
	for k := len(keys) - 1; k >= 0; k-- {
		if v, ok := m.at(keys[k], raw[:ends[k]]); ok && take(v) {
			return v, k + 1
		}
	}
	return v, 0
}

// put keeps v under raw (a copy of which it keeps) and key (get's), counted as size bytes with raw,
// forgetting the oldest past the bounds; a value of over a quarter of the bytes is not kept.
func (m *memo[V]) put(key uint64, raw []byte, size int, v V) {
	size += len(raw)
	if size > m.size/4 {
		return
	}
	k := &kept[V]{raw: bytes.Clone(raw), size: size, v: v}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.byKey[key]; ok {
		m.bytes -= old.size
	} else {
		m.order = append(m.order, key)
	}
	m.byKey[key] = k
	m.bytes += size
	for len(m.order) > 0 && (len(m.order) > m.entries || m.bytes > m.size) {
		m.bytes -= m.byKey[m.order[0]].size
		delete(m.byKey, m.order[0])
		m.order = m.order[1:]
	}
}

// toolsRead is what reading a request's tools gives: the tools offered to the chat model, written as
// the chat request's member (json.Marshal's bytes, appendTools), what the translation notes (the size
// the prompt estimate counts, the fields named ignored), and what the surface keeps of the names.
type toolsRead[N any] struct {
	tools   []conv.Tool
	encoded []byte
	chars   int
	ignored []string
	names   N
}

// The tools of the last requests: at most memoTools of them, memoToolBytes in all.
const (
	memoTools     = 64
	memoToolBytes = 8 << 20
)

func newToolMemo[N any]() *memo[*toolsRead[N]] {
	return newMemo[*toolsRead[N]](memoTools, memoToolBytes)
}

// use puts the kept tools into the request being translated.
func (r *toolsRead[N]) use(out *chatRequest, chars *int, info *RequestInfo) {
	out.Tools = r.tools[:len(r.tools):len(r.tools)]
	*chars += r.chars
	for _, n := range r.ignored {
		info.ignore(n)
	}
}
