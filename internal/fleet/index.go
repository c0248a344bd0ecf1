package fleet

// ways is the number of entries of one set of the prefix index.
const ways = 4

// prefixIndex is a bounded map from a block chain hash to the replica that last got a prompt with that
// chain: a set-associative table (ways entries per set) whose set evicts its least recently used
// entry. Its memory is fixed at creation, so neither a lookup nor an insert allocates.
type prefixIndex struct {
	keys []uint64 // 0: empty
	vals []uint8  // replica positions
	used []uint32 // the tick of the last lookup or insert, for LRU within a set
	mask uint64   // sets - 1
	tick uint32
}

// newPrefixIndex makes an index of at least capacity entries (rounded up to a power of two sets).
func newPrefixIndex(capacity int) *prefixIndex {
	sets := 1
	for sets*ways < capacity {
		sets <<= 1
	}
	n := sets * ways
	return &prefixIndex{keys: make([]uint64, n), vals: make([]uint8, n), used: make([]uint32, n), mask: uint64(sets - 1)}
}

func (x *prefixIndex) set(key uint64) int { return int(mix64(key)&x.mask) * ways }

// get returns the replica recorded for key.
func (x *prefixIndex) get(key uint64) (uint8, bool) {
	s := x.set(key)
	for i := s; i < s+ways; i++ {
		if x.keys[i] == key {
			x.tick++
			x.used[i] = x.tick
			return x.vals[i], true
		}
	}
	return 0, false
}

// put records that key went to replica r, evicting the set's least recently used entry when full.
func (x *prefixIndex) put(key uint64, r uint8) {
	s := x.set(key)
	victim := s
	for i := s; i < s+ways; i++ {
		if x.keys[i] == key || x.keys[i] == 0 {
			victim = i
			break
		}
		if int32(x.used[i]-x.used[victim]) < 0 { // used[i] is older, counting wrap-around
			victim = i
		}
	}
	x.tick++
	x.keys[victim], x.vals[victim], x.used[victim] = key, r, x.tick
}

// clear forgets every entry (the replicas' positions changed).
func (x *prefixIndex) clear() {
	clear(x.keys)
}

// longest returns the last position p of blocks whose chain the index holds, with its replica, by
// binary search: a chain's prefixes were recorded with it, so presence is monotone but for evictions,
// which at worst shorten the match found. p is -1 when the first block is unknown.
func (x *prefixIndex) longest(blocks []uint64) (int, uint8) {
	lo, hi := 0, len(blocks)-1
	p, r := -1, uint8(0)
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		if v, ok := x.get(blocks[mid]); ok {
			p, r = mid, v
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return p, r
}
