package fleet

import (
	"math"
	"math/bits"
	"time"
)

// The LoRA slot model: which adapters each replica runs or has in flight (from this process's calls and
// vLLM's scraped lora_requests_info), which replicas have a free slot, and the adapter rule of a pick.

// maxAdapters is how many adapters are tracked per replica, running or in flight from this process.
const maxAdapters = 16

// adapterUse is an adapter a replica has calls of as far as this process knows: requests in flight
// from here, or named by the replica's vllm:lora_requests_info. The picker follows the replica's
// admission as vLLM does it for --max-loras: an adapter takes a slot when its first call arrives and
// fewer than MaxLoras adapters hold one, and keeps it until its last call ends; an adapter arriving
// when every slot is held waits, and the one that waited longest takes the next slot that frees.
type adapterUse struct {
	name     string
	key      uint64 // adapterKey(name), compared before the name
	inflight int
	scraped  bool // named running by the latest scrape (so it holds a slot)
	slotted  bool // holds a slot for the calls from here
	// last is the Fleet's pick count when the adapter's latest call here was picked: the adapter
	// whose latest call is the oldest is the likeliest to have none left first (and free its slot).
	// since is the pick count when it began waiting for a slot.
	last, since uint64
	// gap is the moving mean of the picks between the adapter's calls here (0 before its second):
	// when its next call is due (coldness).
	gap uint64
	// ended is when this process saw its last call here end (since epoch; 0 before): a scrape
	// naming it running within scrapeLag of that is taken for stale (markScraped).
	ended time.Duration
}

// adapterKey is the hash of an adapter's name that its entries are found by (0 for "": none).
func adapterKey(name string) uint64 {
	if name == "" {
		return 0
	}
	return nonZero(hashString(k2, name))
}

func (a *adapterUse) running() bool { return a.inflight > 0 || a.scraped }

// holds says whether the adapter holds one of the replica's slots; waits, whether it waits for one.
func (a *adapterUse) holds() bool { return a.scraped || a.inflight > 0 && a.slotted }

func (a *adapterUse) waits() bool { return a.inflight > 0 && !a.holds() }

// loraRule narrows cand, for an adapter, to the replicas running it or with a free slot (least-loaded's
// adapter rule); when none is, cand is kept whole (the request waits for a slot wherever it goes).
// narrowed says it changed.
func (f *Fleet) loraRule(cand uint64, adapter string) (uint64, bool) {
	if adapter == "" || f.cfg.MaxLoras == 0 {
		return cand, false
	}
	run, free, _, waits, _ := f.adapterSets(cand, adapter, adapterKey(adapter))
	fit := run | free | waits
	if fit == 0 || fit == cand {
		return cand, false
	}
	return fit, true
}

// adapterSets splits cand by what a call of adapter meets there, as far as this process knows: run,
// the adapter holds a slot (the call joins its batch); free, it does not but a slot is free; waits,
// it waits there for a slot; ran, those of free where it ran before (warmSet tells which of them
// still have it in a slot). calm are the replicas where no adapter waits.
func (f *Fleet) adapterSets(cand uint64, adapter string, key uint64) (run, free, ran, waits, calm uint64) {
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		held, waiting, a := r.slots(adapter, key)
		bit := uint64(1) << r.pos
		switch {
		case a != nil && a.holds():
			run |= bit
		case a != nil && a.waits():
			waits |= bit
		case held < f.cfg.MaxLoras:
			free |= bit
			if a != nil && a.last != 0 {
				ran |= bit
			}
		}
		if waiting == 0 {
			calm |= bit
		}
	}
	return run, free, ran, waits, calm
}

// warmSet returns the replicas of ran where adapter is still resident (resident): a call there costs
// no adapter load.
func (f *Fleet) warmSet(ran uint64, adapter string, key uint64) uint64 {
	var warm uint64
	for c := ran; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		if _, _, a := r.slots(adapter, key); r.resident(a, f.cfg.MaxLoras) {
			warm |= 1 << r.pos
		}
	}
	return warm
}

// slots returns how many adapters hold a slot of r and how many wait for one, as far as this process
// knows, and adapter's entry if r has one (calls there now, or before: see resident); key is
// adapterKey(adapter).
func (r *Replica) slots(adapter string, key uint64) (held, waiting int, entry *adapterUse) {
	for i := range r.adapters {
		a := &r.adapters[i]
		if key != 0 && a.key == key && a.name == adapter {
			entry = a
		}
		if a.inflight == 0 && !a.scraped {
			continue // no calls: neither holds nor waits
		}
		if a.scraped || a.slotted { // holds, as it has calls
			held++
		} else {
			waiting++
		}
	}
	return held, waiting, entry
}

