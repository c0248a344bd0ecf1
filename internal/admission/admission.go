// Package admission decides when a call may go to its model: up to the model's capacity at once, the
// others waiting in priority lanes and, within a lane, in one queue per key: the key with the fewest calls
// running first, keys level with each other by deficit round robin, and a key holding its fair share
// leaving a place free for each other key that called of late.
package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Lane is a call's priority class (docs/OPERATIONS.md, "Admission"): a waiting call of a higher lane is
// always admitted before any call of a lower one.
type Lane uint8

// The lanes, highest first.
const (
	Interactive Lane = iota // callers' calls
	Shadow                  // shadow canaries' copies of callers' calls
	Eval                    // replay evals
	NumLanes
)

var laneNames = [NumLanes]string{"interactive", "shadow", "eval"}

// String names the lane as the metrics label it.
func (l Lane) String() string {
	if l < NumLanes {
		return laneNames[l]
	}
	return "unknown"
}

// DefaultTimeout is how long a call waits for its turn when its model does not say (queueTimeoutMs).
const DefaultTimeout = 30 * time.Second

// ErrBusy is the answer of a call that did not get its turn: it waited its whole timeout, or the queue
// was full and the call's key already had its fair part of it.
var ErrBusy = errors.New("admission: the model stayed at capacity")

// Config is a gate's settings.
type Config struct {
	// Capacity is the calls the gate lets through at once; 0 or less: no bound (nothing ever waits).
	Capacity int
	// Timeout bounds a call's wait (DefaultTimeout when 0).
	Timeout time.Duration
	// MaxWaiting bounds the calls waiting across lanes (default max(64, 16 × Capacity)); beyond it the
	// longest queue gives up its newest call for a call of a shorter one, or the newcomer is refused.
	MaxWaiting int
	// Weight gives a key's share within its lane relative to the others' (default 1 each): a key of
	// weight 2 is admitted twice as often as a key of weight 1 while both wait.
	Weight func(key string) int
	// Window is how long the gate remembers a key's callers' calls (DefaultWindow when 0): a key whose
	// caller's call ran within the last one to two windows is active (margin, Gate.capOf).
	Window time.Duration
	// LendAfter is how many windows in a row with no key active the gate waits before it lends the
	// callers' reserve to the lower lanes (Gate.limit; DefaultLendAfter when 0). A gate that has not
	// seen a caller yet lends at once.
	LendAfter int
}

// DefaultWindow is a gate's Window when its Config does not say.
const DefaultWindow = time.Second

// DefaultLendAfter is a gate's LendAfter when its Config does not say: with the default window, the
// reserve is lent 5-6 s after the last caller's call (a person's or an agent's next call a few seconds
// later still finds it), and a pause of the callers for an eval to start does not lend it.
const DefaultLendAfter = 4

// Gate admits the calls of one model. Its zero value is not usable; New makes one.
type Gate struct {
	mu         sync.Mutex
	capacity   int // 0: no bound
	lowLimit   int // in flight beyond which the lower lanes' calls wait: capacity less the callers' reserve
	inflight   int // calls admitted and not released
	callers    int // of which the interactive lane's
	waiting    int // calls in the lanes' queues
	maxWaiting int
	timeout    time.Duration
	weight     func(string) int
	lanes      [NumLanes]lane
	hold       time.Duration // the recent calls' time in the model (moving average), for RetryAfter
	// keys are the keys with calls admitted, or with callers' calls in the last one or two windows; the
	// sums below are over the active ones (peak > 0), kept as their peaks change and recounted by sweep.
	keys    map[string]keyState
	active  int // keys active
	weights int // their weights' sum
	margins int // their peaks plus one each: the places they keep (capOf)
	window  time.Duration
	// quiet counts the windows in a row with no key active, up to lendAfter: the reserve is lent at
	// lendAfter (limit).
	quiet, lendAfter int
	sweepAt          time.Time   // when the windows turn next (sweep)
	tick             *time.Timer // turns the windows while the gate knows a key (armTick)
	ticking          bool        // tick is armed
	// loans are the lower lanes' calls in flight that were admitted into the callers' reserve (in
	// flight at lowLimit or more, Loan), oldest first: a caller who finds no place takes the youngest's
	// (preempt). yielding counts the calls asked to yield that have not yet released their place.
	loans    []*Loan
	yielding int
}

