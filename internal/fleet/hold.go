package fleet

import (
	"context"
	"math/bits"
	"slices"
	"time"
)

// Holding calls for adapter slots: a call whose adapter has no slot free on any replica waits in this
// process (PickWait) until one of its own calls frees a slot, and the drain keeps a slot from new calls
// so that held ones are not starved (docs/LORA.md, "Fleets").

// PickWait is Pick, but in affinity mode a call of an adapter that would wait for a slot on any
// replica it could go to is held here until a slot frees on one of them, and goes there: a slot
// wait on one replica would last until a slot frees there, where held it takes the first slot to
// free on any (vLLM's slots are per replica; held calls share them all, first come first served).
// It holds only while the slots are held by calls from this process, whose ends it sees; a slot held
// by another edge's calls (known from the scrape) gives no such signal, and the call goes to wait on
// the replica as with Pick. It returns ctx's error when ctx ends first.
func (f *Fleet) PickWait(ctx context.Context, req Request) (Pick, error) {
	f.mu.Lock()
	pk, err := f.pick(req, true)
	if err != errHold {
		f.mu.Unlock()
		return pk, err
	}
	w := f.hold(req)
	f.mu.Unlock()
	select {
	case got := <-w.got:
		return got.pk, got.err
	case <-ctx.Done():
	}
	f.mu.Lock()
	if i := slices.Index(f.waiters, w); i >= 0 {
		f.waiters = slices.Delete(f.waiters, i, i+1)
		f.wake() // a slot may drain for it alone
		f.mu.Unlock()
		return Pick{}, ctx.Err()
	}
	f.mu.Unlock()
	if got := <-w.got; got.err == nil { // picked as ctx ended
		f.Done(got.pk, Abandoned)
	}
	return Pick{}, ctx.Err()
}

// hold puts a call in the line of those held, and chooses a slot to drain for it. Called with f.mu
// held.
func (f *Fleet) hold(req Request) *waiter {
	w := &waiter{req: req, got: make(chan picked, 1), since: f.now()}
	f.waiters = append(f.waiters, w)
	f.chooseDrain()
	return w
}

// waiter is a call held by PickWait.
type waiter struct {
	req   Request
	got   chan picked
	since time.Time // when it was held
}

type picked struct {
	pk  Pick
	err error
}

// wake tries the held calls again, first held first, after a slot may have freed. A slot drains only
// while calls of other adapters than its own are held: when only its own remain, they join its batch.
func (f *Fleet) wake() {
	for f.wakeOnce() {
	}
}

// wakeOnce is one pass of wake; it says whether the drain ended and the held calls are to be tried
// again.
func (f *Fleet) wakeOnce() bool {
	for i := 0; i < len(f.waiters); i++ {
		w := f.waiters[i]
		pk, err := f.pick(w.req, true)
		if err == errHold {
			continue
		}
		if err == nil {
			pk.Replica.held++
			pk.Replica.heldFor += f.now().Sub(w.since)
		}
		w.got <- picked{pk, err}
		f.waiters = slices.Delete(f.waiters, i, i+1)
		i--
	}
	if f.drain == nil {
		return false
	}
	name := f.drain.adapters[f.drainSlot].name
	for _, w := range f.waiters {
		if w.req.Adapter != name {
			return false
		}
	}
	f.drain = nil
	return true
}

// holds says whether a call of adapter picked to r is held: it would wait for a slot there, and some
// candidate's slot is held by calls from this process (whose end will wake it), or r is where the
// adapter's slot drains (drained; its calls from here will end). A slot that frees goes to the calls
// held at once (wake, under the same lock), so a new call never takes one before them.
func (f *Fleet) holds(cand uint64, r *Replica, adapter string, drained uint64) bool {
	if drained&(1<<r.pos) != 0 {
		return true
	}
	held, _, a := r.slots(adapter, adapterKey(adapter))
	if a != nil && a.holds() || held < f.cfg.MaxLoras {
		return false // it joins its adapter's batch, or takes a free slot
	}
	for c := cand; c != 0; c &= c - 1 {
		for i := range f.replicas[bits.TrailingZeros64(c)].adapters {
			if a := &f.replicas[bits.TrailingZeros64(c)].adapters[i]; a.holds() && a.inflight > 0 {
				return true
			}
		}
	}
	return false
}

// chooseDrain picks, while calls are held and no slot drains, the slot to drain: among the slots held
// by calls from this process (whose ends it sees) of adapters with no call held, the one whose
// adapter's latest call here is the oldest, the likeliest to free first. Until it frees it takes no
// new call (they go where the adapter holds another slot, or are held in line), so that a held call
// waits for at most the calls already there, not for as long as the adapter keeps getting calls.
// Without it, calls of the adapters holding slots always went ahead of those held, and a slot freed
// only when its adapter happened to have no call in flight (docs/LORA.md, "Fleets").
func (f *Fleet) chooseDrain() {
	if f.drain != nil || len(f.waiters) == 0 {
		return
	}
	var victim *adapterUse
	for _, r := range f.replicas {
		if !r.healthy {
			continue
		}
		for i := range r.adapters {
			a := &r.adapters[i]
			if !a.holds() || a.inflight == 0 || victim != nil && a.last >= victim.last || f.isHeld(a.name) {
				continue
			}
			victim, f.drain, f.drainSlot = a, r, int8(i)
		}
	}
}

// isHeld says whether a call of adapter is held.
func (f *Fleet) isHeld(adapter string) bool {
	for _, w := range f.waiters {
		if w.req.Adapter == adapter {
			return true
		}
	}
	return false
}