// resident says whether entry's adapter is likely still in one of r's GPU slots though none of its
// calls runs there: vLLM keeps an adapter in its slot after its last call until another adapter needs
// the slot, least recently used first, so an adapter is resident while fewer than maxLoras adapters
// have run on r since it last did (those running count as the most recent). A call of a resident
// adapter costs no load there, and finds its own prefix where its session ran before.
func (r *Replica) resident(entry *adapterUse, maxLoras int) bool {
	if entry == nil || entry.last == 0 {
		return false
	}
	newer := 0
	for i := range r.adapters {
		a := &r.adapters[i]
		if a != entry && a.name != "" && (a.running() || a.last > entry.last) {
			newer++
		}
	}
	return newer < maxLoras
}

// admitWaiting gives the slots free on r to the adapters that waited longest, as vLLM admits them.
func (r *Replica) admitWaiting(maxLoras int) {
	for {
		held, _, _ := r.slots("", 0)
		if held >= maxLoras {
			return
		}
		var first *adapterUse
		for i := range r.adapters {
			if a := &r.adapters[i]; a.waits() && (first == nil || a.since < first.since) {
				first = a
			}
		}
		if first == nil {
			return
		}
		first.slotted = true
	}
}

// pickAdapter picks among cand for a call of adapter on replicas of MaxLoras slots. vLLM batches at
// most --max-loras adapters: a call whose adapter holds no slot waits until one frees (an adapter's
// last call ends), however short the replica's queue, and bringing an adapter into a slot stalls the
// replica and evicts the replica's least recently used adapter. So an adapter stays where it holds a
// slot or is still resident, and takes a new slot where that evicts the fleet's coldest adapter. In
// order (within each, the lowest score):
//
//  0. where it holds a slot and no other adapter waits (its calls there would keep the waiting one
//     from a slot), within the load bound; 1. where it holds one, within the bound;
//  2. a free slot where it is still resident (warmSet: no load, and its session's prefix), within the
//     bound;
//  3. an empty slot (fewer than MaxLoras adapters resident: the load evicts nothing), within the bound;
//  4. where it holds a slot, and 5. where it is resident, within twice the bound: a queue there is
//     cheaper than a load that evicts another adapter, whose next call then loads it again elsewhere;
//  6. a free slot within the bound where the fewest adapters hold one, evicting the coldest (coldestSlot);
//  7. where it holds a slot, 8. where it is resident, 9. a free slot (the coldest), above any bound: a
//     queue there is shorter than a slot wait;
//  10. where it already waits for a slot (it gets the slot with the calls ahead of it);
//  11. and only then a slot wait, where the fewest wait and a slot frees first.
//
// A hot adapter spreads to empty slots, and past twice the bound to the coldest slot elsewhere: it
// lives on more replicas. Before steps 3-5, a call over the bound took a free slot elsewhere whatever
// it evicted, and with 12 adapters on 12 slots (4 replicas of 3) affinity loaded an adapter on 0.29 to
// 0.31 of its calls where none was needed after the first 12 (the model, TestSimManyAdapters:
// FLEET_SIM_SLOTS=3): each adapter ended up on every replica, and each replica's slots turned over.
func (f *Fleet) pickAdapter(cand uint64, limit int, blocks []uint64, key uint64, p int, owner uint8, adapter string, drained uint64) (*Replica, Reason) {
	akey := adapterKey(adapter)
	run, free, ran, waits, calm := f.adapterSets(cand, adapter, akey)
	run &^= drained // its slot there takes no new call
	warm, warmMade := uint64(0), false
	warmSet := func() uint64 {
		if !warmMade {
			warm, warmMade = f.warmSet(ran, adapter, akey), true
		}
		return warm
	}
	var victims [MaxReplicas]uint64 // of the replicas of free, made at step 3
	for tier := range 12 {
		var set uint64
		lim := unbounded
		switch tier { // the sets are made only when the tiers before them found nothing
		case 0:
			set, lim = run&calm, limit
		case 1:
			set, lim = run, limit
		case 2:
			set, lim = warmSet(), limit
		case 3:
			f.victims(free, &victims)
			set, lim = f.emptySlots(free, limit, &victims), limit
		case 4:
			set, lim = run, 2*limit
		case 5:
			set, lim = warmSet(), 2*limit
		case 6:
			set, lim = f.coldestSlot(f.fewestHeld(free, limit), limit, &victims), limit
		case 7:
			set = run
		case 8:
			set = warmSet()
		case 9:
			set = f.coldestSlot(f.fewestHeld(free, unbounded), unbounded, &victims)
		case 10:
			set = waits
		case 11:
			set = f.soonestSlot(cand)
		}
		if set == 0 {
			continue
		}
		r := f.lowestScore(set, lim, blocks, key, p, owner)
		switch {
		case r == nil:
			continue
		case p >= 0 && r.pos == owner:
			return r, ReasonAffinity
		case tier < 11 && set != cand:
			return r, ReasonLora // the adapter's slots decided
		case p < 0 && len(blocks) > 0:
			return r, ReasonHash
		}
		return r, ReasonLoad
	}
	return nil, ReasonLoad // unreachable: the last set is not empty
}