// Loan is a copy's or a replay's way to give back a place it borrowed from the callers' reserve: given
// with its Call (and its Release), it lets the gate ask the call to end (its yield func, which cancels
// the call's context) when a caller finds every place taken while this call holds one of the reserve's.
// A yielded call is nobody's error: its lane's owner drops it (a shadow copy) or sends it again (a
// replay). Callers' calls have none.
type Loan struct {
	yield   func()
	at      int // its index in the gate's loans while it holds a borrowed place; -1 otherwise (mu held)
	yielded atomic.Bool
}

// NewLoan returns a loan that yields by calling yield: it must end the call soon (cancel its context) and
// must not call into the gate (it runs with the gate's lock held).
func NewLoan(yield func()) *Loan { return &Loan{yield: yield, at: -1} }

// Yielded reports whether the gate asked the call to give its place back.
func (l *Loan) Yielded() bool { return l != nil && l.yielded.Load() }

// keyState is what a gate knows of one key: its calls admitted (any lane, for pick), and of its
// callers' calls those in flight and the most in flight at once in this window and the last one.
type keyState struct {
	running   int
	callers   int
	cur, prev int
	weight    int // its weight as its latest caller's call said
}

// peak is the most callers' calls the key had in flight at once over the last one to two windows: 0
// when it is not active.
func (s keyState) peak() int { return max(s.cur, s.prev) }

// lane is a lane's queues: one per key with waiting calls, visited in turn.
type lane struct {
	active []*queue // keys with waiting calls, in their round's order
	next   int      // the queue whose turn it is
	byKey  map[string]*queue
	n      int // waiting calls
}

// queue is one key's waiting calls within a lane, oldest first, and what its turn still allows.
type queue struct {
	key     string
	weight  int
	deficit int
	calls   []*waiter
}

// waiter is one waiting call; done is closed when it is admitted or turned away.
type waiter struct {
	done    chan struct{}
	q       *queue
	lane    Lane
	loan    *Loan // a lower lane's call's, lent a place of the callers' reserve when it is admitted into one
	refused bool
}

// New returns a gate with these settings.
func New(c Config) *Gate {
	g := &Gate{timeout: c.Timeout, weight: c.Weight, maxWaiting: c.MaxWaiting, keys: map[string]keyState{}, window: c.Window}
	if g.timeout <= 0 {
		g.timeout = DefaultTimeout
	}
	if g.window <= 0 {
		g.window = DefaultWindow
	}
	g.lendAfter = c.LendAfter
	if g.lendAfter <= 0 {
		g.lendAfter = DefaultLendAfter
	}
	g.quiet = g.lendAfter
	g.setCapacity(c.Capacity)
	if c.MaxWaiting <= 0 {
		g.maxWaiting = max(64, 16*g.capacity)
	}
	for i := range g.lanes {
		g.lanes[i].byKey = map[string]*queue{}
	}
	return g
}

func (g *Gate) setCapacity(n int) {
	g.capacity = max(n, 0)
	g.lowLimit = g.capacity
	if g.capacity > 1 {
		g.lowLimit -= max(1, g.capacity/8)
	}
}

// limit is how many calls may be in flight for a call of lane l to be admitted: the capacity for
// callers. Copies and replays do not take the callers' reserve, an eighth of the capacity (at least one
// place), while a caller is about (a key active: a caller's call in flight or admitted within the last
// one to two windows), so that a caller arriving while an eval fills the model finds a place at once;
// once none has been about for LendAfter windows more (5-6 s after the last caller's call by default)
// the reserve is lent to them, and a caller who comes takes a borrowed place back at once (preempt) and
// the reserve with it. Beside callers they give way twice over: each caller's call
// in flight keeps one place of theirs free on top of its own, so that the lower lanes fill the
// replicas' batches and prefill queues only as far as the callers leave them room, yet always keep one
// call going while the reserve is free (mu held).
func (g *Gate) limit(l Lane) int {
	if l == Interactive || g.active == 0 && g.quiet >= g.lendAfter {
		return g.capacity
	}
	return min(g.lowLimit, max(g.lowLimit-g.callers, g.callers+1))
}

