// Package fleet picks the replica of a model that serves each request: healthy replicas only, then for an adapter those running it or with a free slot, then the longest prefix match, under a bound on load (docs/LORA.md, "Fleets").
package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mode is a model's routing (the models file's `routing`).
type Mode uint8

const (
	// Affinity sends a prompt where its longest prefix went, within the load bound (the default with
	// replicas).
	Affinity Mode = iota
	// LeastLoaded sends each request to the replica with the fewest requests in flight and waiting.
	LeastLoaded
	// RoundRobin sends each request to the next healthy replica in turn, as a Kubernetes Service does.
	RoundRobin
)

var modeNames = [...]string{Affinity: "affinity", LeastLoaded: "least-loaded", RoundRobin: "round-robin"}

func (m Mode) String() string { return modeNames[m] }

// ParseMode reads a models file's routing; "" is Affinity.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Affinity, nil
	}
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("routing %q is not one of %s", s, strings.Join(modeNames[:], ", "))
}

// Reason says which rule decided a pick; metrics count picks by it.
type Reason uint8

const (
	ReasonAffinity Reason = iota // the replica that last got the prompt's longest known prefix, by the lowest score
	ReasonLora                   // the only replicas running the adapter or with a free slot for it
	ReasonLoad                   // the lowest score, new prefill blocks x (queue + 1), elsewhere than the prefix's replica
	ReasonHash                   // a prefix seen nowhere: the least loaded, ties by rendezvous hashing of its first block
	ReasonRetry                  // the next best replica after a failure before the first byte
	ReasonTurn                   // round-robin's next replica
	numReasons
)

var reasonNames = [numReasons]string{"affinity", "lora", "load", "hash", "retry", "round-robin"}

func (r Reason) String() string { return reasonNames[r] }

// Reasons returns every reason, in order.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Outcome is how a call to a replica ended, for Done.
type Outcome uint8

const (
	// OK: the replica answered (any status below 500, or an answer that began).
	OK Outcome = iota
	// Failed: refused, reset, a 5xx or a timeout before the answer's first byte. The replica is ejected.
	Failed
	// Abandoned: the call ended for a reason that says nothing of the replica's health (the client
	// went away, the request was bad). Health is left as it was.
	Abandoned
)

// MaxReplicas bounds the replicas of one model, so that candidate sets fit in a machine word.
const MaxReplicas = 64

// Health intervals: a replica that fails is out for minEjection, doubling with each ejection that no
// success separates from the last, up to maxEjection; once that has passed it is probed every
// probeEvery until GET /health answers 2xx.
const (
	minEjection = time.Second
	maxEjection = 30 * time.Second
	probeEvery  = 250 * time.Millisecond
)

// maxAdapters is how many adapters are tracked per replica, running or in flight from this process.
const maxAdapters = 16

// ErrNoReplica is Pick's error when no replica of the model is healthy.
var ErrNoReplica = errors.New("no healthy replica")

// Config tunes a model's picker.
type Config struct {
	Mode Mode
	// MaxLoras is the replicas' --max-loras, the adapters one replica runs at once; 0: no LoRA rule.
	MaxLoras int
	// Epsilon bounds load: no replica gets a request that would put it above (1+Epsilon) times the
	// mean in flight over the candidates (default 0.25).
	Epsilon float64
	// IndexSize is the number of block chains the prefix index remembers (default 65536; 16 bytes each).
	IndexSize int
}

// Replica is one inference server of a model. Its fields are read-only; its state lives in the Fleet.
type Replica struct {
	Addr string // host:port, what runs, traces and metrics name (never a key)
	URL  string // the OpenAI base URL, e.g. http://10.0.0.11:8000/v1
	root string // scheme://host:port, under which /health and /metrics are

	pos      uint8
	seed     uint64 // the replica's rendezvous seed, from its address
	healthy  bool
	inflight int
	// Scraped from /metrics: vllm:num_requests_waiting and vllm:num_requests_running.
	waiting, running int
	// pending sums the prefill blocks of the calls in flight here from this process (what each had to
	// prefill when picked): the most prefill a new call could wait behind.
	pending   int
	ejections int // since the last success, for the doubling interval
	outUntil  time.Time
	adapters  [maxAdapters]adapterUse
	picks     [numReasons]uint64
	ejected   uint64
	// held counts the calls sent here after PickWait held them for a slot, heldFor their time held.
	held    uint64
	heldFor time.Duration
}

