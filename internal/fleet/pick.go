package fleet

import (
	"math"
	"math/bits"
	"time"
)

// The picker: a request's replica among the healthy ones, by the model's routing (prefix affinity under
// the load bound, least loaded, round robin), and the end of its call (Done).

// Request is what the picker knows of a request.
type Request struct {
	// Blocks are the chain hashes of the prompt as the upstream sees it (AppendBlocks).
	Blocks []uint64
	// Adapter is the LoRA adapter asked for, "" for the base model.
	Adapter string
	// Exclude is the replica that already failed this request: a retry goes elsewhere.
	Exclude *Replica
	// Session keys the conversation the prompt belongs to, the same for each of its turns on every edge
	// (SessionKey of its opening): a prompt's place follows it (place). 0: none; the prompt goes where
	// its longest known prefix went, a new one to the least loaded replica.
	Session uint64
	// Opening says the call is its conversation's first (no answer in it yet). It is placed as a call
	// with no conversation is, by the lowest score (its home only among equals): its next turn goes
	// home, and moving there costs the opening's prefill only, where waiting behind two prompts' prefill
	// to be home at once cost one-shot prompts 1.43x least-loaded's TTFT p95 (the uniform fleet row).
	Opening bool
}

// SessionKey is the Request.Session of a conversation that opens with system and user: what every turn
// of it repeats, with no per-process seed, so that every edge computes the same key.
func SessionKey(system, user string) uint64 {
	return nonZero(hashString(hashString(k2, system), user))
}

// first is the prompt's first block (0: none), whose rendezvous weight breaks ties of the lowest score.
func (req *Request) first() uint64 {
	if len(req.Blocks) > 0 {
		return req.Blocks[0]
	}
	return 0
}

// Pick is a chosen replica; give it back to Done when the call ends.
type Pick struct {
	Replica *Replica
	Reason  Reason
	slot    int8          // the replica's adapters entry counted in flight, -1 for none
	prefill int32         // the blocks the replica had to prefill, counted in its pending
	start   time.Duration // when it was picked, since epoch: how long its call took, for the replica's pace
}

// epoch is what picks are timed from (monotonic).
var epoch = time.Now()

// Pick chooses the replica for req and counts the request in flight on it. It does not allocate.
func (f *Fleet) Pick(req Request) (Pick, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pick(req, false)
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
	if req.Adapter != "" && f.unready > 0 {
		cand = f.readyFor(cand, req.Adapter)
	}
	var r *Replica
	var reason Reason
	var drained uint64 // the replica where the adapter's slot drains, when the call may be held
	owner, p := uint8(0), -1
	kvPrefill := -1   // the blocks to prefill on r as the KV events say, -1 when they did not decide
	kvRouted := false // the KV events could not place the turn: the routed chains did
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
			r, reason = f.pickAdapter(cand, limit, req.Blocks, req.first(), p, owner, req.Adapter, drained)
			break
		}
		if req.Session != 0 && !req.Opening && f.cfg.KV != nil {
			// What each replica holds of the conversation's last prompt, from its own events.
			if r, reason, kvPrefill = f.placeKV(cand, limit, &req); r != nil {
				r.kvPicks++
				break
			}
			kvRouted = true
		}
		if req.Session != 0 && !req.Opening {
			// Placed by rendezvous hashing of its conversation over the candidates, so that every
			// edge places it alike; load is a bounded tie-break (place).
			r, reason = f.place(cand, limit, &req, p, owner)
			break
		}
		// No conversation to key it, or its first call: the lowest score, where the owner of a known
		// prefix prefills only what it lacks. A prefix seen nowhere costs the same everywhere: it goes to the least
		// loaded replica, ties broken by rendezvous hashing of its first block (so that idle edges
		// agree); the load bound alone let it queue where another replica was idle (the uniform
		// fleet row of make bench).
		r, reason = f.lowestScore(cand, limit, req.Blocks, req.first(), p, owner), ReasonLoad
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
	if kvRouted {
		r.kvRouted++
	}
	prefill := kvPrefill
	if prefill < 0 {
		prefill = prefillBlocks(r, req.Blocks, p, owner)
	}
	pk := Pick{Replica: r, Reason: reason, slot: -1, prefill: int32(prefill), start: f.now().Sub(epoch)}
	if f.cfg.KV != nil {
		f.cfg.KV.Sent(int(r.kvSlot))
	}
	r.pending += int(pk.prefill)
	if f.meanPrefill == 0 {
		f.meanPrefill = int(pk.prefill)
	}
	f.meanPrefill += (int(pk.prefill) - f.meanPrefill) / 16
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
func (f *Fleet) Done(pk Pick, o Outcome) { f.done(pk, o, "a call failed") }

// Fail is Done(pk, Failed) saying why, in words that name no secret ("connection refused", "answered
// 503"): the Fleet view shows it while the replica is out.
func (f *Fleet) Fail(pk Pick, why string) { f.done(pk, Failed, why) }

func (f *Fleet) done(pk Pick, o Outcome, why string) {
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
			a.ended = f.now().Sub(epoch)
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
		r.timeCall(f.now().Sub(epoch) - pk.start)
	case Failed:
		f.eject(r, why)
	}
}