// capOf is how many callers' calls a key (st, of weight w) may have in flight: a key under its fair
// share of the capacity (capacity × its weight / the active keys' weights, at least 1) goes while there
// is a place; at or above it, a key leaves each other active key a margin of its peak plus one, so that
// their next call finds a place at once, on this edge as on any other, instead of waiting for the
// flooding key's next call to end (mu held).
func (g *Gate) capOf(st keyState, w int) int {
	weights, others := g.weights+w, g.margins
	if p := st.peak(); p > 0 {
		weights -= st.weight
		others -= p + 1
	}
	return max(g.capacity*w/weights, 1, g.capacity-others)
}

// weightOf is a call's key's weight: its own, else Config.Weight's, else 1.
func (g *Gate) weightOf(key string, w int) int {
	if w > 0 {
		return w
	}
	if g.weight != nil {
		return max(g.weight(key), 1)
	}
	return 1
}

// lend records a lower lane's call admitted now as a borrower when it takes a place of the callers'
// reserve (mu held, before admit counts it).
func (g *Gate) lend(loan *Loan) {
	if loan != nil && g.capacity > 0 && g.inflight >= g.lowLimit {
		loan.at = len(g.loans)
		g.loans = append(g.loans, loan)
	}
}

// preempt asks the youngest borrower to give its place back, for a caller who found none, and reports
// whether one did: while the calls already yielding and not yet released are fewer than the reserve,
// so that in flight exceeds the capacity by at most the reserve (mu held).
func (g *Gate) preempt() bool {
	if !g.canPreempt() {
		return false
	}
	n := len(g.loans)
	loan := g.loans[n-1]
	g.loans[n-1] = nil
	g.loans = g.loans[:n-1]
	loan.at = -1
	loan.yielded.Store(true)
	g.yielding++
	loan.yield()
	return true
}

// canPreempt reports whether preempt would find a borrower to yield (mu held).
func (g *Gate) canPreempt() bool {
	return len(g.loans) > 0 && g.yielding < g.capacity-g.lowLimit
}

// repay ends a lower lane's call's loan when it releases its place (mu held).
func (g *Gate) repay(loan *Loan) {
	if loan.yielded.Load() {
		g.yielding--
		return
	}
	if i := loan.at; i >= 0 {
		copy(g.loans[i:], g.loans[i+1:])
		g.loans[len(g.loans)-1] = nil
		g.loans = g.loans[:len(g.loans)-1]
		for _, o := range g.loans[i:] {
			o.at--
		}
		loan.at = -1
	}
}

// admit counts a call of lane l and key (of weight w, st its state now) in flight (mu held).
func (g *Gate) admit(l Lane, key string, st keyState, w int) {
	g.inflight++
	st.running++
	if l == Interactive {
		g.callers++
		g.quiet = 0
		st.callers++
		old := st.peak()
		if old > 0 {
			g.weights += w - st.weight
		}
		st.weight = w
		st.cur = max(st.cur, st.callers)
		if p := st.peak(); p > old {
			if old == 0 {
				g.active++
				g.weights += w
				g.margins++
			}
			g.margins += p - old
		}
	}
	g.keys[key] = st
	if !g.ticking {
		g.armTick()
	}
}

// sweep turns the windows: each key's peak of this window becomes its last one's, its callers' calls
// in flight now start the new one's, and a key with nothing in flight and no peak is forgotten; the
// active keys' sums are counted again. A gate nobody called for a whole window turns twice. Calls the
// new margins and limits let through go (mu held).
func (g *Gate) sweep(now time.Time) {
	twice := now.Sub(g.sweepAt) >= g.window
	g.active, g.weights, g.margins = 0, 0, 0
	for key, st := range g.keys {
		st.prev, st.cur = st.cur, st.callers
		if twice {
			st.prev = st.callers
		}
		if p := st.peak(); p > 0 {
			g.active++
			g.weights += st.weight
			g.margins += p + 1
		} else if st.running == 0 {
			delete(g.keys, key)
			continue
		}
		g.keys[key] = st
	}
	if g.active > 0 {
		g.quiet = 0
	} else if g.quiet < g.lendAfter {
		// Every window since the last turn counts: the timer stops while the gate knows no key.
		g.quiet = min(g.lendAfter, g.quiet+1+int(max(now.Sub(g.sweepAt), 0)/g.window))
	}
	g.sweepAt = now.Add(g.window)
	if g.waiting > 0 {
		g.dispatch()
	}
}

