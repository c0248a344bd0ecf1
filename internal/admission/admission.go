// Package admission decides when a call may go to its model: up to the model's capacity at once, the
// others waiting in priority lanes and, within a lane, in one queue per key: the key with the fewest calls
// running first, keys level with each other by deficit round robin.
package admission

import (
	"context"
	"errors"
	"sync"
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
}

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
	// running counts each key's admitted calls, whatever their lane: a key below its share of the
	// capacity goes before keys at or above theirs (pick).
	running map[string]int
}

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
	refused bool
}

// New returns a gate with these settings.
func New(c Config) *Gate {
	g := &Gate{timeout: c.Timeout, weight: c.Weight, maxWaiting: c.MaxWaiting, running: map[string]int{}}
	if g.timeout <= 0 {
		g.timeout = DefaultTimeout
	}
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
// callers. Copies and replays never take the callers' reserve, an eighth of the capacity (at least one
// place), so that a caller arriving while an eval fills the model finds a place at once; and beside
// callers they give way twice over: each caller's call in flight keeps one place of theirs free on top
// of its own, so that the lower lanes fill the replicas' batches and prefill queues only as far as the
// callers leave them room, yet always keep one call going while the reserve is free (mu held).
func (g *Gate) limit(l Lane) int {
	if l == Interactive {
		return g.capacity
	}
	return min(g.lowLimit, max(g.lowLimit-g.callers, g.callers+1))
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
}

// AcquireCall is Acquire with the call's weight and timeout.
func (g *Gate) AcquireCall(ctx context.Context, c Call) (time.Duration, error) {
	l, key := c.Lane, c.Key
	g.mu.Lock()
	if (g.waiting == 0 || g.noneAhead(l)) && (g.capacity == 0 || g.inflight < g.limit(l)) {
		g.inflight++
		if l == Interactive {
			g.callers++
		}
		g.running[key]++
		g.mu.Unlock()
		return 0, nil
	}
	w := g.enqueue(l, key, c.Weight)
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
	g.mu.Lock()
	g.inflight--
	if l == Interactive {
		g.callers--
	}
	if n := g.running[key] - 1; n > 0 {
		g.running[key] = n
	} else {
		delete(g.running, key)
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
// not the one to make room for (mu held). weight, when set, is the key's weight from now on.
func (g *Gate) enqueue(l Lane, key string, weight int) *waiter {
	if l >= NumLanes {
		l = NumLanes - 1
	}
	if g.waiting >= g.maxWaiting && !g.makeRoom(l, key) {
		return nil
	}
	ln := &g.lanes[l]
	q := ln.byKey[key]
	if q != nil && weight > 0 {
		q.weight = weight
	}
	if q == nil {
		if weight <= 0 {
			weight = 1
			if g.weight != nil {
				weight = max(g.weight(key), 1)
			}
		}
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
	w := &waiter{done: make(chan struct{}), q: q, lane: l}
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
// of its keys in turn; a lower lane's only within its limit (mu held).
func (g *Gate) dispatch() {
	for g.waiting > 0 && (g.capacity == 0 || g.inflight < g.capacity) {
		l := Lane(0)
		for g.lanes[l].n == 0 {
			l++
		}
		if g.capacity > 0 && g.inflight >= g.limit(l) {
			return // the callers' reserve: nobody waits in a higher lane
		}
		w := g.pick(&g.lanes[l])
		g.waiting--
		g.inflight++
		if l == Interactive {
			g.callers++
		}
		g.running[w.q.key]++
		close(w.done)
	}
}

// pick takes the lane's next call: of the keys waiting, those with the fewest calls running for their
// weight go first (a key below its share of the capacity is not kept waiting by a key above its own),
// and among them, deficit round robin from the queue whose turn it is (mu held).
func (g *Gate) pick(ln *lane) *waiter {
	n := len(ln.active)
	best := ln.next
	for k := 1; k < n; k++ {
		i := (ln.next + k) % n
		q, b := ln.active[i], ln.active[best]
		if g.running[q.key]*b.weight < g.running[b.key]*q.weight {
			best = i
		}
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
