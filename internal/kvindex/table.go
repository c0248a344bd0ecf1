package kvindex

// maskTable maps a block's hash (never 0) to the slots holding it: open addressing with linear probing
// and backward-shift deletion, so that a pick's lookups (Held) probe one or two adjacent words where a Go
// map took about 20 ns each (BenchmarkPickSessionKV in internal/fleet: 2.7 us a pick with a map). It
// grows, off the request path, while applying events.
type maskTable struct {
	keys, vals []uint64
	n          int
	mask       uint64
}

func (t *maskTable) slot(k uint64) uint64 { return mix64(k) & t.mask }

func (t *maskTable) get(k uint64) uint64 {
	if t.n == 0 {
		return 0
	}
	for i := t.slot(k); ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case k:
			return t.vals[i]
		case 0:
			return 0
		}
	}
}

// or sets the bits m on k's mask, adding k.
func (t *maskTable) or(k, m uint64) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	i := t.slot(k)
	for ; t.keys[i] != 0; i = (i + 1) & t.mask {
		if t.keys[i] == k {
			t.vals[i] |= m
			return
		}
	}
	t.keys[i], t.vals[i] = k, m
	t.n++
}

// andNot clears the bits m of k's mask, removing k when none is left.
func (t *maskTable) andNot(k, m uint64) {
	if t.n == 0 {
		return
	}
	i := t.slot(k)
	for ; t.keys[i] != k; i = (i + 1) & t.mask {
		if t.keys[i] == 0 {
			return
		}
	}
	if t.vals[i] &^= m; t.vals[i] != 0 {
		return
	}
	// Backward-shift deletion: move later entries of the run into the hole when their home allows.
	t.n--
	for j := (i + 1) & t.mask; t.keys[j] != 0; j = (j + 1) & t.mask {
		home := t.slot(t.keys[j])
		// j's entry may move to i when its home is not in (i, j] cyclically.
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.keys[i], t.vals[i] = 0, 0
}

func (t *maskTable) grow() {
	size := max(1024, 2*len(t.keys))
	old := *t
	*t = maskTable{keys: make([]uint64, size), vals: make([]uint64, size), mask: uint64(size - 1)}
	for i, k := range old.keys {
		if k != 0 {
			t.or(k, old.vals[i])
		}
	}
}