// adapterUse is an adapter a replica has calls of as far as this process knows: requests in flight
// from here, or named by the replica's vllm:lora_requests_info. The picker follows the replica's
// admission as vLLM does it for --max-loras: an adapter takes a slot when its first call arrives and
// fewer than MaxLoras adapters hold one, and keeps it until its last call ends; an adapter arriving
// when every slot is held waits, and the one that waited longest takes the next slot that frees.
type adapterUse struct {
	name     string
	inflight int
	scraped  bool // named running by the latest scrape (so it holds a slot)
	slotted  bool // holds a slot for the calls from here
	// last is the Fleet's pick count when the adapter's latest call here was picked: the adapter
	// whose latest call is the oldest is the likeliest to have none left first (and free its slot).
	// since is the pick count when it began waiting for a slot.
	last, since uint64
}

func (a *adapterUse) running() bool { return a.inflight > 0 || a.scraped }

// holds says whether the adapter holds one of the replica's slots; waits, whether it waits for one.
func (a *adapterUse) holds() bool { return a.scraped || a.inflight > 0 && a.slotted }
func (a *adapterUse) waits() bool { return a.inflight > 0 && !a.holds() }

// Fleet is one model's replicas and the picker over them. Its methods are safe for concurrent use.
type Fleet struct {
	mu       sync.Mutex
	cfg      Config
	replicas []*Replica
	index    *prefixIndex
	waiters  []*waiter // calls held by PickWait, first held first
	// drain is the replica whose slot held by drainSlot's adapter takes no new call while calls are
	// held, so that it frees for them (nil: none drains).
	drain     *Replica
	drainSlot int8
	turn      uint64
	picks     uint64 // every pick so far: the clock of adapterUse.last
	now       func() time.Time
}

// New makes the picker of a model served by the replicas at the given base URLs.
func New(cfg Config, urls []string) (*Fleet, error) {
	if cfg.Epsilon == 0 {
		cfg.Epsilon = 0.25
	}
	if cfg.Epsilon < 0 || cfg.MaxLoras < 0 || cfg.IndexSize < 0 {
		return nil, errors.New("fleet: epsilon, maxLoras and index size must not be negative")
	}
	if cfg.IndexSize == 0 {
		cfg.IndexSize = 1 << 16
	}
	f := &Fleet{cfg: cfg, index: newPrefixIndex(cfg.IndexSize), now: time.Now}
	if err := f.SetReplicas(urls); err != nil {
		return nil, err
	}
	return f, nil
}

// SetReplicas replaces the replicas (a DNS name resolved again): those kept keep their state, new ones
// start healthy. The prefix index is forgotten when positions change.
func (f *Fleet) SetReplicas(urls []string) error {
	if len(urls) == 0 || len(urls) > MaxReplicas {
		return fmt.Errorf("fleet: %d replicas (want 1 to %d)", len(urls), MaxReplicas)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := map[string]*Replica{}
	for _, r := range f.replicas {
		old[r.URL] = r
	}
	next := make([]*Replica, 0, len(urls))
	moved := len(urls) != len(f.replicas)
	for i, raw := range urls {
		raw = strings.TrimRight(raw, "/")
		r := old[raw]
		if r == nil {
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" {
				return fmt.Errorf("fleet: replica %q is not a URL", raw)
			}
			r = &Replica{Addr: u.Host, URL: raw, root: u.Scheme + "://" + u.Host, healthy: true, seed: hashString(k1, u.Host)}
		}
		delete(old, raw)
		if int(r.pos) != i || f.replicas == nil {
			moved = true
		}
		r.pos = uint8(i)
		next = append(next, r)
	}
	if len(old) > 0 && len(next) == len(f.replicas) {
		moved = true
	}
	f.replicas = next
	if f.drain != nil && !slices.Contains(next, f.drain) {
		f.drain = nil
	}
	if moved {
		f.index.clear()
	}
	f.wake()
	return nil
}

