// Package fleet picks the replica of a model that serves each request: healthy replicas only, then for an adapter those running it or with a free slot, then the longest prefix match, under a bound on load (docs/LORA.md, "Fleets").
package fleet

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/url"
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
	ejections        int // since the last success, for the doubling interval
	outUntil         time.Time
	adapters         [maxAdapters]adapterUse
	picks            [numReasons]uint64
	ejected          uint64
}

// adapterUse is an adapter a replica runs as far as this process knows: requests in flight from here,
// or named by the replica's vllm:lora_requests_info.
type adapterUse struct {
	name     string
	inflight int
	scraped  bool
}

func (a *adapterUse) running() bool { return a.inflight > 0 || a.scraped }

// Fleet is one model's replicas and the picker over them. Its methods are safe for concurrent use.
type Fleet struct {
	mu       sync.Mutex
	cfg      Config
	replicas []*Replica
	index    *prefixIndex
	turn     uint64
	now      func() time.Time
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
	if moved {
		f.index.clear()
	}
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
	slot    int8 // the replica's adapters entry counted in flight, -1 for none
}

// Pick chooses the replica for req and counts the request in flight on it. It does not allocate.
func (f *Fleet) Pick(req Request) (Pick, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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
		// For an adapter, the replicas running it or with a free slot first, as vLLM runs at most
		// --max-loras adapters: elsewhere the request waits for a slot, longer than any queue in
		// front of the adapter it wants. The load bound is over those replicas.
		fit, narrowed := f.loraRule(cand, req.Adapter)
		cand = fit
		limit := f.limit(cand)
		// The lowest score, where the owner of a known prefix prefills only what it lacks. A prefix
		// seen nowhere costs the same everywhere: it goes to the least loaded replica, ties broken by
		// rendezvous hashing of its first block (so that idle edges agree); the load bound alone let
		// it queue where another replica was idle (the uniform fleet row of make bench).
		p, owner = f.index.longest(req.Blocks)
		r, reason = f.lowestScore(cand, limit, req.Blocks, p, owner), ReasonLoad
		switch {
		case p < 0 && len(req.Blocks) > 0:
			reason = ReasonHash
		case p >= 0 && r.pos == owner:
			reason = ReasonAffinity
		}
		if narrowed && reason != ReasonAffinity {
			reason = ReasonLora
		}
	}
	if req.Exclude != nil {
		reason = ReasonRetry
	}
	r.inflight++
	r.picks[reason]++
	pk := Pick{Replica: r, Reason: reason, slot: -1}
	if req.Adapter != "" {
		pk.slot = r.useAdapter(req.Adapter)
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
	if pk.slot >= 0 {
		r.adapters[pk.slot].inflight--
	}
	switch o {
	case OK:
		r.ejections = 0
	case Failed:
		f.eject(r)
	}
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

// loraRule narrows cand, for an adapter, to the replicas running it or with a free slot; when none is,
// cand is kept whole (the request waits for a slot wherever it goes). narrowed says it changed.
func (f *Fleet) loraRule(cand uint64, adapter string) (uint64, bool) {
	if adapter == "" || f.cfg.MaxLoras == 0 {
		return cand, false
	}
	var fit uint64
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		n, has := 0, false
		for i := range r.adapters {
			a := &r.adapters[i]
			if a.running() {
				n++
				has = has || a.name == adapter
			}
		}
		if has || n < f.cfg.MaxLoras {
			fit |= 1 << r.pos
		}
	}
	if fit == 0 || fit == cand {
		return cand, false
	}
	return fit, true
}

// useAdapter counts a request for adapter in flight on r and returns its entry (-1 when the table is
// full of running adapters: it is then not tracked).
func (r *Replica) useAdapter(adapter string) int8 {
	free := -1
	for i := range r.adapters {
		a := &r.adapters[i]
		if a.name == adapter {
			a.inflight++
			return int8(i)
		}
		if free < 0 && !a.running() {
			free = i
		}
	}
	if free < 0 {
		return -1
	}
	r.adapters[free] = adapterUse{name: adapter, inflight: 1}
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
// (all but those matched on it) times its queue plus one. Ties go by rendezvous weight, so that two
// edges break them alike.
func (f *Fleet) lowestScore(cand uint64, limit int, blocks []uint64, p int, owner uint8) *Replica {
	var first uint64
	if len(blocks) > 0 {
		first = blocks[0]
	}
	var best *Replica
	var bestScore, bestW uint64
	for c := cand; c != 0; c &= c - 1 {
		r := f.replicas[bits.TrailingZeros64(c)]
		if r.inflight >= limit {
			continue
		}
		prefill := uint64(len(blocks)) + 1
		if p >= 0 && owner == r.pos {
			prefill -= uint64(p + 1)
		}
		score := prefill * uint64(r.inflight+r.waiting+1)
		w := mix64(first ^ r.seed)
		if best == nil || score < bestScore || score == bestScore && w > bestW {
			best, bestScore, bestW = r, score, w
		}
	}
	return best
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
			Picks: r.picks, Ejections: r.ejected}
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
