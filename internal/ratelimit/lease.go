package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The edge's limiter on Redis leases: a round trip does not buy one admit but a slice of each
// requests bucket's budget (what Redis has left / leaseDivisor, at most maxLease), which the process
// then spends without asking; what it has not spent after leaseLife goes back. Leased requests are
// taken out of the shared bucket when they are leased, so leasing never admits more than the limit:
// its only inexactness is a request refused on one process while another still holds a slice, and the
// slice shrinks with what is left (near the limit it is 1: one round trip per request, as exact as
// asking every time). A tokens bucket is only checked on admission (tokens are charged after the
// answer): the process trusts Redis's last answer for tokenView while it was far from empty, and asks
// again near the limit. Charges are summed per bucket and sent every chargeEvery in one pipeline.
const (
	leaseLife    = 250 * time.Millisecond
	tokenView    = 100 * time.Millisecond
	chargeEvery  = 50 * time.Millisecond
	maxLease     = 1024
	leaseDivisor = 16 // per process (--edge-count): a process leases at most 1/16 of its share of what is left
)

// leaseScript admits a request under KEYS and leases. ARGV: per bucket its size (tokens a minute),
// then per bucket a letter ("r": a requests bucket to lease from; "t": a tokens bucket to check), then
// the divisor of what is left that a lease takes. When every bucket has a token it answers {1, 0, 0,
// then per bucket: the lease (requests taken, this request's included; 0 for "t"), tokens left after
// it, µs until full}; else {0, index of the first bucket that refused, wait in µs, the same per bucket
// with leases of 0}, taking nothing.
var leaseScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local div, maxl = tonumber(ARGV[2 * n + 1]), tonumber(ARGV[2 * n + 2])
local tat, T, burst = {}, {}, {}
local allowed, refused, wait = 1, 0, 0
for i = 1, n do
  burst[i] = tonumber(ARGV[i])
  T[i] = 60000000 / burst[i]
  local v = redis.call('GET', KEYS[i])
  tat[i] = now
  if v then tat[i] = math.max(tonumber(v), now) end
  local w = tat[i] - now - (burst[i] - 1) * T[i]
  if w > 0 then
    allowed = 0
    if refused == 0 then refused = i end
    wait = math.max(wait, w)
  end