// armTick makes the windows turn while the gate knows a key: by a timer, so that no call pays for
// reading the clock, and a margin kept for a key gone quiet (or the callers' reserve) is released in
// time though no call comes or ends (mu held).
func (g *Gate) armTick() {
	g.ticking = true
	now := time.Now()
	if g.sweepAt.Before(now) {
		g.sweepAt = now.Add(g.window)
	}
	if g.tick == nil {
		g.tick = time.AfterFunc(g.sweepAt.Sub(now), g.onTick)
	} else {
		g.tick.Reset(g.sweepAt.Sub(now))
	}
}

func (g *Gate) onTick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ticking = false
	if now := time.Now(); !now.Before(g.sweepAt) {
		g.sweep(now)
	}
	if len(g.keys) > 0 {
		g.armTick()
	}
}

// SetCapacity changes the bound (replicas became healthy or were ejected); calls waiting are admitted
// at once up to the new bound, all of them for 0 (no bound).
func (g *Gate) SetCapacity(n int) {
	g.mu.Lock()
	g.setCapacity(n)
	g.dispatch()
	g.mu.Unlock()
}

// Acquire waits for the call's turn: at once when the model is under capacity and nobody waits,
// else in its lane's queue of key. It returns how long the call waited, and ErrBusy when it got no
// turn (or ctx's error when the caller went away). Every nil-error Acquire is followed by a Release of
// the same lane and key.
func (g *Gate) Acquire(ctx context.Context, l Lane, key string) (time.Duration, error) {
	return g.AcquireCall(ctx, Call{Lane: l, Key: key})
}

// Call is one call asking for its turn: its lane and key, and optionally its key's weight and its own
// bound on the wait.
type Call struct {
	Lane Lane
	Key  string
	// Weight is the key's weight (Config.Weight's, else 1, when 0); the latest call's applies to its
	// key's queue.
	Weight int
	// Timeout bounds this call's wait (the gate's when 0): a deployment's own queueTimeoutMs.
	Timeout time.Duration
	// Loan, on a lower lane's call, lets the gate take back a place it borrowed from the callers'
	// reserve (Loan); nil: the call keeps its place (a caller's always does).
	Loan *Loan
}

