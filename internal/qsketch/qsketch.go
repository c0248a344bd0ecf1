// Package qsketch is a mergeable quantile sketch with 1% relative accuracy (DDSketch's log buckets):
// latencies are counted in buckets whose bounds grow by a constant ratio, so that any quantile read
// back is within 1% of a value the sketch was given, whatever the count, and two sketches merge by
// adding their buckets. The usage aggregates keep one per hourly row (docs/API.md, "Usage").
package qsketch

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
)

// RelativeAccuracy is the largest relative error of a quantile read from a sketch (DDSketch's α): the
// value returned lies within 1% of the true quantile's.
const RelativeAccuracy = 0.01

var (
	gamma    = (1 + RelativeAccuracy) / (1 - RelativeAccuracy)
	logGamma = math.Log(gamma)
)

// minValue is the smallest value given its own bucket; smaller ones (a latency of 0 ms) are counted
// as zeros and read back as 0.
const minValue = 1e-3

// MaxBuckets bounds the buckets a decoded sketch may hold. Values from 0.001 to 10^9 (milliseconds:
// eleven days) need about 1,400; a blob past the bound is refused, not allocated.
const MaxBuckets = 4096

// Sketch counts values in log buckets: bucket i holds the values in (γ^(i-1), γ^i]. The zero value is
// an empty sketch ready for use.
type Sketch struct {
	zeros   uint64
	buckets map[int32]uint64
	count   uint64
}

// index is the bucket of a value of at least minValue.
func index(v float64) int32 { return int32(math.Ceil(math.Log(v) / logGamma)) }

// value is what a bucket reads back as: the point of (γ^(i-1), γ^i] whose relative distance to both
// ends is RelativeAccuracy.
func value(i int32) float64 { return 2 * math.Pow(gamma, float64(i)) / (gamma + 1) }

// Add counts one value (negative values count as zeros).
func (s *Sketch) Add(v float64) { s.AddN(v, 1) }

// AddN counts a value n times.
func (s *Sketch) AddN(v float64, n uint64) {
	if n == 0 {
		return
	}
	s.count += n
	if !(v >= minValue) { // NaN too
		s.zeros += n
		return
	}
	if s.buckets == nil {
		s.buckets = map[int32]uint64{}
	}
	s.buckets[index(v)] += n
}

// Merge adds o's counts to s.
func (s *Sketch) Merge(o *Sketch) {
	if o == nil || o.count == 0 {
		return
	}
	s.zeros += o.zeros
	s.count += o.count
	if len(o.buckets) > 0 && s.buckets == nil {
		s.buckets = make(map[int32]uint64, len(o.buckets))
	}
	for i, n := range o.buckets {
		s.buckets[i] += n
	}
}

// Count is how many values the sketch holds.
func (s *Sketch) Count() uint64 { return s.count }

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the values counted: the value of rank q×(count-1)
// in their sorted order (the lower of the two middle values for an even count's median), within
// RelativeAccuracy. ok is false for an empty sketch.
func (s *Sketch) Quantile(q float64) (v float64, ok bool) {
	if s.count == 0 {
		return 0, false
	}
	q = min(max(q, 0), 1)
	rank := uint64(q * float64(s.count-1))
	if rank < s.zeros {
		return 0, true
	}
	seen := s.zeros
	for _, i := range s.indexes() {
		seen += s.buckets[i]
		if seen > rank {
			return value(i), true
		}
	}
	return 0, false // unreachable while count is the sum of the buckets
}

func (s *Sketch) indexes() []int32 {
	idx := make([]int32, 0, len(s.buckets))
	for i, n := range s.buckets {
		if n > 0 {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	return idx
}

// encoding is the first byte of an encoded sketch, so that a later format can be told apart.
const encoding = 1

// AppendBinary appends the sketch's compact encoding to b: a format byte, the zeros, the number of
// buckets, then each bucket in order as the difference of its index from the previous one's (a signed
// varint) and its count (a varint). A sketch of a few hundred calls of similar latency is tens of
// bytes.
func (s *Sketch) AppendBinary(b []byte) []byte {
	idx := s.indexes()
	b = append(b, encoding)
	b = binary.AppendUvarint(b, s.zeros)
	b = binary.AppendUvarint(b, uint64(len(idx)))
	prev := int32(0)
	for _, i := range idx {
		b = binary.AppendVarint(b, int64(i-prev))
		b = binary.AppendUvarint(b, s.buckets[i])
		prev = i
	}
	return b
}

// Encode is the sketch's compact encoding (AppendBinary).
func (s *Sketch) Encode() []byte { return s.AppendBinary(nil) }

// ErrCorrupt is returned for a blob that is not an encoded sketch.
var ErrCorrupt = errors.New("qsketch: not an encoded sketch")

// Decode reads an encoding of AppendBinary. An empty blob is an empty sketch.
func Decode(b []byte) (*Sketch, error) {
	s := &Sketch{}
	if len(b) == 0 {
		return s, nil
	}
	if b[0] != encoding {
		return nil, ErrCorrupt
	}
	b = b[1:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	zeros, ok := next()
	if !ok {
		return nil, ErrCorrupt
	}
	nb, ok := next()
	if !ok || nb > MaxBuckets {
		return nil, ErrCorrupt
	}
	s.zeros, s.count = zeros, zeros
	if nb > 0 {
		s.buckets = make(map[int32]uint64, nb)
	}
	idx := int64(0)
	for range nb {
		d, n := binary.Varint(b)
		if n <= 0 {
			return nil, ErrCorrupt
		}
		b = b[n:]
		idx += d
		c, ok := next()
		if !ok || idx < math.MinInt32 || idx > math.MaxInt32 || s.count+c < s.count {
			return nil, ErrCorrupt
		}
		s.buckets[int32(idx)] += c
		s.count += c
	}
	if len(b) != 0 {
		return nil, ErrCorrupt
	}
	return s, nil
}

// Each calls f with each bucket's value (0 for the zeros) and count, in increasing order of value.
func (s *Sketch) Each(f func(v float64, n uint64)) {
	if s.zeros > 0 {
		f(0, s.zeros)
	}
	for _, i := range s.indexes() {
		f(value(i), s.buckets[i])
	}
}
