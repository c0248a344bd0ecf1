// Package bytememo keeps what was made of a request's bytes under those bytes, for the next request
// that sends them again (an agent resends its tools and its whole conversation on every turn).
package bytememo

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"sync"

	"github.com/svcdev/svc/internal/jsonx"
)

// Memo keeps values made from a request's bytes, under those bytes (compared whole: a hash that
// matches is never enough), at most entries of them and size bytes in all (as Put counts them),
// forgetting the oldest first. Its values are shared between requests: never modified once kept. It
// is safe for concurrent use.
type Memo[V any] struct {
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

// New returns a Memo of at most entries values and size bytes.
func New[V any](entries, size int) *Memo[V] {
	return &Memo[V]{seed: maphash.MakeSeed(), entries: entries, size: size, byKey: map[uint64]*kept[V]{}}
}

// Seed is the seed of the memo's keys (maphash), for Prefixes.
func (m *Memo[V]) Seed() maphash.Seed { return m.seed }

// Get returns the value kept for raw, and raw's key for Put.
func (m *Memo[V]) Get(raw []byte) (v V, key uint64, ok bool) {
	key = maphash.Bytes(m.seed, raw)
	v, ok = m.At(key, raw)
	return v, key, ok
}

// At returns the value kept for raw, whose key (maphash.Bytes with the memo's seed, or a maphash.Hash
// with it that was written raw) the caller has.
func (m *Memo[V]) At(key uint64, raw []byte) (v V, ok bool) {
	m.mu.Lock()
	k := m.byKey[key]
	m.mu.Unlock()
	if k != nil && bytes.Equal(k.raw, raw) {
		return k.v, true
	}
	return v, false
}

// Longest returns the value kept for the longest prefix raw[:ends[k]] (keys[k] its key, as Prefixes
// gives them) that take accepts, and k+1, how many of raw's items it covers; 0 when none is kept.
func (m *Memo[V]) Longest(raw []byte, ends []int, keys []uint64, take func(V) bool) (v V, n int) {
	for k := len(keys) - 1; k >= 0; k-- {
		if v, ok := m.At(keys[k], raw[:ends[k]]); ok && take(v) {
			return v, k + 1
		}
	}
	return v, 0
}

// Put keeps v under raw (a copy of which it keeps) and key (Get's), counted as size bytes with raw,
// forgetting the oldest past the bounds; a value of over a quarter of the bytes is not kept.
func (m *Memo[V]) Put(key uint64, raw []byte, size int, v V) {
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

// Prefixes returns the elements of the JSON array that begins raw (a Responses input, a request's
// messages; what follows the array is not read), where each ends in raw, and the keys of raw up to
// those ends under seed, for Longest; ok is false when raw begins with no well-formed array. It does
// not validate the elements: a reader that needs valid JSON checks them, or takes them from a memo
// that kept only what was valid.
func Prefixes(raw []byte, seed maphash.Seed) (items []json.RawMessage, ends []int, keys []uint64, ok bool) {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '[' {
		return nil, nil, nil, false
	}
	var h maphash.Hash
	h.SetSeed(seed)
	at := 0
	// Room for about as many items as an agent's turn holds for its size (appending one by one grew
	// each of the three slices about eight times a request).
	n := min(len(raw)/256+8, 4096)
	items, ends, keys = make([]json.RawMessage, 0, n), make([]int, 0, n), make([]uint64, 0, n)
	c.Array(func() {
		s, end := c.Span()
		if s < 0 {
			return
		}
		items, ends = append(items, raw[s:end:end]), append(ends, end)
		h.Write(raw[at:end])
		keys, at = append(keys, h.Sum64()), end
	})
	return items, ends, keys, !c.Bad()
}
