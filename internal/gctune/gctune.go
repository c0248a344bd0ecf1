// Package gctune keeps the Go garbage collector's heap goal from falling below a floor, so that a
// server with a small live heap does not collect dozens of times a second (docs/OPERATIONS.md, "Memory").
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// DefaultFloor is the heap goal svc keeps at least: a few tens of MiB buy back most of the CPU a small
// heap costs in collections (with the Go default, a 2 MiB live heap is collected at 4 MiB, about
// 30 times a second on a busy edge).
const DefaultFloor = 64 << 20

// Bounds of the GOGC value the tuner sets: never below Go's default, never so high that a heap that
// suddenly grows costs more than ten times its live size before the next collection.
const (
	minPercent = 100
	maxPercent = 1000
)

// Start tunes GOGC after every collection so that the next heap goal is about floor, or twice the live
// heap when that is larger (Go's default). It does nothing when the operator set GOGC, and the Go
// runtime's own GOMEMLIMIT, when set, still bounds the heap. It returns a function that stops the
// tuning and restores the default.
func Start(floor uint64) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set || floor == 0 {
		return func() {}
	}
	t := &tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, last: minPercent}
	t.arm()
	t.tune()
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(minPercent)
	}
}

type tuner struct {
	floor   uint64
	sample  []metrics.Sample
	last    int
	stopped atomic.Bool
}

// sentinel is garbage whose finalizer runs once per collection and re-arms itself.
type sentinel struct{ t *tuner }

func (t *tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

// tune sets GOGC from the live heap that the last collection measured.
func (t *tuner) tune() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if p := Percent(t.sample[0].Value.Uint64(), t.floor); p != t.last {
		t.last = p
		debug.SetGCPercent(p)
	}
}

// Percent is the GOGC value whose heap goal (live × (1 + GOGC/100)) is about floor, within
// [100, 1000] and rounded down to a multiple of 50 so that small changes of the live heap do not
// change it.
func Percent(live, floor uint64) int {
	if live == 0 {
		return maxPercent
	}
	if live*2 >= floor {
		return minPercent
	}
	p := int((floor-live)*100/live) / 50 * 50
	return min(max(p, minPercent), maxPercent)
}
