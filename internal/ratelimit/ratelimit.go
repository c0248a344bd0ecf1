// Package ratelimit enforces requests- and tokens-per-minute limits with token buckets
// (golang.org/x/time/rate), one pair per deployment and per key, in each edge process.
package ratelimit

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rule is a limit: at most RequestsPerMinute requests and TokensPerMinute tokens (prompt plus
// completion) a minute; 0 means unlimited.
type Rule struct {
	RequestsPerMinute int
	TokensPerMinute   int
}

// Limited reports whether the rule limits anything.
func (r Rule) Limited() bool { return r.RequestsPerMinute > 0 || r.TokensPerMinute > 0 }

// Share divides a rule among n edge processes (each enforces its share), never below 1.
func (r Rule) Share(n int) Rule {
	if n <= 1 {
		return r
	}
	div := func(v int) int {
		if v == 0 {
			return 0
		}
		return max(1, v/n)
	}
	return Rule{div(r.RequestsPerMinute), div(r.TokensPerMinute)}
}

// Limiter holds the buckets of every scope (a deployment's, a key's).
type Limiter struct {
	mu      sync.Mutex
	buckets map[bucketKey]*bucket
	now     func() time.Time
}

type bucket struct {
	rule     Rule
	requests *rate.Limiter // nil when unlimited
	tokens   *rate.Limiter
	used     time.Time
}

// New returns an empty Limiter.
func New() *Limiter { return &Limiter{buckets: map[bucketKey]*bucket{}, now: time.Now} }

// bucketKey names a bucket: a scope's name and the id of what it limits.
type bucketKey struct{ scope, id string }

// maxBuckets bounds memory: past it, buckets unused for a minute (so full again) are dropped.
const maxBuckets = 100_000

func (l *Limiter) bucket(scope bucketKey, r Rule, now time.Time) *bucket {
	b := l.buckets[scope]
	if b == nil || b.rule != r {
		// A changed limit starts a full bucket at the new size.
		b = &bucket{rule: r}
		if r.RequestsPerMinute > 0 {
			b.requests = rate.NewLimiter(rate.Limit(float64(r.RequestsPerMinute)/60), r.RequestsPerMinute)
		}
		if r.TokensPerMinute > 0 {
			b.tokens = rate.NewLimiter(rate.Limit(float64(r.TokensPerMinute)/60), r.TokensPerMinute)
		}
		if len(l.buckets) >= maxBuckets {
			for k, old := range l.buckets {
				if now.Sub(old.used) > time.Minute {
					delete(l.buckets, k)
				}
			}
		}
		l.buckets[scope] = b
	}
	b.used = now
	return b
}

// Scope is one limit to apply to a request.
type Scope struct {
	Name string // "deployment" or "key", for the answer and the metrics
	ID   string // the id of the deployment or key
	Rule Rule
}

// Decision is the outcome of Take for a request.
type Decision struct {
	Allowed bool
	// Refused names the scope that refused the request ("deployment" or "key").
	Refused    string
	RetryAfter time.Duration
	// Requests and Tokens describe the tightest limit of each kind, for the x-ratelimit-* headers;
	// their Limit is 0 when no scope limits that kind.
	Requests, Tokens Window
}

// Window is the state of one bucket: its size, what is left of it, and the time until it is full.
type Window struct {
	Limit, Remaining int
	Reset            time.Duration
}

// The header names as http.Header keeps them, so that writing them allocates no key.
const (
	hLimitRequests     = "X-Ratelimit-Limit-Requests"
	hRemainingRequests = "X-Ratelimit-Remaining-Requests"
	hResetRequests     = "X-Ratelimit-Reset-Requests"
	hLimitTokens       = "X-Ratelimit-Limit-Tokens"
	hRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	hResetTokens       = "X-Ratelimit-Reset-Tokens"
)

// WriteHeaders sets OpenAI's x-ratelimit-* headers (limit, remaining, reset) for each limited kind.
// The values are cut from one string, so that the six headers cost two allocations, not twelve: this
// runs on every request to a limited endpoint.
func (d Decision) WriteHeaders(h http.Header) {
	var (
		buf   [128]byte
		names [6]string
		cuts  [7]int
		n     int
	)
	b := buf[:0]
	for _, k := range [2]struct {
		w                      Window
		limit, remaining, rset string
	}{{d.Requests, hLimitRequests, hRemainingRequests, hResetRequests}, {d.Tokens, hLimitTokens, hRemainingTokens, hResetTokens}} {
		if k.w.Limit <= 0 {
			continue
		}
		b = strconv.AppendInt(b, int64(k.w.Limit), 10)
		names[n], cuts[n+1] = k.limit, len(b)
		b = strconv.AppendInt(b, int64(k.w.Remaining), 10)
		names[n+1], cuts[n+2] = k.remaining, len(b)
		b = appendReset(b, k.w.Reset)
		names[n+2], cuts[n+3] = k.rset, len(b)
		n += 3
	}
	if n == 0 {
		return
	}
	all, vals := string(b), make([]string, n)
	for i := range n {
		vals[i] = all[cuts[i]:cuts[i+1]]
		h[names[i]] = vals[i : i+1 : i+1]
	}
}

// Take admits a request under every scope, or refuses it: when any requests bucket is empty or any
// tokens bucket is spent (tokens are charged after the answer, so a bucket can be in debt). A refused
// request takes nothing from any bucket.
func (l *Limiter) Take(scopes ...Scope) Decision {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d := Decision{Allowed: true}
	var bs [4]*bucket
	n := 0
	for _, s := range scopes {
		if !s.Rule.Limited() {
			continue
		}
		if n == len(bs) {
			break // a request has two scopes (deployment and key); more are ignored
		}
		b := l.bucket(bucketKey{s.Name, s.ID}, s.Rule, now)
		bs[n] = b
		n++
		if b.requests != nil && b.requests.TokensAt(now) < 1 {
			d.Allowed, d.Refused = false, s.Name
			d.RetryAfter = max(d.RetryAfter, wait(b.requests, now, 1))
		}
		if b.tokens != nil && b.tokens.TokensAt(now) < 1 {
			d.Allowed, d.Refused = false, s.Name
			d.RetryAfter = max(d.RetryAfter, wait(b.tokens, now, 1))
		}
	}
	if n == 0 {
		return d
	}
	if d.Allowed {
		for _, b := range bs[:n] {
			if b.requests != nil {
				b.requests.AllowN(now, 1)
			}
		}
	}
	d.Requests, d.Tokens = windows(bs[:n], now)
	return d
}

// Charge takes a finished request's tokens from the tokens buckets of its scopes. A bucket may go into
// debt: the next requests wait until it has refilled.
func (l *Limiter) Charge(tokens int, scopes ...Scope) {
	if tokens <= 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range scopes {
		if s.Rule.TokensPerMinute <= 0 {
			continue
		}
		b := l.bucket(bucketKey{s.Name, s.ID}, s.Rule, now)
		// ReserveN puts the bucket in debt without waiting; more than the burst at once is capped at the
		// burst, which empties the bucket for a whole minute.
		b.tokens.ReserveN(now, min(tokens, b.tokens.Burst()))
	}
}

// wait is how long until the limiter holds n tokens.
func wait(lim *rate.Limiter, now time.Time, n float64) time.Duration {
	have := lim.TokensAt(now)
	if have >= n {
		return 0
	}
	return time.Duration(math.Ceil((n - have) / float64(lim.Limit()) * float64(time.Second)))
}

// windows reports the tightest requests and tokens buckets, the way OpenAI's headers do: size,
// what is left, and the time until the bucket is full again.
func windows(bs []*bucket, now time.Time) (req, tok Window) {
	var r, t *rate.Limiter
	var rHave, tHave float64
	for _, b := range bs {
		if b.requests != nil {
			if have := b.requests.TokensAt(now); r == nil || have < rHave {
				r, rHave = b.requests, have
			}
		}
		if b.tokens != nil {
			if have := b.tokens.TokensAt(now); t == nil || have < tHave {
				t, tHave = b.tokens, have
			}
		}
	}
	window := func(l *rate.Limiter, have float64) Window {
		if l == nil {
			return Window{}
		}
		return Window{Limit: l.Burst(), Remaining: max(0, int(math.Floor(have))), Reset: wait(l, now, float64(l.Burst()))}
	}
	return window(r, rHave), window(t, tHave)
}

// appendReset writes a duration as OpenAI does in x-ratelimit-reset-*: "1s", "6m0s", "120ms".
func appendReset(b []byte, d time.Duration) []byte {
	switch {
	case d <= 0:
		return append(b, "0s"...)
	case d < time.Second:
		return append(strconv.AppendInt(b, d.Milliseconds(), 10), "ms"...)
	}
	return append(b, d.Round(time.Second).String()...)
}

// RetryAfterSeconds is a Retry-After value: whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
