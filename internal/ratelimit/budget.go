package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	// start the period at 0. It is called outside the lock, once per budget and period.
	Seed func(s BudgetScope, start, end time.Time) int64

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
		used := b.Seed(s, start, end)
		if b.edges > 1 {
			used /= int64(b.edges)
		}
		b.mu.Lock()
		if _, ok := b.t.m[k]; !ok {
			b.t.put(k, &budgetCount{used: used, end: end}, now)
		}
		b.mu.Unlock()
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
