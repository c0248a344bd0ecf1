package ratelimit

import (
	"sync"
	"time"
)

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
	t  table[string, *failures]
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
	b := &Backoff{Free: free, Base: base, Max: max, Forget: forget, now: now}
	b.t = newTable[string](func(f *failures, now time.Time) bool { return now.Sub(f.last) >= b.Forget })
	return b
}

// Wait returns how long key must still wait before its next attempt (0: go ahead).
func (b *Backoff) Wait(key string) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.t.m[key]
	if f == nil {
		return 0
	}
	if now.Sub(f.last) >= b.Forget {
		delete(b.t.m, key)
		return 0
	}
	return max(f.until.Sub(now), 0)
}

// Fail records a failure of key and returns the wait it now has.
func (b *Backoff) Fail(key string) time.Duration {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.t.m[key]
	if f == nil || now.Sub(f.last) >= b.Forget {
		f = &failures{}
		b.t.put(key, f, now)
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
	delete(b.t.m, key)
	b.mu.Unlock()
}
