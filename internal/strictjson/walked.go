package strictjson

import (
	"bytes"
	"hash/maphash"
	"sync"
)

// walkedArrays keeps the top-level arrays of the bodies Walk found valid (a request's messages or
// input items, its tools) as far as their last element, with their count and the deepest nesting
// met in them. An agent sends its tools and its whole conversation again on every turn, and walking
// them again was most of what Walk cost a turn: a body whose array begins with the bytes of one kept,
// up to an element's end, is walked from there. The rules Walk applies inside a top-level member's
// value (valid JSON, no name written twice in an object, the bound on nesting) do not depend on what
// is around it, so those bytes are as valid there as they were before. TestWalkRemembersArrays and
// FuzzWalk hold the walk with and without them together.
//
// Finding them costs no walk either: the arrays are filed under their first headLen bytes (an agent's
// system prompt, or its first tools), and a body's array is compared with the few filed under its
// own, the last bytes of each first (where a session's turns differ from another's), then whole.
var walkedArrays = newArrayMemo(walkedEntries, walkedBytes, walkedPerHead)

const (
	walkedEntries = 256
	walkedBytes   = 16 << 20
	// walkedPerHead is how many arrays are filed under one head (sessions that begin alike), the
	// newest kept.
	walkedPerHead = 16
	// minWalked is the size of the smallest array kept: below it, walking costs less than looking.
	minWalked = 512
	headLen   = 128
	tailLen   = 64
)

type walkedArray struct {
	raw     []byte // from '[' to the end of the last element
	head    uint64
	count   int // elements
	deepest int // the deepest nesting met in it, counted from the body's top
}

type arrayMemo struct {
	seed                  maphash.Seed
	entries, size, perKey int
	mu                    sync.Mutex
	byHead                map[uint64][]*walkedArray // oldest first
	order                 []*walkedArray            // oldest first
	bytes                 int
}

func newArrayMemo(entries, size, perKey int) *arrayMemo {
	return &arrayMemo{seed: maphash.MakeSeed(), entries: entries, size: size, perKey: perKey, byHead: map[uint64][]*walkedArray{}}
}

// longest returns the longest array kept that b (an array, and what follows it) begins with, up to
// the end of one of its elements (the next byte but white space is a comma or the closing bracket);
// nil when none.
func (m *arrayMemo) longest(b []byte) *walkedArray {
	if len(b) < minWalked {
		return nil
	}
	key := maphash.Bytes(m.seed, b[:headLen])
	var room [walkedPerHead]*walkedArray
	m.mu.Lock()
	filed := append(room[:0], m.byHead[key]...)
	m.mu.Unlock()
	var best *walkedArray
	for _, a := range filed {
		n := len(a.raw)
		if n > len(b) || best != nil && n <= len(best.raw) || !bytes.Equal(b[n-tailLen:n], a.raw[n-tailLen:]) ||
			!bytes.Equal(b[:n], a.raw) || !elementEnd(b, n) {
			continue
		}
		best = a
	}
	return best
}

// elementEnd reports whether an element of the array b ends at i: what follows, but white space, is
// a comma or the array's closing bracket.
func elementEnd(b []byte, i int) bool {
	for ; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
		case ',', ']':
			return true
		default:
			return false
		}
	}
	return false
}

// put keeps raw (a copy), an array's bytes up to the end of its last element, forgetting the oldest
// past the bounds (and the oldest under its head past perKey).
func (m *arrayMemo) put(raw []byte, count, deepest int) {
	if len(raw) < minWalked || len(raw) > m.size/4 {
		return
	}
	a := &walkedArray{raw: bytes.Clone(raw), head: maphash.Bytes(m.seed, raw[:headLen]), count: count, deepest: deepest}
	m.mu.Lock()
	defer m.mu.Unlock()
	if filed := m.byHead[a.head]; len(filed) >= m.perKey {
		m.forget(filed[0])
	}
	m.byHead[a.head] = append(m.byHead[a.head], a)
	m.order = append(m.order, a)
	m.bytes += len(a.raw)
	for len(m.order) > 0 && (len(m.order) > m.entries || m.bytes > m.size) {
		m.forget(m.order[0])
	}
}

// forget drops a kept array.
func (m *arrayMemo) forget(a *walkedArray) {
	filed := m.byHead[a.head]
	for i, f := range filed {
		if f == a {
			filed = append(filed[:i:i], filed[i+1:]...)
			break
		}
	}
	if len(filed) == 0 {
		delete(m.byHead, a.head)
	} else {
		m.byHead[a.head] = filed
	}
	for i, o := range m.order {
		if o == a {
			m.order = append(m.order[:i:i], m.order[i+1:]...)
			break
		}
	}
	m.bytes -= len(a.raw)
}