// Request is what the picker knows of a request.
type Request struct {
	// Blocks are the chain hashes of the prompt as the upstream sees it (AppendBlocks).
	Blocks []uint64
	// Adapter is the LoRA adapter asked for, "" for the base model.
	Adapter string
	// Exclude is the replica that already failed this request: a retry goes elsewhere.
	Exclude *Replica
}

// Pick is a chosen replica; give it back to Done when the call ends.
type Pick struct {
	Replica *Replica
	Reason  Reason
	slot    int8  // the replica's adapters entry counted in flight, -1 for none
	prefill int32 // the blocks the replica had to prefill, counted in its pending
}

// Pick chooses the replica for req and counts the request in flight on it. It does not allocate.
func (f *Fleet) Pick(req Request) (Pick, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pick(req, false)
}

// errHold is pick's answer when the call is held: every replica where its adapter could run is
// waiting for a slot.
var errHold = errors.New("held for an adapter slot")

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

// pick is Pick; with mayHold, it answers errHold instead of counting a call that is to be held.
func (f *Fleet) pick(req Request, mayHold bool) (Pick, error) {
	var cand uint64
	for _, r := range f.replicas {
		if r.healthy && r != req.Exclude {
			cand |= 1 << r.pos
		}
	}
	if cand == 0 {
		return Pick{}, ErrNoReplica
	}
	var r *Replica
	var reason Reason
	var drained uint64 // the replica where the adapter's slot drains, when the call may be held
	owner, p := uint8(0), -1
	switch f.cfg.Mode {
	case RoundRobin:
		r, reason = f.nextTurn(cand), ReasonTurn
	case LeastLoaded:
		var narrowed bool
		cand, narrowed = f.loraRule(cand, req.Adapter)
		r, reason = f.leastLoaded(cand), ReasonLoad
		if narrowed {
			reason = ReasonLora
		}
	default:
		// The load bound is over every healthy candidate: a replica holding twice its share of the
		// fleet's calls is a hot spot whatever adapter it runs.
		limit := f.limit(cand)
		p, owner = f.index.longest(req.Blocks)
		if req.Adapter != "" && f.cfg.MaxLoras > 0 {
			if mayHold && f.drain != nil && f.drain.adapters[f.drainSlot].name == req.Adapter {
				drained = 1 << f.drain.pos
			}
			r, reason = f.pickAdapter(cand, limit, req.Blocks, p, owner, req.Adapter, drained)
			break
		}
		// The lowest score, where the owner of a known prefix prefills only what it lacks. A prefix
		// seen nowhere costs the same everywhere: it goes to the least loaded replica, ties broken by
		// rendezvous hashing of its first block (so that idle edges agree); the load bound alone let
		// it queue where another replica was idle (the uniform fleet row of make bench).
		r, reason = f.lowestScore(cand, limit, req.Blocks, p, owner), ReasonLoad
		switch {
		case p < 0 && len(req.Blocks) > 0:
			reason = ReasonHash
		case p >= 0 && r.pos == owner:
			reason = ReasonAffinity
		}
	}
	if req.Exclude != nil {
		reason = ReasonRetry
	}
	if mayHold && f.cfg.Mode == Affinity && req.Adapter != "" && f.cfg.MaxLoras > 0 && f.holds(cand, r, req.Adapter, drained) {
		return Pick{}, errHold
	}
	r.inflight++
	r.picks[reason]++
	pk := Pick{Replica: r, Reason: reason, slot: -1, prefill: int32(prefillBlocks(r, req.Blocks, p, owner))}
	r.pending += int(pk.prefill)
	f.picks++
	if req.Adapter != "" {
		pk.slot = r.useAdapter(req.Adapter, f.picks, f.slotCount())
	}
	if f.cfg.Mode == Affinity {
		start := 0
		if p >= 0 && owner == r.pos {
			start = p + 1 // the chain up to p already names r
		}
		for _, b := range req.Blocks[start:] {
			f.index.put(b, r.pos)
		}
	}
	return pk, nil
}