// AcquireCall is Acquire with the call's weight and timeout.
func (g *Gate) AcquireCall(ctx context.Context, c Call) (time.Duration, error) {
	l, key := c.Lane, c.Key
	if l >= NumLanes {
		l = NumLanes - 1
	}
	g.mu.Lock()
	weight, st := g.weightOf(key, c.Weight), g.keys[key]
	if (g.waiting == 0 || g.noneAhead(l)) && (g.capacity == 0 ||
		g.inflight < g.limit(l) && (l != Interactive || st.callers < g.capOf(st, weight))) {
		if l != Interactive {
			g.lend(c.Loan)
		}
		g.admit(l, key, st, weight)
		g.mu.Unlock()
		return 0, nil
	}
	if l == Interactive && g.capacity > 0 && g.inflight >= g.capacity && g.canPreempt() &&
		g.noneAhead(l) && st.callers < g.capOf(st, weight) && g.preempt() {
		// Every place is taken and some by copies or replays in the callers' reserve: the youngest
		// gives its place back, and the caller goes at once.
		g.admit(l, key, st, weight)
		g.mu.Unlock()
		return 0, nil
	}
	var loan *Loan
	if l != Interactive {
		loan = c.Loan
	}
	w := g.enqueue(l, key, weight, loan)
	if w != nil {
		// A place may be free that the calls ahead may not take (they hold their share): this one
		// takes it at once when it may.
		g.dispatch()
	}
	g.mu.Unlock()
	if w == nil {
		return 0, ErrBusy
	}
	start := time.Now()
	timeout := g.timeout
	if c.Timeout > 0 {
		timeout = c.Timeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	waited := time.Since(start)
	select {
	case <-w.done: // admitted or refused, whatever else happened meanwhile
		if w.refused {
			return waited, ErrBusy
		}
		return waited, nil
	default:
	}
	g.remove(w)
	if err := ctx.Err(); err != nil {
		return waited, err
	}
	return waited, ErrBusy
}

// noneAhead reports whether no call waits in lane l or a higher one: a caller's call then goes past
// copies and replays held by the callers' reserve (mu held).
func (g *Gate) noneAhead(l Lane) bool {
	for i := Lane(0); i <= l && i < NumLanes; i++ {
		if g.lanes[i].n > 0 {
			return false
		}
	}
	return true
}

// Release ends an admitted call of lane l and key that held the model for held; the next waiting call
// takes its place.
func (g *Gate) Release(l Lane, key string, held time.Duration) {
	g.ReleaseCall(Call{Lane: l, Key: key}, held)
}

// ReleaseCall is Release of the Call that was admitted (its lane, key and loan).
func (g *Gate) ReleaseCall(c Call, held time.Duration) {
	l, key := c.Lane, c.Key
	if l >= NumLanes {
		l = NumLanes - 1
	}
	g.mu.Lock()
	if c.Loan != nil && l != Interactive {
		g.repay(c.Loan)
	}
	g.inflight--
	st := g.keys[key]
	st.running--
	if l == Interactive {
		g.callers--
		st.callers--
	}
	if st.running > 0 || st.peak() > 0 {
		g.keys[key] = st
	} else {
		delete(g.keys, key)
	}
	// A moving average over about the last 8 calls: what a call now takes, for RetryAfter.
	g.hold += (held - g.hold) / 8
	if g.waiting > 0 {
		g.dispatch()
	}
	g.mu.Unlock()
}

// RetryAfter is when a refused call may try again: about the time the calls now waiting need to be
// served (the recent calls' time in the model, times the waiting calls per unit of capacity), between
// 1 and 60 seconds.
func (g *Gate) RetryAfter() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	rounds := 1
	if g.capacity > 0 {
		rounds += g.waiting / g.capacity
	}
	d := g.hold * time.Duration(rounds)
	return min(max(d, time.Second), time.Minute)
}

// Stats is a gate's state, for the metrics.
type Stats struct {
	Capacity int // 0: no bound
	InFlight int
	Waiting  [NumLanes]int
}

// Stats returns the gate's state now.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Stats{Capacity: g.capacity, InFlight: g.inflight}
	for i := range g.lanes {
		s.Waiting[i] = g.lanes[i].n
	}
	return s
}

// enqueue queues a call of key in lane l, or returns nil when the queue is full and the call's key is
// not the one to make room for (mu held). weight is the key's weight from now on.
func (g *Gate) enqueue(l Lane, key string, weight int, loan *Loan) *waiter {
	if g.waiting >= g.maxWaiting && !g.makeRoom(l, key) {
		return nil
	}
	ln := &g.lanes[l]
	q := ln.byKey[key]
	if q != nil {
		q.weight = weight
	}
	if q == nil {
		q = &queue{key: key, weight: weight}
		ln.byKey[key] = q
		// A key that starts waiting joins at the end of the round: just before the queue whose turn it
		// is, so that the keys already waiting are each served once before it.
		ln.active = append(ln.active, nil)
		copy(ln.active[ln.next+1:], ln.active[ln.next:])
		ln.active[ln.next] = q
		if len(ln.active) > 1 {
			ln.next++
		}
	}
	w := &waiter{done: make(chan struct{}), q: q, lane: l, loan: loan}
	q.calls = append(q.calls, w)
	ln.n++
	g.waiting++
	return w
}