end
local out = {allowed, refused, math.ceil(wait)}
for i = 1, n do
  local got = 0
  if allowed == 1 and ARGV[n + i] == 'r' then
    local left = math.floor((now + burst[i] * T[i] - tat[i]) / T[i])
    got = math.max(1, math.min(maxl, math.floor(left / div)))
    tat[i] = tat[i] + got * T[i]
    redis.call('SET', KEYS[i], string.format('%.0f', tat[i]), 'PX', math.ceil((tat[i] - now) / 1000) + 1000)
  end
  out[#out + 1] = got
  out[#out + 1] = math.max(0, math.floor((now + burst[i] * T[i] - tat[i]) / T[i]))
  out[#out + 1] = math.ceil(tat[i] - now)
end
return out
`)

// chargeScript takes ARGV[2] tokens from a bucket of ARGV[1] a minute (at most the bucket, which may
// go into debt) and, with ARGV[3] "return", gives back as many requests instead: a lease not spent.
var chargeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local burst, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local T = 60000000 / burst
local v = redis.call('GET', KEYS[1])
local tat = now
if v then tat = math.max(tonumber(v), now) end
if ARGV[3] == 'return' then
  if not v then return 0 end
  tat = tat - math.min(n, burst) * T
  if tat <= now then redis.call('DEL', KEYS[1]) return 0 end
else
  tat = tat + math.min(n, burst) * T
end
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return 0
`)

// Limiter returns the edge's limiter on Redis. local decides while Redis cannot be reached, with every
// rule shared among edgeCount processes; scopes come with whole rules.
func (r *Redis) Limiter(local Limiter, edgeCount int) Limiter {
	l := &sharedLimiter{r: r, local: local, share: max(edgeCount, 1), buckets: map[bucketID]*lease{},
		charges: map[pendingKey]pending{}, now: time.Now}
	go l.loop()
	return l
}

type sharedLimiter struct {
	r     *Redis
	local Limiter
	share int
	now   func() time.Time

	mu      sync.RWMutex
	buckets map[bucketID]*lease

	cmu     sync.Mutex
	charges map[pendingKey]pending // tokens to charge and leases to give back
}

// bucketID names a shared bucket: the first scope's id (the Redis Cluster tag), the scope, the kind
// ('r' requests, 't' tokens) and the limit.
type bucketID struct {
	tag, name, id string
	kind          byte
	limit         int
}

// pendingKey is a bucket with something to send: tokens charged (back false) or a lease given back.
type pendingKey struct {
	b    *lease
	back bool
}

// pending is what the loop sends for one bucket.
type pending struct {
	n     int
	scope Scope // a charge's, for the local buckets when Redis cannot be reached
}

// lease is what a process knows of one shared bucket.
type lease struct {
	key   string // in Redis: it carries the rule, so that a changed limit starts a full bucket as Local does, and the first scope's id in braces, so that a deployment's keys share a Redis Cluster slot
	kind  byte
	limit int

	mu        sync.Mutex
	left      int           // requests leased and not yet admitted
	remaining int           // what Redis had left after its last answer
	reset     time.Duration // until full, at its last answer
	at        time.Time     // of the last answer
	charged   int           // tokens charged here since
	used      time.Time
}

// bucketsOf lists the limited buckets of scopes (only the tokens buckets with tokensOnly), with the
// index of the scope of each.
func (l *sharedLimiter) bucketsOf(scopes []Scope, tokensOnly bool, ls *[8]*lease, owner *[8]int) int {
	n := 0
	for i, s := range scopes {
		for _, k := range [2]struct {
			kind  byte
			limit int
		}{{'r', s.Rule.RequestsPerMinute}, {'t', s.Rule.TokensPerMinute}} {
			if k.limit <= 0 || (tokensOnly && k.kind == 'r') || n == len(ls) {
				continue
			}
			ls[n], owner[n] = l.lease(bucketID{tag: scopes[0].ID, name: s.Name, id: s.ID, kind: k.kind, limit: k.limit}), i
			n++
		}
	}
	return n
}

func (l *sharedLimiter) lease(id bucketID) *lease {
	l.mu.RLock()
	b := l.buckets[id]
	l.mu.RUnlock()
	if b != nil {
		return b
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b = l.buckets[id]; b == nil {
		b = &lease{key: "svc:rl:{" + id.tag + "}:" + id.name + ":" + id.id + ":" + string(id.kind) + ":" + strconv.Itoa(id.limit),
			kind: id.kind, limit: id.limit}
		l.buckets[id] = b
	}
	return b
}

// Take admits a request from this process's leases when they cover it, else asks Redis (which leases
// again); when Redis cannot be reached, the local buckets decide.
func (l *sharedLimiter) Take(scopes ...Scope) Decision {
	var all [8]*lease
	var owner [8]int
	n := l.bucketsOf(scopes, false, &all, &owner)
	if n == 0 {
		return Decision{Allowed: true}
	}
	if !l.r.up() {
		return l.localTake(scopes)
	}
	ls := all[:n]
	// Lock the buckets in the order of their keys, so that two requests never wait on each other; a
	// request that waits here while another asks Redis then finds the lease that one bought.
	var order [8]int
	for i := range n {
		order[i] = i
		for j := i; j > 0 && ls[order[j]].key < ls[order[j-1]].key; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	for _, i := range order[:n] {
		ls[i].mu.Lock()
	}
	defer func() {
		for _, b := range ls {
			b.mu.Unlock()
		}
	}()
	now := l.now()
	ask := false
	for _, b := range ls {
		b.used = now
		if b.kind == 'r' && (b.left == 0 || now.Sub(b.at) > leaseLife) ||
			b.kind == 't' && (now.Sub(b.at) > tokenView || b.remaining-b.charged <= l.near(b.limit)) {
			ask = true
		}
	}
	if !ask {
		for _, b := range ls {
			if b.kind == 'r' {
				b.left--
			}
		}
		return l.decision(ls, now)
	}
	// Ask for the buckets a lease does not cover; a lease that does is spent on this request.
	var askKeys []string
	var args []any
	var asked []int
	for i, b := range ls {
		if b.kind == 'r' && b.left > 0 && now.Sub(b.at) <= leaseLife {
			continue
		}
		askKeys = append(askKeys, b.key)
		args = append(args, b.limit)
		asked = append(asked, i)
	}
	for _, i := range asked {
		args = append(args, string(ls[i].kind))
	}
	args = append(args, leaseDivisor*l.share, maxLease)
	res, err := leaseScript.Run(context.Background(), l.r.c, askKeys, args...).Int64Slice()
	if err != nil || len(res) != 3+3*len(askKeys) {
		if err == nil {
			err = fmt.Errorf("unexpected answer to the limit script: %v", res)
		}
		l.r.failed(err)
		return l.localTake(scopes)
	}
	l.r.ok()
	for j, i := range asked {
		b := ls[i]
		if b.kind == 'r' && b.left > 0 {
			l.giveBack(b) // a lease past its life, bought again
		}
		b.left, b.remaining, b.reset, b.at, b.charged = int(res[3+3*j]), int(res[4+3*j]), time.Duration(res[5+3*j])*time.Microsecond, now, 0
	}
	if res[0] != 1 {
		d := l.decision(ls, now)
		d.Allowed, d.Refused, d.RetryAfter = false, scopes[owner[asked[res[1]-1]]].Name, time.Duration(res[2])*time.Microsecond
		return d
	}
	for _, b := range ls {
		if b.kind == 'r' {
			b.left-- // this request's, from the lease just bought or the one it had
		}
	}
	return l.decision(ls, now)
}

// near is how close to empty a tokens bucket of limit is when the process stops trusting its view.
func (l *sharedLimiter) near(limit int) int { return max(1, limit/(leaseDivisor*l.share)) }

// decision reports the tightest bucket of each kind as this process knows it: what Redis had left at
// its last answer, plus the lease not yet spent, less the tokens charged here since.
func (l *sharedLimiter) decision(ls []*lease, now time.Time) Decision {
	d := Decision{Allowed: true}
	for _, b := range ls {
		rem := b.remaining + b.left - b.charged
		rem = max(0, min(rem, b.limit))
		reset := b.reset
		if !b.at.Equal(now) {
			// Since the last answer: full when what is missing has refilled.
			reset = time.Duration(b.limit-rem) * time.Minute / time.Duration(b.limit)
		}
		w := Window{Limit: b.limit, Remaining: rem, Reset: reset}
		tightest := &d.Requests
		if b.kind == 't' {
			tightest = &d.Tokens
		}
		if tightest.Limit == 0 || w.Remaining < tightest.Remaining {
			*tightest = w
		}
	}
	return d
}

// localTake decides with this process's share of each rule.
func (l *sharedLimiter) localTake(scopes []Scope) Decision {
	l.r.fallbacks.WithLabelValues("edge").Inc()
	var buf [4]Scope
	n := copy(buf[:], scopes)
	for i := range buf[:n] {
		buf[i].Rule = buf[i].Rule.Share(l.share)
	}
	return l.local.Take(buf[:n]...)
}

// giveBack queues a lease's unspent requests for Redis (b is locked).
func (l *sharedLimiter) giveBack(b *lease) {
	l.cmu.Lock()
	k := pendingKey{b, true}
	p := l.charges[k]
	p.n += b.left
	l.charges[k] = p
	l.cmu.Unlock()
	b.left = 0
}

// Charge counts the tokens against this process's view of its tokens buckets and queues them for
// Redis, where the loop takes them, summed per bucket, within chargeEvery: the request's goroutine
// never waits on it.
func (l *sharedLimiter) Charge(tokens int, scopes ...Scope) {
	if tokens <= 0 {
		return
	}
	var ls [8]*lease
	var owner [8]int
	n := l.bucketsOf(scopes, true, &ls, &owner)
	if n == 0 {
		return
	}
	if !l.r.up() {
		l.localCharge(tokens, scopes)
		return
	}
	for i, b := range ls[:n] {
		b.mu.Lock()
		b.charged += tokens
		b.mu.Unlock()
		l.cmu.Lock()
		k := pendingKey{b, false}
		p := l.charges[k]
		p.n += tokens
		p.scope = scopes[owner[i]]
		l.charges[k] = p
		l.cmu.Unlock()
	}
}

func (l *sharedLimiter) localCharge(tokens int, scopes []Scope) {
	var buf [4]Scope
	n := copy(buf[:], scopes)
	for i := range buf[:n] {
		buf[i].Rule = buf[i].Rule.Share(l.share)
	}
	l.local.Charge(tokens, buf[:n]...)
}

// loop sends the charges every chargeEvery and gives back the leases older than leaseLife; it forgets
// a bucket unused for a minute.
func (l *sharedLimiter) loop() {
	tick := time.NewTicker(chargeEvery)
	defer tick.Stop()
	var lastSweep time.Time
	for range tick.C {
		now := l.now()
		if now.Sub(lastSweep) >= leaseLife/2 {
			lastSweep = now
			l.mu.RLock()
			bs := make(map[bucketID]*lease, len(l.buckets))
			for k, b := range l.buckets {
				bs[k] = b
			}
			l.mu.RUnlock()
			for k, b := range bs {
				b.mu.Lock()
				if b.left > 0 && now.Sub(b.at) > leaseLife {
					l.giveBack(b)
				}
				idle := now.Sub(b.used) > time.Minute
				b.mu.Unlock()
				if idle {
					l.mu.Lock()
					delete(l.buckets, k)
					l.mu.Unlock()
				}
			}
		}
		l.cmu.Lock()
		if len(l.charges) == 0 {
			l.cmu.Unlock()
			continue
		}
		batch := l.charges
		l.charges = map[pendingKey]pending{}
		l.cmu.Unlock()
		if !l.flush(batch) {
			return // the Redis client is closed: the process is ending
		}
	}
}

// flush sends charges and returned leases in one pipeline; when Redis cannot be reached the charges
// go to the local buckets (a returned lease is then lost: it refills within the minute).
func (l *sharedLimiter) flush(batch map[pendingKey]pending) (open bool) {
	if l.r.up() {
		ctx := context.Background()
		run := func(c redis.Scripter) error {
			for k, p := range batch {
				op := "charge"
				if k.back {
					op = "return"
				}
				chargeScript.EvalSha(ctx, c, []string{k.b.key}, k.b.limit, p.n, op)
			}
			return nil
		}
		_, err := l.r.c.Pipelined(ctx, func(p redis.Pipeliner) error { return run(p) })
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis restarted and forgot the script: load it, and send the batch again (a charge
			// refused NOSCRIPT was not taken).
			if err = chargeScript.Load(ctx, l.r.c).Err(); err == nil {
				_, err = l.r.c.Pipelined(ctx, func(p redis.Pipeliner) error { return run(p) })
			}
		}
		if errors.Is(err, redis.ErrClosed) {
			return false
		}
		if err == nil {
			l.r.ok()
			return true
		}
		l.r.failed(err)
	}
	for k, p := range batch {
		if k.back {
			continue
		}
		l.localCharge(p.n, []Scope{p.scope})
	}
	return true
}