// slotCount is the adapters a replica runs at once: MaxLoras, or no limit without it.
func (f *Fleet) slotCount() int {
	if f.cfg.MaxLoras == 0 {
		return math.MaxInt
	}
	return f.cfg.MaxLoras
}

// fewestHeld returns the replicas of set under limit where the fewest adapters hold a slot.
func (f *Fleet) fewestHeld(set uint64, limit int) uint64 {
	var out uint64
	best := math.MaxInt
	for c := set; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		if r.inflight >= limit {
			continue
		}
		held, _, _ := r.slots("", 0)
		if held < best {
			best, out = held, 0
		}
		if held == best {
			out |= 1 << r.pos
		}
	}
	return out
}

// victims fills v with the victim of each replica of set.
func (f *Fleet) victims(set uint64, v *[MaxReplicas]uint64) {
	for c := set; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		v[r.pos] = r.victim(f.cfg.MaxLoras, f.picks)
	}
}

// emptySlots returns the replicas of set under limit with a slot no adapter is resident in (v, their
// victims, 0): where bringing an adapter in evicts none, the fewest adapters held first.
func (f *Fleet) emptySlots(set uint64, limit int, v *[MaxReplicas]uint64) uint64 {
	var empty uint64
	for c := set; c != 0; c &= c - 1 {
		if r := f.replicas[bits.TrailingZeros64(c)]; r.inflight < limit && v[r.pos] == 0 {
			empty |= 1 << r.pos
		}
	}
	if empty == 0 {
		return 0
	}
	return f.fewestHeld(empty, limit)
}

// coldestSlot returns the replicas of set under limit where the adapter a new one would evict (the
// replica's least recently used resident adapter with no call running, as vLLM evicts) is the
// coldest (victims, of the replicas of set: due the latest, or overdue), those with an empty slot
// first. So the fleet's slots evict as one cache of all of them would under Belady's rule, with each
// adapter's next call guessed from its gaps, and an adapter resident on two replicas gives up its
// staler copy first. Choosing by fewest held alone evicted whatever the emptiest replica held, and
// that adapter's next call found it resident nowhere and evicted another.
func (f *Fleet) coldestSlot(set uint64, limit int, victims *[MaxReplicas]uint64) uint64 {
	var out uint64
	best := uint64(math.MaxUint64)
	for c := set; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		if r.inflight >= limit {
			continue
		}
		v := victims[r.pos]
		if v < best {
			best, out = v, 0
		}
		if v == best {
			out |= 1 << r.pos
		}
	}
	return out
}

// victim scores the adapter that a new one would evict on r (the least recent of the maxLoras most
// recently used adapters there, running ones the most recent, as vLLM evicts): 0 when fewer than
// maxLoras adapters are resident (a slot is empty), MaxUint64 when it runs (no slot frees), else its
// coldness (lower the colder; now is the fleet's pick count). It allocates nothing.
func (r *Replica) victim(maxLoras int, now uint64) uint64 {
	var top [maxAdapters]uint64 // the recencies of the maxLoras most recent adapters so far
	var at [maxAdapters]int     // and their entries
	n := 0
	for i := range r.adapters {
		a := &r.adapters[i]
		if a.name == "" || a.last == 0 && !a.running() {
			continue
		}
		rec := a.last
		if a.running() {
			rec = math.MaxUint64
		}
		if n < min(maxLoras, maxAdapters) {
			top[n], at[n] = rec, i
			n++
			continue
		}
		m := 0 // the least recent kept goes if this one is more recent
		for j := 1; j < n; j++ {
			if top[j] < top[m] {
				m = j
			}
		}
		if rec > top[m] {
			top[m], at[m] = rec, i
		}
	}
	if n < maxLoras {
		return 0
	}
	m := 0
	for j := 1; j < n; j++ {
		if top[j] < top[m] {
			m = j
		}
	}
	if top[m] == math.MaxUint64 {
		return math.MaxUint64
	}
	return r.adapters[at[m]].coldness(now)
}

