// Package ratelimit holds every limiter of svc, over one bounded map (table) and one use of
// golang.org/x/time/rate (bucket): the edge's limits of a deployment and its keys, in this file
// (requests and tokens a minute: Limiter, kept in each process by Local; tokens a day or a month:
// Budgets), the API's anonymous mints per address (Buckets) and its growing delays after failed
// sign-ins (Backoff).
package ratelimit

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
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

// Budgets (docs/OPERATIONS.md, "Budgets"): a deployment or a key may spend at most Tokens prompt plus
// completion tokens per UTC day or calendar month. A call reserves what it may generate at admission
// (Reserve) while its scopes have anything left, and settles at its end to what it used (Settle), so
// that the tokens granted pass a budget by at most the calls in flight when it ran out: one call per
// counter, since a call is admitted only while the count is below the budget and the count includes
// every reservation. With --redis the count is one per budget in Redis (Lua on Redis's clock), shared
// by every edge: one call's overshoot in all. Without it (or while Redis cannot be reached) each process
// counts its share (Tokens / edge count) itself: one call's overshoot per edge.

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Budget is a token budget; the zero value is none.
type Budget struct {
	Tokens int64
	Period string // PeriodDay or PeriodMonth
}

// Set reports whether the budget limits anything.
func (b Budget) Set() bool { return b.Tokens > 0 }

