package fleet

import (
	"cmp"
	"container/heap"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A discrete-event model of the many-adapters fleet row (cmd/svcbench/fleet.go) driving this picker in
// simulated time: four replicas as internal/mockupstream's Engine models them (8 sequences; 2 adapter slots, an
// adapter waiting for one while those holding slots go ahead, kept least recently used; 5 ms to bring
// an adapter into a slot; one GPU prefilling 50 µs a token, one call after another; 32 tokens 3 ms
// apart, the row's 2 ms plus what a loaded machine adds, which makes the model's round-robin match the
// row's), 12 adapters of 2 KB instructions and 1 KB inputs drawn at random by 16 closed-loop clients.
// It prints where the time to first token went (all calls and the slowest 5%) and the ratio of
// affinity's p95 to round-robin's over many seeds, the row's budget. Not a check (it asserts nothing);
// run it by hand when changing the adapter rules (docs/OPERATIONS.md, "Fleet rows"); FLEET_SIM is the
// whole run, FLEET_SIM_WARMUP its first part, not counted (the row's: 1s of 11s); FLEET_SIM_SLOTS each
// replica's slots (2), FLEET_SIM_SKEW draws adapters by Zipf's law of that exponent (uniform when unset),
// FLEET_SIM_CLIENTS the clients (16), FLEET_SIM_SESSION the calls a client makes with one adapter on
// average (1: one drawn per call) and FLEET_SIM_THINK its pause between calls (none); docs/LORA.md,
// "Many adapters: loads against latency", has what they showed:
//
//	FLEET_SIM=11s FLEET_SIM_WARMUP=1s FLEET_SIM_SEEDS=40 go test -run TestSimManyAdapters -v ./internal/fleet/

type simEvent struct {
	t   time.Duration
	seq int
	fn  func()
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(a, b int) bool {
	return q[a].t < q[b].t || q[a].t == q[b].t && q[a].seq < q[b].seq
}
func (q simQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any     { o := *q; x := o[len(o)-1]; *q = o[:len(o)-1]; return x }

type simCall struct {
	adapter int
	start   time.Duration // sent by the client
	arrive  time.Duration // at the replica
	pk      Pick
	next    func()
	rec     simRec
}

type simRec struct {
	ttft, held, queue, gpu, load, prefill time.Duration
	uncached                              bool // the adapter's instructions were not cached there
	replica                               int
	adapter                               int
	start                                 time.Duration // sent by the client: the order of the traffic
}

// simPinned is the sim's pinned ideal of many adapters: adapter a always on replica a mod 4, no
// picker (issue 43: "a fixed adapter-to-replica assignment won").
const simPinned Mode = 255

func simModeName(m Mode) string {
	if m == simPinned {
		return "pinned"
	}
	return m.String()
}

type simReplica struct {
	running int
	waiting []*simCall
	active  map[int]int
	slots   []int
	gpuFree time.Duration
	cached  map[int]bool
	loads   int
}

// simSession is the mean number of calls a client makes with one adapter before it draws another
// (FLEET_SIM_SESSION; 1, the row's: each call draws its adapter).
var simSession = cmp.Or(func() int { n, _ := strconv.Atoi(os.Getenv("FLEET_SIM_SESSION")); return n }(), 1)

// simThink is each client's pause between an answer and its next call (FLEET_SIM_THINK; none, the
// row's: a client calls again at once).
var simThink, _ = time.ParseDuration(os.Getenv("FLEET_SIM_THINK"))

// simMaxLoras is each replica's --max-loras (FLEET_SIM_SLOTS; 2, the row's).
var simMaxLoras = cmp.Or(func() int { n, _ := strconv.Atoi(os.Getenv("FLEET_SIM_SLOTS")); return n }(), 2)

type sim struct {
	now     time.Duration
	q       simQueue
	seq     int
	reps    []*simReplica
	pos     map[*Replica]int
	f       *Fleet
	recs    []simRec
	all     []simRec      // the warm-up's calls too: the loads are counted over all of them
	warmUp  time.Duration // calls begun before it are not counted (FLEET_SIM_WARMUP)
	mode    Mode
	waiters map[*waiter]*simCall
	order   []*waiter
	// sessions is each client's adapter while it has calls left to make with it (-1 otherwise), and
	// evictedInSession counts the loads that evicted one of those: the loads a router could have
	// spared without knowing which adapters the clients draw next.
	sessions         []int
	evictedInSession int
}

func (s *sim) at(t time.Duration, fn func()) { s.seq++; heap.Push(&s.q, &simEvent{t, s.seq, fn}) }

const (
	simSeqs      = 8
	simPrefill   = 50 * time.Microsecond
	simLoad      = 5 * time.Millisecond
	simITL       = 3 * time.Millisecond
	simTokens    = 32
	simBase      = 2 * time.Millisecond
	simOverhead  = 500 * time.Microsecond // the edge, each way
	simInstrToks = 516
	simUserToks  = 261
)

func (s *sim) admit(r *simReplica) {
	for i := 0; i < len(r.waiting); i++ {
		c := r.waiting[i]
		if r.running >= simSeqs {
			return
		}
		if r.active[c.adapter] == 0 && len(r.active) >= simMaxLoras {
			continue
		}
		r.waiting = slices.Delete(r.waiting, i, i+1)
		i--
		r.running++
		r.active[c.adapter]++
		c.rec.queue = s.now - c.arrive
		var load time.Duration
		if j := slices.Index(r.slots, c.adapter); j >= 0 {
			r.slots = slices.Delete(r.slots, j, j+1)
		} else {
			if len(r.slots) == simMaxLoras {
				for k := len(r.slots) - 1; k >= 0; k-- {
					if r.active[r.slots[k]] == 0 {
						if c.start >= s.warmUp && slices.Contains(s.sessions, r.slots[k]) {
							s.evictedInSession++
						}
						r.slots = slices.Delete(r.slots, k, k+1)
						break
					}
				}
			}
			r.loads++
			r.gpuFree = max(r.gpuFree, s.now) + simLoad
			load = simLoad
		}
		r.slots = slices.Insert(r.slots, 0, c.adapter)
		toks := simInstrToks + simUserToks
		if r.cached[c.adapter] {
			toks -= simInstrToks / 16 * 16
		} else {
			c.rec.uncached = true
		}
		r.cached[c.adapter] = true
		start := max(r.gpuFree, s.now)
		c.rec.gpu, c.rec.load = start-s.now-load, load
		c.rec.prefill = time.Duration(toks) * simPrefill
		r.gpuFree = start + c.rec.prefill
		first := r.gpuFree + simBase
		s.at(first, func() {
			c.rec.ttft = s.now + simOverhead - c.start
			if c.start >= s.warmUp { // the calls of the warm-up are not counted
				s.recs = append(s.recs, c.rec)
			}
			s.all = append(s.all, c.rec)
			s.at(s.now+time.Duration(simTokens-1)*simITL, func() {
				r.running--
				if r.active[c.adapter]--; r.active[c.adapter] == 0 {
					delete(r.active, c.adapter)
				}
				s.admit(r)
				s.at(s.now+simOverhead, func() { s.done(c) })
			})
		})
	}
}

// send delivers a picked call to its replica.
func (s *sim) send(c *simCall) {
	r := s.reps[s.pos[c.pk.Replica]]
	c.rec.replica = s.pos[c.pk.Replica]
	s.at(s.now+simOverhead, func() { c.arrive = s.now; r.waiting = append(r.waiting, c); s.admit(r) })
}

// done ends a call in the picker and sends the calls it released.
func (s *sim) done(c *simCall) {
	if s.mode != simPinned {
		s.f.Done(c.pk, OK)
	}
	s.release()
	if simThink > 0 { // FLEET_SIM_THINK: the client's pause before its next call
		s.at(s.now+simThink, c.next)
		return
	}
	c.next()
}

func (s *sim) release() {
	for i := 0; i < len(s.order); i++ {
		w := s.order[i]
		c := s.waiters[w]
		select {
		case got := <-w.got:
			delete(s.waiters, w)
			s.order = slices.Delete(s.order, i, i+1)
			i--
			c.pk = got.pk
			c.rec.held = s.now - c.start
			s.send(c)
		default:
		}
	}
}

func runSim(t *testing.T, mode Mode, dur time.Duration, seed uint64, adapters, clients int) []simRec {
	rs, _, _ := runSimCounted(t, mode, dur, seed, adapters, clients)
	return rs
}

// runSimCounted is runSim, also returning every call, the warm-up's too (the loads and their minimum
// are counted over all of them: the minimum of the calls after the warm-up alone would count as loads
// the first calls of adapters that the warm-up left in the slots), and how many loads evicted an
// adapter in a session (sim's evictedInSession).
func runSimCounted(t *testing.T, mode Mode, dur time.Duration, seed uint64, adapters, clients int) (counted, all []simRec, evictedInSession int) {
	var urls []string
	s := &sim{pos: map[*Replica]int{}, mode: mode, waiters: map[*waiter]*simCall{}, sessions: slices.Repeat([]int{-1}, clients)}
	s.warmUp, _ = time.ParseDuration(os.Getenv("FLEET_SIM_WARMUP"))
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("http://10.0.0.%d:8000/v1", i+1))
		s.reps = append(s.reps, &simReplica{active: map[int]int{}, cached: map[int]bool{}})
	}
	pm := mode
	if mode == simPinned {
		pm = RoundRobin // unused: calls bypass the picker
	}
	f, err := New(Config{Mode: pm, MaxLoras: simMaxLoras}, urls)
	if err != nil {
		t.Fatal(err)
	}
	s.f = f
	base := time.Unix(1e9, 0)
	f.now = func() time.Time { return base.Add(s.now) }
	for i, r := range f.Replicas() {
		s.pos[r] = i
	}
	var instr [][]uint64
	for a := range adapters {
		rng := rand.New(rand.NewPCG(3, uint64(a)))
		var b strings.Builder
		fmt.Fprintf(&b, "system\n\"Application %d. ", a)
		for b.Len() < 2<<10 {
			fmt.Fprintf(&b, "w%x ", rng.Uint32())
		}
		instr = append(instr, AppendBlocks(nil, "ad"+strconv.Itoa(a), []byte(b.String())))
	}
	for c := range clients {
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		var zipf *rand.Zipf // FLEET_SIM_SKEW: adapters drawn by Zipf's law of that exponent (> 1), adapter 0 the hottest
		if skew, _ := strconv.ParseFloat(os.Getenv("FLEET_SIM_SKEW"), 64); skew > 1 && adapters > 1 {
			zipf = rand.NewZipf(rng, skew, 1, uint64(adapters-1))
		}
		var next func()
		a, left := 0, 0 // the client's adapter and the calls it makes with it before it draws another
		next = func() {
			if s.now > dur {
				return
			}
			if left--; left <= 0 {
				a = rng.IntN(adapters)
				if zipf != nil {
					a = int(zipf.Uint64())
				}
				left = 1
				if simSession > 1 { // FLEET_SIM_SESSION: a session of that many calls on average, geometric
					left = 1 + int(rng.ExpFloat64()*float64(simSession-1))
				}
			}
			s.sessions[c] = -1
			if left > 1 {
				s.sessions[c] = a
			}
			// the instructions' blocks and then blocks of the call's own: none known anywhere
			blocks := append(slices.Clone(instr[a]), rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
			c := &simCall{adapter: a, start: s.now, next: next, rec: simRec{adapter: a, start: s.now}}
			if mode == simPinned {
				c.pk = Pick{Replica: f.replicas[a%len(f.replicas)], slot: -1}
				s.send(c)
				return
			}
			f.mu.Lock()
			req := Request{Blocks: blocks, Adapter: "ad" + strconv.Itoa(a)}
			pk, err := f.pick(req, true) // PickWait, without blocking the model's one goroutine
			if err == errHold {
				w := f.hold(req)
				s.waiters[w] = c
				s.order = append(s.order, w)
				f.mu.Unlock()
				return
			}
			f.mu.Unlock()
			c.pk = pk
			s.send(c)
		}
		s.at(time.Duration(c)*time.Millisecond, next)
	}
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(*simEvent)
		s.now = e.t
		e.fn()
	}
	return s.recs, s.all, s.evictedInSession
}

func pct(rs []simRec, q float64) time.Duration {
	return rs[min(len(rs)-1, int(q*float64(len(rs))))].ttft
}

func breakdown(rs []simRec) string {
	var r simRec
	unc, loads := 0, 0
	var per [4]int
	for _, x := range rs {
		per[x.replica]++
		if x.load > 0 {
			loads++
		}
		r.ttft += x.ttft
		r.held += x.held
		r.queue += x.queue
		r.gpu += x.gpu
		r.load += x.load
		r.prefill += x.prefill
		if x.uncached {
			unc++
		}
	}
	n := time.Duration(len(rs))
	return fmt.Sprintf("n %d loads %d (%.3f a call) per replica %v ttft %v held %v queue %v gpu %v load %v prefill %v uncached %d", len(rs), loads, float64(loads)/float64(len(rs)), per, (r.ttft / n).Round(time.Millisecond/10),
		(r.held / n).Round(time.Millisecond/10), (r.queue / n).Round(time.Millisecond/10), (r.gpu / n).Round(time.Millisecond/10),
		(r.load / n).Round(time.Millisecond/10), (r.prefill / n).Round(time.Millisecond/10), unc)
}

// minLoads is the fewest adapter loads that serve the calls of rs in the order they were sent with
// the fleet's slots as one cache of slots (Belady's rule: the adapter needed again the latest leaves):
// the minimum the traffic needs when no call waits for another adapter's call to be served first, a
// bound no placement beats (it ignores that a slot whose adapter has calls running cannot be given).
func minLoads(rs []simRec, slots int) int {
	seq := slices.Clone(rs)
	slices.SortStableFunc(seq, func(a, b simRec) int { return cmp.Compare(a.start, b.start) })
	next := make([]int, len(seq)) // the index of the adapter's next call
	last := map[int]int{}
	for i := len(seq) - 1; i >= 0; i-- {
		next[i] = len(seq)
		if j, ok := last[seq[i].adapter]; ok {
			next[i] = j
		}
		last[seq[i].adapter] = i
	}
	in := map[int]int{} // adapter in a slot -> the index of its next call
	loads := 0
	for i, c := range seq {
		if _, ok := in[c.adapter]; !ok {
			loads++
			if len(in) == slots {
				far, at := -1, -1
				for a, n := range in {
					if n > at || n == at && a < far {
						far, at = a, n
					}
				}
				delete(in, far)
			}
		}
		in[c.adapter] = next[i]
	}
	return loads
}

func TestSimManyAdapters(t *testing.T) {
	env := os.Getenv("FLEET_SIM")
	if env == "" {
		t.Skip("FLEET_SIM=<duration> runs the model")
	}
	dur, err := time.ParseDuration(env)
	if err != nil {
		t.Fatal(err)
	}
	seeds, _ := strconv.Atoi(os.Getenv("FLEET_SIM_SEEDS"))
	clients, _ := strconv.Atoi(os.Getenv("FLEET_SIM_CLIENTS"))
	seeds, clients = cmp.Or(seeds, 30), cmp.Or(clients, 16)
	var ratios, vsPinned, vsSingle, loadsVsPinned, loadsVsMin, pinnedVsMin []float64
	evictedInSession, affinityLoads := 0, 0
	loadsOf := func(rs []simRec) (n int) {
		for _, x := range rs {
			if x.load > 0 {
				n++
			}
		}
		return n
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		res, every := map[Mode][]simRec{}, map[Mode][]simRec{}
		single := runSim(t, Affinity, dur, seed, 1, clients)
		slices.SortFunc(single, func(a, b simRec) int { return int(a.ttft - b.ttft) })
		for _, m := range []Mode{RoundRobin, simPinned, Affinity} {
			rs, all, inSession := runSimCounted(t, m, dur, seed, 12, clients)
			if m == Affinity {
				evictedInSession += inSession
			}
			every[m] = all
			slices.SortFunc(rs, func(a, b simRec) int { return int(a.ttft - b.ttft) })
			res[m] = rs
			if seed == 1 {
				t.Logf("%-12s p50 %v p95 %v req/s %.0f; all: %s", simModeName(m), pct(rs, 0.5).Round(time.Millisecond/10), pct(rs, 0.95).Round(time.Millisecond/10),
					float64(len(rs))/dur.Seconds(), breakdown(rs))
				t.Logf("%-12s slowest 5%%: %s", simModeName(m), breakdown(rs[len(rs)-len(rs)/20:]))
				var holds []time.Duration
				for _, r := range rs {
					if r.held > 0 {
						holds = append(holds, r.held)
					}
				}
				slices.Sort(holds)
				if len(holds) > 0 {
					t.Logf("held %d of %d: p50 %v p75 %v p90 %v max %v", len(holds), len(rs), holds[len(holds)/2], holds[len(holds)*3/4], holds[len(holds)*9/10], holds[len(holds)-1])
				}
			}
		}
		aff := res[Affinity]
		ratios = append(ratios, float64(pct(aff, 0.95))/float64(pct(res[RoundRobin], 0.95)))
		vsPinned = append(vsPinned, float64(pct(aff, 0.95))/float64(pct(res[simPinned], 0.95)))
		vsSingle = append(vsSingle, float64(pct(aff, 0.95))/float64(pct(single, 0.95)))
		// Loads per call, against the pinned assignment's (calls differ in number between the two).
		affAll, pinAll := every[Affinity], every[simPinned]
		loadsVsPinned = append(loadsVsPinned, float64(loadsOf(affAll))/float64(len(affAll))/(float64(loadsOf(pinAll))/float64(len(pinAll))))
		// And against the minimum the traffic needs (minLoads over each run's own calls).
		loadsVsMin = append(loadsVsMin, float64(loadsOf(affAll))/float64(minLoads(affAll, 4*simMaxLoras)))
		affinityLoads += loadsOf(aff)
		pinnedVsMin = append(pinnedVsMin, float64(loadsOf(pinAll))/float64(minLoads(pinAll, 4*simMaxLoras)))
		if seed == 1 {
			t.Logf("one adapter  p95 %v (affinity, the same clients)", pct(single, 0.95).Round(time.Millisecond/10))
			t.Logf("minimum loads %d of %d calls, the warm-up's too (%.3f a call; affinity %d)", minLoads(affAll, 4*simMaxLoras), len(affAll),
				float64(minLoads(affAll, 4*simMaxLoras))/float64(len(affAll)), loadsOf(affAll))
		}
	}
	t.Logf("affinity p95 over pinned's by seed: %.2f", vsPinned)
	t.Logf("affinity p95 over one adapter's by seed: %.2f", vsSingle)
	t.Logf("affinity loads a call over pinned's by seed: %.2f", loadsVsPinned)
	t.Logf("affinity loads over the minimum by seed: %.2f (pinned's: %.2f)", loadsVsMin, pinnedVsMin)
	// With sessions (FLEET_SIM_SESSION), the loads over the minimum that evicted no adapter a session
	// still uses are the price of not knowing what the clients draw next, which the minimum knows.
	t.Logf("affinity loads that evicted an adapter a session still uses: %d of %d", evictedInSession, affinityLoads)
	t.Logf("affinity/round-robin p95 by seed: %.2f", ratios)
	slices.Sort(ratios)
	mean := 0.0
	for _, r := range ratios {
		mean += r / float64(len(ratios))
	}
	t.Logf("mean %.3f median %.2f max %.2f; over 0.5: %d of %d", mean, ratios[len(ratios)/2], ratios[len(ratios)-1], len(ratios)-sort.SearchFloat64s(ratios, 0.5000001), len(ratios))
}