// Done records how a picked call ended: the request leaves the replica's count in flight, and a
// failure before the first byte ejects the replica.
func (f *Fleet) Done(pk Pick, o Outcome) {
	r := pk.Replica
	if r == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r.inflight--
	r.pending -= int(pk.prefill)
	if pk.slot >= 0 {
		a := &r.adapters[pk.slot]
		if a.inflight--; a.inflight == 0 {
			// This process saw the adapter's last call here end: its slot frees, and a scrape
			// older than that says nothing newer (another edge's calls show again at the next
			// scrape), while an adapter believed running where it ended keeps others from a slot.
			a.scraped, a.slotted = false, false
			if f.drain == r && f.drainSlot == pk.slot {
				f.drain = nil // drained: the calls held take the slot
			}
			r.admitWaiting(f.slotCount())
			f.wake()
			f.chooseDrain()
		}
	}
	switch o {
	case OK:
		r.ejections = 0
	case Failed:
		f.eject(r)
	}
}

// holds says whether a call of adapter picked to r is held: it would wait for a slot there, and some
// candidate's slot is held by calls from this process (whose end will wake it), or r is where the
// adapter's slot drains (drained; its calls from here will end). A slot that frees goes to the calls
// held at once (wake, under the same lock), so a new call never takes one before them.
func (f *Fleet) holds(cand uint64, r *Replica, adapter string, drained uint64) bool {
	if drained&(1<<r.pos) != 0 {
		return true
	}
	held, _, a := r.slots(adapter)
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

// eject takes r out of the picks for an interval doubling with each ejection since its last success.
// A replica already out stays out as it was: the calls that were in flight on it fail together.
func (f *Fleet) eject(r *Replica) {
	if !r.healthy {
		return
	}
	d := minEjection << min(r.ejections, 5)
	r.healthy = false
	r.outUntil = f.now().Add(min(d, maxEjection))
	r.ejections++
	r.ejected++
}

// loraRule narrows cand, for an adapter, to the replicas running it or with a free slot (least-loaded's
// adapter rule); when none is, cand is kept whole (the request waits for a slot wherever it goes).
// narrowed says it changed.
func (f *Fleet) loraRule(cand uint64, adapter string) (uint64, bool) {
	if adapter == "" || f.cfg.MaxLoras == 0 {
		return cand, false
	}
	run, free, waits, _ := f.adapterSets(cand, adapter)
	fit := run | free | waits
	if fit == 0 || fit == cand {
		return cand, false
	}
	return fit, true
}

// adapterSets splits cand by what a call of adapter meets there, as far as this process knows: run,
// the adapter holds a slot (the call joins its batch); free, it does not but a slot is free; waits,
// it waits there for a slot. calm are the replicas where no adapter waits.
func (f *Fleet) adapterSets(cand uint64, adapter string) (run, free, waits, calm uint64) {
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		held, waiting, a := r.slots(adapter)
		bit := uint64(1) << r.pos
		switch {
		case a != nil && a.holds():
			run |= bit
		case a != nil && a.waits():
			waits |= bit
		case held < f.cfg.MaxLoras:
			free |= bit
		}
		if waiting == 0 {
			calm |= bit
		}
	}
	return run, free, waits, calm
}

// slots returns how many adapters hold a slot of r and how many wait for one, as far as this process
// knows, and adapter's entry if it has calls there.
func (r *Replica) slots(adapter string) (held, waiting int, entry *adapterUse) {
	for i := range r.adapters {
		a := &r.adapters[i]
		if a.inflight == 0 && !a.scraped {
			continue // no calls: neither holds nor waits
		}
		if a.scraped || a.slotted { // holds, as it has calls
			held++
		} else {
			waiting++
		}
		if a.name == adapter {
			entry = a
		}
	}
	return held, waiting, entry
}