// makeRoom turns away one waiting call for a newcomer of key in lane l when that is fair: the newest
// call of a lower lane's longest queue, else of l's longest queue when it is longer by two or more than
// key's (mu held). It reports whether room was made.
func (g *Gate) makeRoom(l Lane, key string) bool {
	for low := NumLanes - 1; low >= l; low-- {
		ln := &g.lanes[low]
		if ln.n == 0 {
			continue
		}
		var longest *queue
		for _, q := range ln.active {
			if longest == nil || len(q.calls) > len(longest.calls) {
				longest = q
			}
		}
		if low == l {
			mine := 0
			if q := ln.byKey[key]; q != nil {
				mine = len(q.calls)
			}
			if len(longest.calls) < mine+2 {
				return false
			}
		}
		w := longest.calls[len(longest.calls)-1]
		g.remove(w)
		w.refused = true
		close(w.done)
		return true
	}
	return false
}

// dispatch admits waiting calls while there is capacity: from the highest lane with calls, the next
// of its keys in turn; a lower lane's only within its limit. When every caller waiting holds its share
// and the free places are other keys' margins, nobody goes. A caller who finds no free place takes a
// borrowed one back (preempt) (mu held).
func (g *Gate) dispatch() {
	for g.waiting > 0 {
		l := Lane(0)
		for g.lanes[l].n == 0 {
			l++
		}
		full := g.capacity > 0 && g.inflight >= g.limit(l)
		if full && (l != Interactive || !g.canPreempt()) {
			return // the callers' reserve: nobody waits in a higher lane
		}
		w := g.pick(&g.lanes[l], g.capacity > 0 && l == Interactive)
		if w == nil {
			return
		}
		if full {
			g.preempt()
		}
		g.waiting--
		if l != Interactive {
			g.lend(w.loan)
		}
		g.admit(l, w.q.key, g.keys[w.q.key], w.q.weight)
		close(w.done)
	}
}

// pick takes the lane's next call: of the keys waiting (below their cap, capOf, when capped), those
// with the fewest calls running for their weight go first (a key below its share of the capacity is
// not kept waiting by a key above its own), and among them, deficit round robin from the queue whose
// turn it is; nil when every key waiting is at its cap (mu held).
func (g *Gate) pick(ln *lane, capped bool) *waiter {
	best := -1
	for k := range len(ln.active) {
		i := (ln.next + k) % len(ln.active)
		q := ln.active[i]
		if st := g.keys[q.key]; capped && st.callers >= g.capOf(st, q.weight) {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := ln.active[best]
		if g.keys[q.key].running*b.weight < g.keys[b.key].running*q.weight {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	if best != ln.next {
		ln.next = best
		ln.active[best].deficit = 0 // its turn starts now
	}
	return ln.pop()
}

// pop takes the next call of the lane by deficit round robin: the queue whose turn it is gains its
// weight in credit when it has none, and spends one per call; the turn passes on when its credit is
// spent or its queue is empty.
func (ln *lane) pop() *waiter {
	q := ln.active[ln.next]
	if q.deficit <= 0 {
		q.deficit = q.weight
	}
	w := q.calls[0]
	q.calls[0] = nil
	q.calls = q.calls[1:]
	q.deficit--
	ln.n--
	switch {
	case len(q.calls) == 0:
		ln.drop(ln.next)
	case q.deficit == 0:
		ln.next = (ln.next + 1) % len(ln.active)
	}
	return w
}

// drop takes the empty queue at i out of the round.
func (ln *lane) drop(i int) {
	q := ln.active[i]
	delete(ln.byKey, q.key)
	copy(ln.active[i:], ln.active[i+1:])
	ln.active[len(ln.active)-1] = nil
	ln.active = ln.active[:len(ln.active)-1]
	if i < ln.next {
		ln.next--
	}
	if ln.next >= len(ln.active) {
		ln.next = 0
	}
}

// remove takes a waiting call out of its queue (it timed out, its caller left, or room was made).
func (g *Gate) remove(w *waiter) {
	q := w.q
	for i, c := range q.calls {
		if c == w {
			copy(q.calls[i:], q.calls[i+1:])
			q.calls[len(q.calls)-1] = nil
			q.calls = q.calls[:len(q.calls)-1]
			break
		}
	}
	ln := &g.lanes[w.lane]
	ln.n--
	g.waiting--
	if len(q.calls) == 0 {
		for i, a := range ln.active {
			if a == q {
				ln.drop(i)
				break
			}
		}
	}
}
