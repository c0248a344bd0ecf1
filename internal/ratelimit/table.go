package ratelimit

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// maxKeys bounds the memory of every limiter: past it, idle entries are dropped, and if none is idle
// half of the entries go (a flood of fresh addresses or ids cannot grow a map without bound).
const maxKeys = 100_000

// table is the per-key state of one limiter, bounded at maxKeys. It holds no lock: its limiter does.
type table[K comparable, V any] struct {
	m map[K]V
	// idle reports that an entry may be forgotten at now without changing any answer (a bucket that
	// would be full again, failures past their forget time).
	idle func(v V, now time.Time) bool
}

func newTable[K comparable, V any](idle func(V, time.Time) bool) table[K, V] {
	return table[K, V]{m: map[K]V{}, idle: idle}
}

// put stores v under k, first making room when the table is full.
func (t *table[K, V]) put(k K, v V, now time.Time) {
	if _, ok := t.m[k]; !ok && len(t.m) >= maxKeys {
		t.prune(now)
	}
	t.m[k] = v
}

// prune drops the idle entries, then half of the table if it is still full (map order is random, so
// the survivors are a fair sample).
func (t *table[K, V]) prune(now time.Time) {
	for k, v := range t.m {
		if t.idle(v, now) {
			delete(t.m, k)
		}
	}
	if len(t.m) < maxKeys {
		return
	}
	n := len(t.m) / 2
	for k := range t.m {
		if n == 0 {
			return
		}
		delete(t.m, k)
		n--
	}
}

// bucket is a token bucket (golang.org/x/time/rate), used the one way every limiter here uses it: at a
// given time, checked and spent, never waited on.
type bucket struct{ lim *rate.Limiter }

// newBucket returns a full bucket of burst tokens refilled at perSecond.
func newBucket(perSecond float64, burst int) bucket {
	return bucket{rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// ready reports whether a whole token is there.
func (b bucket) ready(now time.Time) bool { return b.lim.TokensAt(now) >= 1 }

// spend takes a token (after ready said there is one).
func (b bucket) spend(now time.Time) { b.lim.AllowN(now, 1) }

// charge takes n tokens, into debt if need be: the bucket refills before it is ready again. More than
// the burst at once is capped at the burst, which empties the bucket for one full refill.
func (b bucket) charge(now time.Time, n int) { b.lim.ReserveN(now, min(n, b.lim.Burst())) }

// wait is how long until the bucket holds n tokens.
func (b bucket) wait(now time.Time, n float64) time.Duration {
	have := b.lim.TokensAt(now)
	if have >= n {
		return 0
	}
	return time.Duration(math.Ceil((n - have) / float64(b.lim.Limit()) * float64(time.Second)))
}

// full reports whether the bucket has refilled to its burst (it may then be forgotten).
func (b bucket) full(now time.Time) bool { return b.lim.TokensAt(now) >= float64(b.lim.Burst()) }

// window is the bucket's state for the x-ratelimit-* headers.
func (b bucket) window(now time.Time) Window {
	return Window{Limit: b.lim.Burst(), Remaining: max(0, int(math.Floor(b.lim.TokensAt(now)))), Reset: b.wait(now, float64(b.lim.Burst()))}
}