// admitWaiting gives the slots free on r to the adapters that waited longest, as vLLM admits them.
func (r *Replica) admitWaiting(maxLoras int) {
	for {
		held, _, _ := r.slots("")
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
// replica. So an adapter stays where it holds a slot, and takes a free slot where the fewest are held,
// so that each replica's adapters fit its slots. In order: where it holds a slot and no other adapter
// waits (its calls there would keep the waiting one from a slot), within the load bound; where it holds
// one, within the bound; a free slot within the bound; where it holds one above the bound (a queue there is shorter than
// a slot wait); a free slot above it; where it already waits for a slot (it gets the slot with the
// calls ahead of it); and only then a slot wait, where the fewest wait and a slot frees first. Within
// each, the lowest score.
func (f *Fleet) pickAdapter(cand uint64, limit int, blocks []uint64, p int, owner uint8, adapter string, drained uint64) (*Replica, Reason) {
	run, free, waits, calm := f.adapterSets(cand, adapter)
	run &^= drained // its slot there takes no new call
	for tier := range 7 {
		var set uint64
		lim := unbounded
		switch tier { // the sets are made only when the tiers before them found nothing
		case 0:
			set, lim = run&calm, limit
		case 1:
			set, lim = run, limit
		case 2:
			set, lim = f.fewestHeld(free, limit), limit
		case 3:
			set = run
		case 4:
			set = f.fewestHeld(free, unbounded)
		case 5:
			set = waits
		case 6:
			set = f.soonestSlot(cand)
		}
		if set == 0 {
			continue
		}
		r := f.lowestScore(set, lim, blocks, p, owner)
		switch {
		case r == nil:
			continue
		case p >= 0 && r.pos == owner:
			return r, ReasonAffinity
		case tier < 6 && set != cand:
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

// unbounded is a limit no count in flight reaches.
const unbounded = math.MaxInt

// fewestHeld returns the replicas of set under limit where the fewest adapters hold a slot.
func (f *Fleet) fewestHeld(set uint64, limit int) uint64 {
	var out uint64
	best := math.MaxInt
	for c := set; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		if r.inflight >= limit {
			continue
		}
		held, _, _ := r.slots("")
		if held < best {
			best, out = held, 0
		}
		if held == best {
			out |= 1 << r.pos
		}
	}
	return out
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
	free := -1
	for i := range r.adapters {
		a := &r.adapters[i]
		if a.name == adapter {
			if a.inflight == 0 {
				a.slotted, a.since = a.scraped, now // joining a scraped adapter's batch, or waiting anew
			}
			a.inflight++
			a.last = now
			r.admitWaiting(maxLoras)
			return int8(i)
		}
		if free < 0 && !a.running() {
			free = i
		}
	}
	if free < 0 {
		return -1
	}
	r.adapters[free] = adapterUse{name: adapter, inflight: 1, last: now, since: now}
	r.admitWaiting(maxLoras)
	return int8(free)
}

// limit is the load bound over cand: a replica may take a request while its count in flight is below
// ceil((1+e) x (the candidates' total + 1) / n). The least loaded candidate always may.
func (f *Fleet) limit(cand uint64) int {
	total := 0
	for c := cand; c != 0; c &= c - 1 {
		total += f.replicas[bits.TrailingZeros64(c)].inflight
	}
	n := bits.OnesCount64(cand)
	return int(math.Ceil((1 + f.cfg.Epsilon) * float64(total+1) / float64(n)))
}

// lowestScore returns the candidate under limit with the lowest score: the blocks it must prefill
// (all but those matched on it) times its queue plus one; nil when none is under limit. Ties go by
// rendezvous weight, so that two edges break them alike. The prefix's owner may take one call above
// limit while the prefill of everything in flight on it (its pending blocks) is less than the prefix
// it holds: the call would wait there for less than it would prefill again anywhere else. At a few
// calls in flight the bound is one call (ceil(1.25 x 9 / 4) = 3), and it sent agent sessions off
// their replica to prefill their whole history again (the agent row of make bench); one call more
// keeps a hot prefix from piling onto its replica.
func (f *Fleet) lowestScore(cand uint64, limit int, blocks []uint64, p int, owner uint8) *Replica {
	var first uint64
	if len(blocks) > 0 {
		first = blocks[0]
	}
	var best *Replica
	var bestScore, bestW uint64
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		if r.inflight >= limit && !(r.inflight == limit && f.ownerMayExceed(r, p, owner)) {
			continue
		}
		score := uint64(prefillBlocks(r, blocks, p, owner)) * uint64(r.inflight+r.waiting+1)
		w := mix64(first ^ r.seed)
		if best == nil || score < bestScore || score == bestScore && w > bestW {
			best, bestScore, bestW = r, score, w
		}
	}
	return best
}

// ownerMayExceed says whether r, the owner of a prompt's longest known prefix (blocks 0 to p), may
// take it one call above the load bound: nothing waits on it (as scraped), and what it has to prefill
// for its calls in flight is less than the prefix another replica would prefill again.
func (f *Fleet) ownerMayExceed(r *Replica, p int, owner uint8) bool {
	return p >= 0 && r.pos == owner && r.waiting == 0 && r.pending < p+1
}

// prefillBlocks is what r must prefill of blocks, plus one (so that a score never is zero): all but
// the prefix matched on it.
func prefillBlocks(r *Replica, blocks []uint64, p int, owner uint8) int {
	n := len(blocks) + 1
	if p >= 0 && owner == r.pos {
		n -= p + 1
	}
	return n
}

// leastLoaded returns the candidate with the fewest requests in flight and waiting; ties go in turn.
func (f *Fleet) leastLoaded(cand uint64) *Replica {
	f.turn++
	n := len(f.replicas)
	var best *Replica
	for i := 0; i < n; i++ {
		r := f.replicas[(int(f.turn)+i)%n]
		if cand&(1<<r.pos) == 0 {
			continue
		}
		if best == nil || r.inflight+r.waiting < best.inflight+best.waiting {
			best = r
		}
	}
	return best
}

// nextTurn returns the next candidate in turn.
func (f *Fleet) nextTurn(cand uint64) *Replica {
	n := len(f.replicas)
	for i := 0; i < n; i++ {
		f.turn++
		if r := f.replicas[int(f.turn%uint64(n))]; cand&(1<<r.pos) != 0 {
			return r
		}
	}
	return nil // unreachable: cand is not empty
}

// State is a replica's state as metrics and tests read it.
type State struct {
	Addr             string
	Healthy          bool
	InFlight         int
	Waiting, Running int      // scraped
	Adapters         []string // running, as far as this process knows
	Picks            [numReasons]uint64
	Ejections        uint64
	// Held counts the calls sent to the replica after being held in svc for an adapter slot
	// (PickWait), HeldFor the time they were held.
	Held    uint64
	HeldFor time.Duration
}

// PicksBy returns the picks decided by reason.
func (s State) PicksBy(reason Reason) uint64 { return s.Picks[reason] }

// States returns the replicas' states, in the order given.
func (f *Fleet) States() []State {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]State, len(f.replicas))
	for i, r := range f.replicas {
		s := State{Addr: r.Addr, Healthy: r.healthy, InFlight: r.inflight, Waiting: r.waiting, Running: r.running,
			Picks: r.picks, Ejections: r.ejected, Held: r.held, HeldFor: r.heldFor}
		for _, a := range r.adapters {
			if a.running() {
				s.Adapters = append(s.Adapters, a.name)
			}
		}
		out[i] = s
	}
	return out
}

// Replicas returns the replicas, in the order given.
func (f *Fleet) Replicas() []*Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Replica(nil), f.replicas...)
}
