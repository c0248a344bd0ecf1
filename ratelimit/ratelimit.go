// Package ratelimit enforces requests- and tokens-per-minute limits with token buckets
// (golang.org/x/time/rate), one pair per deployment and per key, in each edge process.
package ratelimit

import (
	"fmt"
	"math"
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

// Limiter holds the buckets of every scope ("d:<deployment id>", "k:<key id>").
type Limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	rule     Rule
	requests *rate.Limiter // nil when unlimited
	tokens   *rate.Limiter
	used     time.Time
}

// New returns an empty Limiter.
func New() *Limiter { return &Limiter{buckets: map[string]*bucket{}, now: time.Now} }

// maxBuckets bounds memory: past it, buckets unused for a minute (so full again) are dropped.
const maxBuckets = 100_000

func (l *Limiter) bucket(scope string, r Rule, now time.Time) *bucket {
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
	ID   string // bucket id, unique across scopes
	Rule Rule
}

// Decision is the outcome of Take for a request.
type Decision struct {
	Allowed bool
	// Refused names the scope that refused the request ("deployment" or "key").
	Refused    string
	RetryAfter time.Duration
	// Headers are the x-ratelimit-* headers (OpenAI's names) for the tightest limit, nil when no scope
	// is limited.
	Headers map[string]string
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
		b := l.bucket(s.ID, s.Rule, now)
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
	d.Headers = headers(bs[:n], now)
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
		b := l.bucket(s.ID, s.Rule, now)
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

// headers reports the tightest requests and tokens limits, the way OpenAI does: limit, remaining, and
// the time until the bucket is full again ("reset").
func headers(bs []*bucket, now time.Time) map[string]string {
	h := map[string]string{}
	put := func(kind string, lims []*rate.Limiter) {
		var tight *rate.Limiter
		for _, l := range lims {
			if l != nil && (tight == nil || l.TokensAt(now) < tight.TokensAt(now)) {
				tight = l
			}
		}
		if tight == nil {
			return
		}
		have := tight.TokensAt(now)
		h["x-ratelimit-limit-"+kind] = strconv.Itoa(tight.Burst())
		h["x-ratelimit-remaining-"+kind] = strconv.Itoa(max(0, int(math.Floor(have))))
		h["x-ratelimit-reset-"+kind] = resetString(wait(tight, now, float64(tight.Burst())))
	}
	var req, tok []*rate.Limiter
	for _, b := range bs {
		req = append(req, b.requests)
		tok = append(tok, b.tokens)
	}
	put("requests", req)
	put("tokens", tok)
	return h
}

// resetString writes a duration as OpenAI does in x-ratelimit-reset-*: "1s", "6m0s", "120ms".
func resetString(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(time.Second).String()
}

// RetryAfterSeconds is a Retry-After value: whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
