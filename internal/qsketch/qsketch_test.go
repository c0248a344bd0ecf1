package qsketch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exact is the value of rank q×(n-1) of sorted values, the rank Quantile reads.
func exact(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}

// TestQuantilesWithinOnePercent is the sketch's promise as a property: for values drawn from many
// shapes (one constant, two close modes, log-normal, uniform, heavy-tailed) and counts from 1 to 20,000,
// every quantile read from the sketch, and from the merge of the sketches of any split of the values,
// is within 1% of the exact quantile; and a sketch read back from its encoding reads the same.
func TestQuantilesWithinOnePercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func() float64{
		"constant 256":  func() float64 { return 256 },
		"255 and 365":   func() float64 { return []float64{255, 365}[rng.IntN(2)] + rng.Float64() },
		"log-normal":    func() float64 { return math.Exp(5 + rng.NormFloat64()) },
		"uniform 0-60s": func() float64 { return rng.Float64() * 60000 },
		"pareto":        func() float64 { return 20 / math.Pow(rng.Float64()+1e-12, 0.8) },
		"integers 1-40": func() float64 { return float64(1 + rng.IntN(40)) },
		"with zeros":    func() float64 { return float64(rng.IntN(3)) * 100 },
	}
	qs := []float64{0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1}
	for name, draw := range shapes {
		for _, n := range []int{1, 2, 3, 4, 7, 16, 100, 1000, 20000} {
			values := make([]float64, n)
			whole := &Sketch{}
			parts := make([]Sketch, 1+rng.IntN(5))
			for i := range values {
				values[i] = draw()
				whole.Add(values[i])
				parts[rng.IntN(len(parts))].Add(values[i])
			}
			merged := &Sketch{}
			for i := range parts {
				back, err := Decode(parts[i].Encode())
				if err != nil {
					t.Fatalf("%s n=%d: decode: %v", name, n, err)
				}
				merged.Merge(back)
			}
			sorted := slices.Clone(values)
			slices.Sort(sorted)
			for _, q := range qs {
				want := exact(sorted, q)
				for label, s := range map[string]*Sketch{"sketch": whole, "merged parts": merged} {
					got, ok := s.Quantile(q)
					if !ok {
						t.Fatalf("%s n=%d %s: Quantile(%v) not ok", name, n, label, q)
					}
					if want < minValue {
						if got != 0 {
							t.Errorf("%s n=%d %s: Quantile(%v) = %v, want 0", name, n, label, q, got)
						}
						continue
					}
					if rel := math.Abs(got-want) / want; rel > RelativeAccuracy+1e-9 {
						t.Errorf("%s n=%d %s: Quantile(%v) = %.3f, exact %.3f: %.2f%% off", name, n, label, q, got, want, 100*rel)
					}
				}
			}
			if whole.Count() != uint64(n) || merged.Count() != uint64(n) {
				t.Errorf("%s n=%d: counts %d and %d", name, n, whole.Count(), merged.Count())
			}
		}
	}
}

func TestEmptyAndSmall(t *testing.T) {
	var s Sketch
	if _, ok := s.Quantile(0.5); ok {
		t.Fatal("an empty sketch has no median")
	}
	back, err := Decode(nil)
	if err != nil || back.Count() != 0 {
		t.Fatalf("Decode(nil) = %v, %v", back, err)
	}
	for range 300 {
		s.Add(255)
	}
	// 300 calls of one latency: one bucket, a few bytes.
	if n := len(s.Encode()); n > 8 {
		t.Errorf("300 equal values encode to %d bytes, want at most 8", n)
	}
}

func TestDecodeRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{{2}, {1}, {1, 0}, {1, 0, 1}, {1, 0, 1, 2}, {1, 0, 0, 9}, {1, 0, 0xff, 0xff, 0xff, 0x7f}} {
		if _, err := Decode(b); err == nil {
			t.Errorf("Decode(%v) took it", b)
		}
	}
}

// FuzzDecode: whatever the blob, Decode returns a sketch whose encoding decodes to the same counts, or
// an error; it never panics or allocates past MaxBuckets.
func FuzzDecode(f *testing.F) {
	s := &Sketch{}
	for _, v := range []float64{0, 1, 255, 365, 60000} {
		s.Add(v)
	}
	f.Add(s.Encode())
	f.Add([]byte{})
	f.Add([]byte{1, 3, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		back, err := Decode(s.Encode())
		if err != nil {
			t.Fatalf("re-encoding of a decoded sketch does not decode: %v", err)
		}
		if back.Count() != s.Count() {
			t.Fatalf("counts %d and %d", back.Count(), s.Count())
		}
		for _, q := range []float64{0, 0.5, 1} {
			a, _ := s.Quantile(q)
			b, _ := back.Quantile(q)
			if a != b {
				t.Fatalf("Quantile(%v): %v and %v", q, a, b)
			}
		}
	})
}