// Bounds returns the UTC period of a budget that holds t: its start and its end (the reset).
func (b Budget) Bounds(t time.Time) (start, end time.Time) {
	t = t.UTC()
	if b.Period == PeriodMonth {
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}

// share is one of n processes' part of the budget, at least 1.
func (b Budget) share(n int) int64 {
	if n <= 1 {
		return b.Tokens
	}
	return max(1, b.Tokens/int64(n))
}

// BudgetScope is one budget a call must fit.
type BudgetScope struct {
	Name       string // "deployment" or "key", for the answer
	ID         string
	Deployment string // the deployment the budget belongs to (its own id for "deployment"), for Seed
	Budget     Budget
}

// BudgetDecision is the outcome of Reserve.
type BudgetDecision struct {
	Allowed  bool
	Refused  string    // the scope whose budget is spent
	ResetsAt time.Time // when the refusing budget's period ends
}

// Reservation is what a call reserved: Settle gives it back against what the call used.
type Reservation struct {
	tokens int64
	shared bool // counted in Redis
	n      int
	s      [2]reserved
}

type reserved struct {
	name, id string
	start    int64 // the period's start, Unix seconds
}

// budgetKey names one budget's count in one period.
type budgetKey struct {
	scope, id string
	start     int64
}

type budgetCount struct {
	used int64
	end  time.Time
}

// Budgets counts the budgets of an edge: in Redis when shared is set and answers, else in this process
// at its share (Tokens / edges).
type Budgets struct {
	shared *Redis
	edges  int
	now    func() time.Time
	// Seed, when set (before the first call), gives the tokens a budget's period used before this
	// process counted it: svc server reads them from the recorded usage, so that a restart does not
	// start the period at 0. It is called outside the lock, once per budget and period: the calls that
	// arrive while it reads wait for its answer (seeding), rather than each reading the store.
	Seed    func(s BudgetScope, start, end time.Time) int64
	seeding singleflight.Group

	mu sync.Mutex
	t  table[budgetKey, *budgetCount]
}

// NewBudgets returns the budget counts of a process, one of edges processes (0 or 1: alone); shared may
// be nil.
func NewBudgets(shared *Redis, edges int) *Budgets {
	return &Budgets{shared: shared, edges: edges, now: time.Now,
		t: newTable[budgetKey](func(c *budgetCount, now time.Time) bool { return !now.Before(c.end) })}
}

// Reserve reserves tokens under every scope with a budget, or refuses the call when one of them has
// nothing left (used >= budget), reserving nothing.
func (b *Budgets) Reserve(tokens int64, scopes ...BudgetScope) (Reservation, BudgetDecision) {
	r := Reservation{tokens: max(tokens, 0)}
	var set [2]BudgetScope
	for _, s := range scopes {
		if s.Budget.Set() && r.n < len(set) {
			set[r.n] = s
			r.n++
		}
	}
	if r.n == 0 {
		return Reservation{}, BudgetDecision{Allowed: true}
	}
	if b.shared != nil && b.shared.up() {
		res, dec, err := b.reserveShared(r, set[:r.n])
		if err == nil {
			b.shared.ok()
			return res, dec
		}
		b.shared.failed(err)
	}
	if b.shared != nil {
		b.shared.fallbacks.WithLabelValues("budget").Inc()
	}
	return b.reserveLocal(r, set[:r.n])
}

func (b *Budgets) reserveLocal(r Reservation, scopes []BudgetScope) (Reservation, BudgetDecision) {
	now := b.now()
	if b.Seed != nil {
		b.seed(scopes, now)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var counts [2]*budgetCount
	for i, s := range scopes {
		start, end := s.Budget.Bounds(now)
		k := budgetKey{s.Name, s.ID, start.Unix()}
		c := b.t.m[k]
		if c == nil {
			c = &budgetCount{end: end}
			b.t.put(k, c, now)
		}
		share := s.Budget.share(b.edges)
		if c.used >= share {
			return Reservation{}, BudgetDecision{Refused: s.Name, ResetsAt: end}
		}
		counts[i] = c
		r.s[i] = reserved{name: s.Name, id: s.ID, start: k.start}
	}
	for _, c := range counts[:len(scopes)] {
		c.used += r.tokens
	}
	return r, BudgetDecision{Allowed: true}
}

// seed starts the counts of scopes this process has not counted yet in their period from Seed, this
// process's share of it.
func (b *Budgets) seed(scopes []BudgetScope, now time.Time) {
	for _, s := range scopes {
		start, end := s.Budget.Bounds(now)
		k := budgetKey{s.Name, s.ID, start.Unix()}
		b.mu.Lock()
		_, ok := b.t.m[k]
		b.mu.Unlock()
		if ok {
			continue
		}
		b.seeding.Do(s.Name+"/"+s.ID+"/"+strconv.FormatInt(k.start, 10), func() (any, error) {
			b.mu.Lock()
			_, ok := b.t.m[k] // seeded by a read that ended as this one began
			b.mu.Unlock()
			if ok {
				return nil, nil
			}
			used := b.Seed(s, start, end)
			if b.edges > 1 {
				used /= int64(b.edges)
			}
			b.mu.Lock()
			if _, ok := b.t.m[k]; !ok {
				b.t.put(k, &budgetCount{used: used, end: end}, now)
			}
			b.mu.Unlock()
			return nil, nil
		})
	}
}

// Settle corrects a call's reservation to the tokens it used (prompt plus completion), in the period it
// was reserved in. A zero Reservation settles nothing.
func (b *Budgets) Settle(r Reservation, used int64) {
	delta := max(used, 0) - r.tokens
	if r.n == 0 || delta == 0 {
		return
	}
	if r.shared {
		keys := make([]string, r.n)
		for i, s := range r.s[:r.n] {
			keys[i] = budgetRedisKey(s.name, s.id) + ":" + strconv.FormatInt(s.start, 10)
		}
		// A settle that does not reach Redis leaves the reservation counted: the budget errs on the
		// side of spending less.
		if err := settleScript.Run(context.Background(), b.shared.c, keys, delta).Err(); err != nil {
			b.shared.failed(err)
		} else {
			b.shared.ok()
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range r.s[:r.n] {
		if c := b.t.m[budgetKey{s.name, s.id, s.start}]; c != nil {
			c.used = max(0, c.used+delta)
		}
	}
}

func budgetRedisKey(scope, id string) string { return "svc:budget:" + scope + ":" + id }

// reserveScript reserves ARGV[1] tokens under each budget of KEYS (a budget's name without its period)
// when every one has something left in its period on Redis's clock. ARGV: the tokens, then per budget
// its size and its period ('d' or 'm'). A budget's count lives in KEYS[i]..':'..start (the period's
// start, Unix seconds, UTC) until a day after the period ends. It answers {1, 0, 0, start per budget}
// or {0, index of the first budget spent, the end of its period}.
var reserveScript = redis.NewScript(`
local function civil(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp + 3
  if mp >= 10 then m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return y, m
end
local function days(y, m)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m - 3
  if m <= 2 then mp = m + 9 end
  local doy = math.floor((153 * mp + 2) / 5)
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end
local now = tonumber(redis.call('TIME')[1])
local day = math.floor(now / 86400)
local n = #KEYS
local want = tonumber(ARGV[1])
local full, ends, starts = {}, {}, {}
for i = 1, n do
  local s, e = day * 86400, day * 86400 + 86400
  if ARGV[2 * i + 1] == 'm' then
    local y, m = civil(day)
    s = days(y, m) * 86400
    if m == 12 then y, m = y + 1, 1 else m = m + 1 end
    e = days(y, m) * 86400
  end
  starts[i], ends[i] = s, e
  full[i] = KEYS[i] .. ':' .. string.format('%d', s)
  local used = tonumber(redis.call('GET', full[i]) or '0')
  if used >= tonumber(ARGV[2 * i]) then return {0, i, e} end
end
local out = {1, 0, 0}
for i = 1, n do
  redis.call('INCRBY', full[i], want)
  redis.call('EXPIREAT', full[i], ends[i] + 86400)
  out[#out + 1] = starts[i]
end
return out
`)

// settleScript adds ARGV[1] (negative: tokens given back) to each count of KEYS that still exists.
var settleScript = redis.NewScript(`
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local v = redis.call('INCRBY', KEYS[i], ARGV[1])
    if v < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
  end
end
return 0
`)

func (b *Budgets) reserveShared(r Reservation, scopes []BudgetScope) (Reservation, BudgetDecision, error) {
	keys := make([]string, len(scopes))
	args := make([]any, 0, 1+2*len(scopes))
	args = append(args, r.tokens)
	for i, s := range scopes {
		keys[i] = budgetRedisKey(s.Name, s.ID)
		p := "d"
		if s.Budget.Period == PeriodMonth {
			p = "m"
		}
		args = append(args, s.Budget.Tokens, p)
	}
	out, err := reserveScript.Run(context.Background(), b.shared.c, keys, args...).Int64Slice()
	if err != nil {
		return Reservation{}, BudgetDecision{}, err
	}
	if len(out) < 3 {
		return Reservation{}, BudgetDecision{}, redis.Nil
	}
	if out[0] == 0 {
		return Reservation{}, BudgetDecision{Refused: scopes[out[1]-1].Name, ResetsAt: time.Unix(out[2], 0).UTC()}, nil
	}
	r.shared = true
	for i, s := range scopes {
		r.s[i] = reserved{name: s.Name, id: s.ID, start: out[3+i]}
	}
	return r, BudgetDecision{Allowed: true}, nil
}