// coldness orders adapters for eviction, the lowest first: by when the adapter's next call is due
// (its latest call plus the mean gap between its calls here), the latest due the coldest, as
// Belady's rule evicts the adapter needed again the latest; an adapter overdue (no call for twice its
// gap) or with no gap yet (one call here) is colder than any due, the least recently used first.
// Least recently used alone thrashed where the adapters wanted exceed the slots by a few (sessions
// of 12 adapters on 8 slots: the adapter evicted was the next one called): docs/LORA.md, "Many
// adapters: loads against latency".
func (a *adapterUse) coldness(now uint64) uint64 {
	const due = 1 << 62
	if a.gap == 0 || now-a.last > 2*a.gap {
		return min(a.last, due-1)
	}
	return due + (due - min(a.last+a.gap, due))
}

// soonestSlot returns, for a call that must wait for a slot, the replicas of set where the fewest
// adapters wait ahead of it and, among those, where a slot is likeliest to free first: where the
// adapter holding a slot whose latest call was picked the longest ago is (an adapter only scraped,
// another edge's, counts as just used).
func (f *Fleet) soonestSlot(set uint64) uint64 {
	var out uint64
	bestWaiting, bestLast := math.MaxInt, uint64(math.MaxUint64)
	for c := set; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		waiting, oldest := 0, uint64(math.MaxUint64)
		for i := range r.adapters {
			switch a := &r.adapters[i]; {
			case a.waits():
				waiting++
			case a.holds() && a.inflight > 0:
				oldest = min(oldest, a.last)
			case a.holds():
				oldest = min(oldest, f.picks)
			}
		}
		if waiting < bestWaiting || waiting == bestWaiting && oldest < bestLast {
			bestWaiting, bestLast, out = waiting, oldest, 0
		}
		if waiting == bestWaiting && oldest == bestLast {
			out |= 1 << r.pos
		}
	}
	return out
}

// useAdapter counts a request for adapter in flight on r and returns its entry (-1 when the table is
// full of running adapters: it is then not tracked).
func (r *Replica) useAdapter(adapter string, now uint64, maxLoras int) int8 {
	free := -1 // the entry of the adapter that ran here least recently, if it runs no more
	for i := range r.adapters {
		a := &r.adapters[i]
		if a.name == adapter {
			if a.inflight == 0 {
				a.slotted, a.since = a.scraped, now // joining a scraped adapter's batch, or waiting anew
			}
			a.inflight++
			switch g := now - a.last; {
			case a.last == 0 || now <= a.last:
			case a.gap == 0:
				a.gap = g
			default:
				a.gap = (3*a.gap + g) / 4 // a quarter of the latest gap
			}
			a.last = now
			r.admitWaiting(maxLoras)
			return int8(i)
		}
		if !a.running() && (free < 0 || a.last < r.adapters[free].last) {
			free = i
		}
	}
	if free < 0 {
		return -1
	}
	r.adapters[free] = adapterUse{name: adapter, key: adapterKey(adapter), inflight: 1, last: now, since: now}
	r.admitWaiting(maxLoras)
	return int8(free)
}

// SetAdapterReady says whether the replica at url (as given to New or SetReplicas) serves adapter:
// false while svc loads it there (POST load_lora_adapter under way) or when the replica's listing
// lacks it, true once it is loaded. A call of the adapter goes only to replicas not known unready for
// it while any healthy one is: a call sent to a replica mid-load is answered 404 and waits for the
// load to end before its one retry. A replica keeps up to maxAdapters adapters unready; past that,
// the rest are not recorded (their calls may go there, and recover as before).
func (f *Fleet) SetAdapterReady(url, adapter string, ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.replicas {
		if r.URL != url {
			continue
		}
		free := -1
		for i, name := range r.unready {
			switch {
			case name == adapter && ready:
				r.unready[i] = ""
				f.unready--
				f.wake() // a call held for a slot may go there now
				return
			case name == adapter:
				return
			case name == "" && free < 0:
				free = i
			}
		}
		if !ready && free >= 0 {
			r.unready[free] = adapter
			f.unready++
		}
		return
	}
}

// readyFor returns the replicas of cand not known unready for adapter, or cand when every one is
// (the call then goes as before and recovers from a 404).
func (f *Fleet) readyFor(cand uint64, adapter string) uint64 {
	out := cand
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		for _, name := range r.unready {
			if name == adapter {
				out &^= 1 << r.pos
				break
			}
		}
	}
	if out == 0 {
		return cand
	}
	return out
}