// eject takes r out of the picks for an interval doubling with each ejection since its last success.
// A replica already out stays out as it was: the calls that were in flight on it fail together.
func (f *Fleet) eject(r *Replica, why string) {
	if !r.healthy {
		return
	}
	r.why = why
	d := minEjection << min(r.ejections, 5)
	r.healthy = false
	r.outUntil = f.now().Add(min(d, maxEjection))
	r.ejections++
	r.ejected++
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
func (f *Fleet) lowestScore(cand uint64, limit int, blocks []uint64, key uint64, p int, owner uint8) *Replica {
	var best *Replica
	var bestScore, bestW uint64
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		if r.inflight >= limit && !(r.inflight == limit && f.ownerMayExceed(r, p, owner)) {
			continue
		}
		score := uint64(prefillBlocks(r, blocks, p, owner)) * uint64(r.inflight+r.waiting+1)
		w := mix64(key ^ r.seed)
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

// place is affinity's pick for a call of the base model in a conversation (Request.Session), the same
// on every edge while the replicas are within its bounds: the candidates in rendezvous order of the
// conversation's key, the first within the load bound whose cost is at most the least cost among the
// candidates within the bound plus twice the prompt's prefill. A replica's cost is what the call must
// prefill there plus the prefill queued before it (queued), times its pace (how many times longer its
// calls take than the fastest replica's). A conversation lives on its home (the first in rendezvous
// order) by construction, so the home is credited with the longest prefix this edge knows on any
// replica, and another replica with what the prefix index says it holds: what one edge alone saw (a
// shared head last sent elsewhere, a turn it routed while the home was full) never pulls a
// conversation off its home; load does, past either bound. The count bound is each edge's own, and at
// a few calls in flight it is one call above the mean: two edges seeing different counts spilled a
// tenth to a half of the turns off their replica (TestTwoPickersPlaceEachSessionAlike), so placement
// lets any replica take one call above it and the home two. With one prompt's prefill as the cost's
// slack, queues that differ per edge still moved 0-15 of 56 turns (TestTwoEdgesKeepEachSessionOnOneReplica,
// on a busy machine); with two, 0-2. Plain least-loaded placement of a conversation an edge had not
// seen kept only 30-40 of 60 turns on their replica through two edges (issue 43).
func (f *Fleet) place(cand uint64, limit int, req *Request, p int, owner uint8) (*Replica, Reason) {
	key := req.Session
	n := len(req.Blocks) + 1
	known := p + 1 // the longest prefix known on any replica
	var w [MaxReplicas]uint64
	var home *Replica
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		w[r.pos] = mix64(key ^ r.seed)
		if home == nil || w[r.pos] > w[home.pos] {
			home = r
		}
	}
	credit := func(r *Replica) int {
		if r == home || p >= 0 && r.pos == owner {
			return known
		}
		return 0
	}
	fastest := f.fastest(cand)
	cost := func(r *Replica) int { return (f.queued(r, n) + n - credit(r)) * pace(r, fastest) }
	least := math.MaxInt
	for c := cand; c != 0; c &= c - 1 {
		if r := f.replicas[bits.TrailingZeros64(c)]; r.inflight <= limit {
			least = min(least, cost(r))
		}
	}
	for rank, left := 0, cand; left != 0; rank++ {
		var r *Replica
		for c := left; c != 0; c &= c - 1 {
			if x := f.replicas[bits.TrailingZeros64(c)]; r == nil || w[x.pos] > w[r.pos] {
				r = x
			}
		}
		left &^= 1 << r.pos
		if bound := limit + 1 + b2i(rank == 0); r.inflight >= bound {
			continue
		}
		if cost(r) > least+2*n {
			continue
		}
		switch {
		case p >= 0 && r.pos == owner:
			return r, ReasonAffinity
		case rank == 0:
			return r, ReasonHash
		}
		return r, ReasonLoad
	}
	// Unreachable: the least costly candidate within the bound passes.
	return f.lowestScore(cand, limit, req.Blocks, key, p, owner), ReasonLoad
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// paceMax bounds a replica's pace: one 16 times slower than the fastest weighs as that. paceFloor is
// the shortest mean call that tells a pace: below it (4xx answers, calls cut short) replicas are alike.
const (
	paceMax   = 16
	paceFloor = 5 * time.Millisecond
)

// timeCall folds the duration of a call that ended well into the replica's mean (1/8 per call).
func (r *Replica) timeCall(d time.Duration) {
	if d <= 0 {
		return
	}
	if r.meanCall == 0 {
		r.meanCall = d
	}
	r.meanCall += (d - r.meanCall) / 8
}

// fastest is the shortest mean call among the candidates that have one (0: none has).
func (f *Fleet) fastest(cand uint64) time.Duration {
	var best time.Duration
	for c := cand; c != 0; c &= c - 1 {
		if r := f.replicas[bits.TrailingZeros64(c)]; r.meanCall > 0 && (best == 0 || r.meanCall < best) {
			best = r.meanCall
		}
	}
	return best
}

// pace is how many times slower r's calls are than the fastest candidate's, in whole times (1 to
// paceMax): a replica's calls of the same traffic take longer where it prefills and decodes slower, so
// the prefill queued on it (and what the call would prefill there) costs that much more. Whole times,
// so that the noise between replicas alike (and between two edges' means of one replica) changes no
// pick; a replica not yet timed counts as the fastest.
func pace(r *Replica, fastest time.Duration) int {
	if fastest == 0 || r.meanCall == 0 {
		return 1
	}
	return int(min(max(r.meanCall, paceFloor)/max(fastest, paceFloor), paceMax))
}

// queued is the prefill, in blocks, that a call sent to r now would wait behind: what the calls in
// flight there from this process had to prefill (pending), and for each request waiting there as
// scraped (other edges' among them) the mean of those, or of every call picked lately when none is in
// flight there.
func (f *Fleet) queued(r *Replica, n int) int {
	per := f.meanPrefill
	if r.inflight > 0 {
		per = r.pending / r.inflight
	}
	return r.pending + r.waiting*per
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
