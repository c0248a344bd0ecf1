// Package bytememo keeps what was made of a request's bytes under those bytes, for the next request
// that sends them again (an agent resends its tools and its whole conversation on every turn).
package bytememo

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

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

// Prefixed keeps values made from the first elements of a JSON array (a request's messages, a
// Responses input, tools), under the array's bytes as far as the last of them, and finds for an array
// the value kept for the longest run of its first elements, without telling its elements apart: the
// arrays are filed under their first HeadLen bytes (an agent's system prompt, its first tools), and an
// array is compared with the few filed under its own, the last bytes of each first (where a session's
// turns differ from another's), then whole, then for an element's end where they stop. At most
// entries of them, size bytes in all (as Put counts them) and perHead under one head (sessions that
// begin alike), the oldest forgotten first. Its values are shared: never modified once kept. It is
// safe for concurrent use.
type Prefixed[V any] struct {
	seed                   maphash.Seed
	entries, size, perHead int
	mu                     sync.Mutex
	byHead                 map[uint64][]*prefix[V] // oldest first
	order                  []*prefix[V]            // oldest first
	bytes                  int
	offered                [offeredHeads]atomic.Uint64
}

// offeredHeads is how many heads Offered remembers (the latest under each of as many slots).
const offeredHeads = 1024

// HeadLen is the length of the arrays' heads, under which they are filed: a Prefixed keeps no
// shorter array.
const HeadLen = 128

// tailLen is the length of the arrays' tails, compared first.
const tailLen = 64

// maxPerHead bounds perHead.
const maxPerHead = 64

type prefix[V any] struct {
	raw   []byte // from '[' to the end of the last element
	head  uint64
	size  int
	count int // elements
	v     V
}

// NewPrefixed returns a Prefixed of at most entries values, size bytes and perHead (at most 64)
// values under one head.
func NewPrefixed[V any](entries, size, perHead int) *Prefixed[V] {
	return &Prefixed[V]{seed: maphash.MakeSeed(), entries: entries, size: size, perHead: min(perHead, maxPerHead),
		byHead: map[uint64][]*prefix[V]{}}
}

// Longest returns the value kept for the longest run of the first elements of b (an array, and what
// follows it) that take accepts, how many elements it covers and where in b the last of them ends
// (end 0: none is kept).
func (m *Prefixed[V]) Longest(b []byte, take func(V) bool) (v V, count, end int) {
	if len(b) < HeadLen {
		return v, 0, 0
	}
	key := maphash.Bytes(m.seed, b[:HeadLen])
	var room [maxPerHead]*prefix[V]
	m.mu.Lock()
	filed := append(room[:0], m.byHead[key]...)
	m.mu.Unlock()
	var best *prefix[V]
	for _, p := range filed {
		n := len(p.raw)
		if n > len(b) || best != nil && n <= len(best.raw) || !bytes.Equal(b[n-tailLen:n], p.raw[n-tailLen:]) ||
			!bytes.Equal(b[:n], p.raw) || !elementEnds(b, n) || !take(p.v) {
			continue
		}
		best = p
	}
	if best == nil {
		return v, 0, 0
	}
	return best.v, best.count, len(best.raw)
}

// elementEnds reports whether an element of the array b ends at i: what follows, but white space, is
// a comma or the array's closing bracket.
func elementEnds(b []byte, i int) bool {
	i = jsonx.SkipSpace(b, i)
	return i < len(b) && (b[i] == ',' || b[i] == ']')
}

// Offered notes the head of the array b and reports whether it was noted before, for a caller that
// keeps an array with nothing kept before it only once its head comes again: a client that sends each
// array once (a chat application's requests that share no first message) then costs no copy and no
// eviction a request, while an agent's second turn keeps its first turn's array. It remembers the
// latest of the heads that share one of offeredHeads slots; b shorter than HeadLen is never noted.
func (m *Prefixed[V]) Offered(b []byte) bool {
	if len(b) < HeadLen {
		return false
	}
	h := maphash.Bytes(m.seed, b[:HeadLen])
	return m.offered[h%offeredHeads].Swap(h) == h
}

// Put keeps v, made from the count first elements of an array, under raw (a copy), the array's bytes
// as far as the last of them, counted as size bytes with raw.
func (m *Prefixed[V]) Put(raw []byte, count, size int, v V) {
	size += len(raw)
	if len(raw) < HeadLen || size > m.size/4 {
		return
	}
	p := &prefix[V]{raw: bytes.Clone(raw), head: maphash.Bytes(m.seed, raw[:HeadLen]), size: size, count: count, v: v}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, old := range m.byHead[p.head] {
		if bytes.Equal(old.raw, p.raw) {
			m.forget(old) // the same bytes kept again: the newer value
			break
		}
	}
	if filed := m.byHead[p.head]; len(filed) >= m.perHead {
		m.forget(filed[0])
	}
	m.byHead[p.head] = append(m.byHead[p.head], p)
	m.order = append(m.order, p)
	m.bytes += p.size
	for len(m.order) > 0 && (len(m.order) > m.entries || m.bytes > m.size) {
		m.forget(m.order[0])
	}
}

// forget drops a kept value. The slices are changed in place (Longest copies what it reads under the
// lock), and the oldest, the usual one, leaves order from its front: a Prefixed that keeps arrays
// nobody sends again forgets one on each Put.
func (m *Prefixed[V]) forget(p *prefix[V]) {
	filed := m.byHead[p.head]
	if i := slices.Index(filed, p); i >= 0 {
		filed = slices.Delete(filed, i, i+1)
	}
	if len(filed) == 0 {
		delete(m.byHead, p.head)
	} else {
		m.byHead[p.head] = filed
	}
	if len(m.order) > 0 && m.order[0] == p {
		m.order[0] = nil
		m.order = m.order[1:]
	} else if i := slices.Index(m.order, p); i >= 0 {
		m.order = slices.Delete(m.order, i, i+1)
	}
	m.bytes -= p.size
}

// Elements returns the elements of the JSON array b that follow b[from] (from 0: the array begins b;
// otherwise an element ends at from, as Longest's end), and where each ends in b; ok is false when
// what follows is no well-formed rest of an array. What follows the array is not read. It does not
// validate the elements: a reader that needs valid JSON checks them, or has them checked before.
func Elements(b []byte, from int) (items []json.RawMessage, ends []int, ok bool) {
	i := jsonx.SkipSpace(b, from)
	if from == 0 {
		if i >= len(b) || b[i] != '[' {
			return nil, nil, false
		}
		if i = jsonx.SkipSpace(b, i+1); i < len(b) && b[i] == ']' {
			return nil, nil, true
		}
	} else {
		if i < len(b) && b[i] == ']' {
			return nil, nil, true
		}
		if i >= len(b) || b[i] != ',' {
			return nil, nil, false
		}
		i = jsonx.SkipSpace(b, i+1)
	}
	// Room for about as many items as an agent's turn holds for its size (appending one by one grew
	// each slice about eight times a request).
	n := min((len(b)-i)/256+8, 4096)
	items, ends = make([]json.RawMessage, 0, n), make([]int, 0, n)
	for {
		e := jsonx.ValueEnd(b, i)
		if e <= i {
			return nil, nil, false
		}
		items, ends = append(items, b[i:e:e]), append(ends, e)
		switch i = jsonx.SkipSpace(b, e); {
		case i < len(b) && b[i] == ',':
			i = jsonx.SkipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return items, ends, true
		default:
			return nil, nil, false
		}
	}
}
