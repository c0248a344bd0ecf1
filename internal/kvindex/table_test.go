package kvindex

import (
	"math/rand/v2"
	"testing"
)

// The table against a map, through growth and many deletions (backward shifts across the wrap).
func TestMaskTableMatchesAMap(t *testing.T) {
	var tb maskTable
	want := map[uint64]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		k := uint64(rng.IntN(5000)) + 1
		bit := uint64(1) << rng.IntN(4)
		if rng.IntN(3) == 0 {
			tb.andNot(k, bit)
			if want[k] &^= bit; want[k] == 0 {
				delete(want, k)
			}
		} else {
			tb.or(k, bit)
			want[k] |= bit
		}
		if i%1000 == 0 {
			for k := uint64(1); k <= 5000; k++ {
				if got := tb.get(k); got != want[k] {
					t.Fatalf("after %d ops: key %d maps to %b, want %b", i, k, got, want[k])
				}
			}
			if tb.n != len(want) {
				t.Fatalf("after %d ops: %d keys, want %d", i, tb.n, len(want))
			}
		}
	}
}
