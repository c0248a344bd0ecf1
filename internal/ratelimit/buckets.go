package ratelimit

import (
	"sync"
	"time"
)

// Buckets is a token bucket per key (an address, for the API's anonymous mints): Burst attempts at
// once, refilled one every `every`.
type Buckets struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu sync.Mutex
	t  table[string, bucket]
}

// NewBuckets returns buckets of burst tokens that refill one token every `every`. now is the clock
// (time.Now when nil).
func NewBuckets(burst int, every time.Duration, now func() time.Time) *Buckets {
	if now == nil {
		now = time.Now
	}
	return &Buckets{every: every, burst: burst, now: now, t: newTable[string](bucket.full)}
}

// Take spends a token of key's bucket. When the bucket is empty it spends nothing and says how long
// until a token is back.
func (b *Buckets) Take(key string) (ok bool, retryAfter time.Duration) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	e, found := b.t.m[key]
	if !found {
		e = newBucket(1/b.every.Seconds(), b.burst)
		b.t.put(key, e, now)
	}
	if !e.ready(now) {
		return false, e.wait(now, 1)
	}
	e.spend(now)
	return true, 0
}
