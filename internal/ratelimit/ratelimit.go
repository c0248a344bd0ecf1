// Package ratelimit holds every limiter of svc, over one bounded map (table) and one use of
// golang.org/x/time/rate (bucket): the edge's requests and tokens a minute per deployment and key
// (Limiter, kept in each process by Local), the API's anonymous mints per address (Buckets) and its
// growing delays after failed sign-ins (Backoff).
package ratelimit

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
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

// Limiter enforces the limits of deployments and keys for the edge. Local keeps the buckets in the
// process; a limiter shared by several edges would implement the same two calls.
type Limiter interface {
	// Take admits a request under every scope, or refuses it without taking anything.
	Take(scopes ...Scope) Decision
	// Charge takes a finished request's tokens from the tokens buckets of its scopes.
	Charge(tokens int, scopes ...Scope)
}

// Local is a Limiter in memory: a requests bucket and a tokens bucket per scope, in this process only
// (each of n edges enforces its share, Rule.Share).
type Local struct {
	mu  sync.Mutex
	t   table[scopeKey, *scopeBuckets]
	now func() time.Time
}

var _ Limiter = (*Local)(nil)

// scopeBuckets are the buckets of one scope under its current rule; a bucket of a kind the rule does
// not limit has no limiter (lim nil).
type scopeBuckets struct {
	rule             Rule
	requests, tokens bucket
	used             time.Time
}

// NewLocal returns an empty Local limiter.
func NewLocal() *Local {
	// A scope unused for a minute has refilled both buckets: forgetting it changes no answer.
	return &Local{t: newTable[scopeKey](func(b *scopeBuckets, now time.Time) bool { return now.Sub(b.used) > time.Minute }), now: time.Now}
}

// scopeKey names the buckets of a scope: its name and the id of what it limits.
type scopeKey struct{ scope, id string }

func (l *Local) buckets(k scopeKey, r Rule, now time.Time) *scopeBuckets {
	b := l.t.m[k]
	if b == nil || b.rule != r {
		// A changed limit starts full buckets at the new size.
		b = &scopeBuckets{rule: r}
		if r.RequestsPerMinute > 0 {
			b.requests = newBucket(float64(r.RequestsPerMinute)/60, r.RequestsPerMinute)
		}
		if r.TokensPerMinute > 0 {
			b.tokens = newBucket(float64(r.TokensPerMinute)/60, r.TokensPerMinute)
		}
		l.t.put(k, b, now)
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
func (l *Local) Take(scopes ...Scope) Decision {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	d := Decision{Allowed: true}
	var bs [4]*scopeBuckets
	n := 0
	for _, s := range scopes {
		if !s.Rule.Limited() {
			continue
		}
		if n == len(bs) {
			break // a request has two scopes (deployment and key); more are ignored
		}
		b := l.buckets(scopeKey{s.Name, s.ID}, s.Rule, now)
		bs[n] = b
		n++
		for _, k := range [2]bucket{b.requests, b.tokens} {
			if k.lim != nil && !k.ready(now) {
				d.Allowed, d.Refused = false, s.Name
				d.RetryAfter = max(d.RetryAfter, k.wait(now, 1))
			}
		}
	}
	if n == 0 {
		return d
	}
	if d.Allowed {
		for _, b := range bs[:n] {
			if b.requests.lim != nil {
				b.requests.spend(now)
			}
		}
	}
	d.Requests, d.Tokens = windows(bs[:n], now)
	return d
}

// Charge takes a finished request's tokens from the tokens buckets of its scopes. A bucket may go into
// debt: the next requests wait until it has refilled.
func (l *Local) Charge(tokens int, scopes ...Scope) {
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
		l.buckets(scopeKey{s.Name, s.ID}, s.Rule, now).tokens.charge(now, tokens)
	}
}

// windows reports the tightest requests and tokens buckets, the way OpenAI's headers do: size,
// what is left, and the time until the bucket is full again.
func windows(bs []*scopeBuckets, now time.Time) (req, tok Window) {
	var r, t bucket
	var rHave, tHave float64
	for _, b := range bs {
		if b.requests.lim != nil {
			if have := b.requests.lim.TokensAt(now); r.lim == nil || have < rHave {
				r, rHave = b.requests, have
			}
		}
		if b.tokens.lim != nil {
			if have := b.tokens.lim.TokensAt(now); t.lim == nil || have < tHave {
				t, tHave = b.tokens, have
			}
		}
	}
	if r.lim != nil {
		req = r.window(now)
	}
	if t.lim != nil {
		tok = t.window(now)
	}
	return req, tok
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
