// Package throttle holds the two in-memory limiters of the management API: token buckets per key
// (an address) and growing delays after repeated failures per key (an address, an account).
package throttle

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxKeys bounds each limiter's memory: past it, idle entries are dropped, and if none is idle the
// oldest half goes (a flood of fresh addresses cannot grow the map without bound).
const maxKeys = 100_000

// Buckets is a token bucket per key: Burst attempts at once, refilled at Every.
type Buckets struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// NewBuckets returns buckets of burst tokens that refill one token every `every`. now is the clock
// (time.Now when nil).
func NewBuckets(burst int, every time.Duration, now func() time.Time) *Buckets {
	if now == nil {
		now = time.Now
	}
	return &Buckets{every: every, burst: burst, now: now, m: map[string]*bucket{}}
}

// Take spends a token of key's bucket. When the bucket is empty it spends nothing and says how long
// until a token is back.
func (b *Buckets) Take(key string) (ok bool, retryAfter time.Duration) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[key]
	if e == nil {
		if len(b.m) >= maxKeys {
			b.prune(now)
		}
		e = &bucket{lim: rate.NewLimiter(rate.Every(b.every), b.burst)}
		b.m[key] = e
	}
	e.last = now
	r := e.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 || !r.OK() {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// prune drops buckets that have been idle long enough to be full again, or half the map.
func (b *Buckets) prune(now time.Time) {
	full := b.every * time.Duration(b.burst)
	for k, e := range b.m {
		if now.Sub(e.last) >= full {
			delete(b.m, k)
		}
	}
	dropHalf(b.m)
}

// Backoff imposes a growing delay on a key after repeated failures: the first Free failures cost
// nothing, each one after that doubles the wait (Base, 2×Base, 4×Base, … up to Max). A key's failures
// are forgotten after Forget without one, or by Reset.
type Backoff struct {
	Free   int
	Base   time.Duration
	Max    time.Duration
	Forget time.Duration
	now    func() time.Time

	mu sync.Mutex
	m  map[string]*failures
}

type failures struct {
	n     int
	last  time.Time
	until time.Time
}

// NewBackoff returns a Backoff with these settings; now is the clock (time.Now when nil).
func NewBackoff(free int, base, max, forget time.Duration, now func() time.Time) *Backoff {
	if now == nil {
		now = time.Now
	}
	return &Backoff{Free: free, Base: base, Max: max, Forget: forget, now: now, m: map[string]*failures{}}
}

// Wait returns how long key must still wait before its next attempt (0: go ahead).
func (b *Backoff) Wait(key string) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.m[key]
	if f == nil {
		return 0
	}
	if now.Sub(f.last) >= b.Forget {
		delete(b.m, key)
		return 0
	}
	return max(f.until.Sub(now), 0)
}

// Fail records a failure of key and returns the wait it now has.
func (b *Backoff) Fail(key string) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.m[key]
	if f == nil || now.Sub(f.last) >= b.Forget {
		if len(b.m) >= maxKeys {
			b.prune(now)
		}
		f = &failures{}
		b.m[key] = f
	}
	f.n++
	f.last = now
	if over := f.n - b.Free; over > 0 {
		d := b.Max
		if over <= 30 {
			d = min(b.Base<<(over-1), b.Max)
		}
		f.until = now.Add(d)
	}
	return max(f.until.Sub(now), 0)
}

// Reset forgets key's failures (a successful attempt).
func (b *Backoff) Reset(key string) {
	b.mu.Lock()
	delete(b.m, key)
	b.mu.Unlock()
}

func (b *Backoff) prune(now time.Time) {
	for k, f := range b.m {
		if now.Sub(f.last) >= b.Forget {
			delete(b.m, k)
		}
	}
	dropHalf(b.m)
}

// dropHalf empties half of m when it is still at its bound after idle entries went (map order is
// random, so the survivors are a fair sample).
func dropHalf[V any](m map[string]V) {
	if len(m) < maxKeys {
		return
	}
	n := len(m) / 2
	for k := range m {
		if n == 0 {
			return
		}
		delete(m, k)
		n--
	}
}
