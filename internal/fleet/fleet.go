// Package fleet picks the replica of a model that serves each request: healthy replicas only, then for an adapter those running it or with a free slot, then the longest prefix match, under a bound on load (docs/LORA.md, "Fleets").
package fleet

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/internal/kvindex"
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
	ReasonLoad                   // elsewhere than the prefix's replica or the conversation's home, for load
	ReasonHash                   // the conversation's home by rendezvous hashing of its key (place), where its prefix is not known
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
	// KV is the replicas' own KV-event index (the models file's kvEvents), nil when they publish none:
	// a conversation's next turn then goes by what each replica holds of its last prompt (placeKV),
	// falling back to the routed chains where that is not known.
	KV *kvindex.Index
}

// Replica is one inference server of a model. Its fields are read-only; its state lives in the Fleet.
type Replica struct {
	Addr string // host:port, what runs, traces and metrics name (never a key)
	URL  string // the OpenAI base URL, e.g. http://10.0.0.11:8000/v1
	root string // scheme://host:port, under which /health and /metrics are

	pos      uint8
	kvSlot   int8   // its slot in Config.KV, -1 without
	seed     uint64 // the replica's rendezvous seed, from its address
	healthy  bool
	inflight int
	// Scraped from /metrics: vllm:num_requests_waiting and vllm:num_requests_running.
	waiting, running int
	// capacity is the most requests the replica was seen running while others waited on it: what it
	// runs at once (vLLM's --max-num-seqs), learned; 0 until it was seen saturated.
	capacity int
	// pending sums the prefill blocks of the calls in flight here from this process (what each had to
	// prefill when picked): the most prefill a new call could wait behind.
	pending int
	// meanCall is a moving mean of how long its calls from here took, from pick to end (timeCall): its
	// pace against the other replicas'.
	meanCall  time.Duration
	ejections int // since the last success, for the doubling interval
	outUntil  time.Time
	why       string // why it is out, in words (Fail's, or the scrape's); "" while healthy
	adapters  [maxAdapters]adapterUse
	// unready are the adapters this process knows the replica does not serve yet (SetAdapterReady):
	// svc is loading them there, or its listing lacked them. Names, "" for a free entry.
	unready [maxAdapters]string
	picks   [numReasons]uint64
	// kvPicks counts the conversation turns sent here as the replicas' KV events placed them, kvRouted
	// those the routed chains placed because the session's prompt or a candidate's state was not known.
	kvPicks, kvRouted uint64
	ejected           uint64
	// held counts the calls sent here after PickWait held them for a slot, heldFor their time held.
	held    uint64
	heldFor time.Duration
}

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
	unready   int // entries set in the replicas' unready: none, and picks skip the check
	turn      uint64
	picks     uint64 // every pick so far: the clock of adapterUse.last
	// meanPrefill is a moving mean of the blocks each call picked had to prefill (1/16 per pick):
	// what a request scraped waiting on a replica is guessed to prefill.
	meanPrefill int
	now         func() time.Time
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
			r = &Replica{Addr: u.Host, URL: raw, root: u.Scheme + "://" + u.Host, healthy: true, seed: hashString(k1, u.Host), kvSlot: -1}
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
	if f.cfg.KV != nil {
		// The replicas that left free their slots of the KV-event index first, for those that came.
		addrs := make([]string, len(next))
		for i, r := range next {
			addrs[i] = r.Addr
		}
		f.cfg.KV.Retain(addrs)
		for _, r := range next {
			if r.kvSlot < 0 {
				r.kvSlot = int8(f.cfg.KV.Slot(r.Addr))
			}
		}
	}
	f.unready = 0
	for _, r := range next {
		for _, name := range r.unready {
			f.unready += b2i(name != "")
		}
	}
	if f.drain != nil && !slices.Contains(next, f.drain) {
		f.drain = nil
	}
	if moved {
		f.index.clear()
	}
	f.wake()
	return nil
}

// errHold is pick's answer when the call is held: every replica where its adapter could run is
// waiting for a slot.
var errHold = errors.New("held for an adapter slot")

// unbounded is a limit no count in flight reaches.
const unbounded = math.MaxInt

// State is a replica's state as metrics and tests read it.
type State struct {
	Addr             string
	Healthy          bool
	InFlight         int
	Waiting, Running int // scraped
	// Capacity is what the replica was seen running at most while requests waited on it (0: never seen
	// saturated): its --max-num-seqs, learned for admission when the models file sets no maxConcurrency.
	Capacity int
	Adapters []string // running, as far as this process knows
	// Unready are the adapters svc is loading on the replica, or that its listing lacked: their calls
	// go elsewhere while another healthy replica serves them.
	Unready []string
	// Resident are the adapters with no call running that are still in one of its GPU slots, as the
	// picker models them (resident): a call of one costs no adapter load there.
	Resident  []string
	Picks     [numReasons]uint64
	Ejections uint64
	// Held counts the calls sent to the replica after being held in svc for an adapter slot
	// (PickWait), HeldFor the time they were held.
	Held    uint64
	HeldFor time.Duration
	// MeanCall is the moving mean of how long its calls from here took (0 before one ended well);
	// Pace is that over the fastest healthy replica's (1 the fastest; 0 before a call ended well).
	MeanCall time.Duration
	Pace     float64
	// Out says why a replica that is not healthy was taken out, in words ("" while healthy);
	// OutUntil is when it is next probed with GET /health.
	Out      string
	OutUntil time.Time
	// KV is what the replica's KV events told (zero without Config.KV): the index's state of it and
	// blocks held, and the conversation turns sent to it as the events placed them (KVPicks) or the
	// routed chains did because they were not known (KVRouted).
	KV                KVState
	KVPicks, KVRouted uint64
}

// KVState is the KV-event index's view of a replica: its state ("quiet", "exact", "partial",
// "unknown"; "" without KV events) and the blocks it holds.
type KVState struct {
	State  string
	Blocks int
}

// PicksBy returns the picks decided by reason.
func (s State) PicksBy(reason Reason) uint64 { return s.Picks[reason] }

// States returns the replicas' states, in the order given.
func (f *Fleet) States() []State {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]State, len(f.replicas))
	var healthy uint64
	for _, r := range f.replicas {
		if r.healthy {
			healthy |= 1 << r.pos
		}
	}
	fastest := f.fastest(healthy)
	for i, r := range f.replicas {
		s := State{Addr: r.Addr, Healthy: r.healthy, InFlight: r.inflight, Waiting: r.waiting, Running: r.running, Capacity: r.capacity,
			Picks: r.picks, Ejections: r.ejected, Held: r.held, HeldFor: r.heldFor, MeanCall: r.meanCall}
		if !r.healthy {
			s.Out, s.OutUntil = r.why, r.outUntil
		}
		if f.cfg.KV != nil && r.kvSlot >= 0 {
			st := f.cfg.KV.StateOf(int(r.kvSlot))
			s.KV = KVState{State: st.State.String(), Blocks: st.Blocks}
			s.KVPicks, s.KVRouted = r.kvPicks, r.kvRouted
		}
		if fastest > 0 && r.meanCall > 0 {
			s.Pace = float64(r.meanCall) / float64(fastest)
		}
		for _, name := range r.unready {
			if name != "" {
				s.Unready = append(s.Unready, name)
			}
		}
		for i := range r.adapters {
			switch a := &r.adapters[i]; {
			case a.running():
				s.Adapters = append(s.Adapters, a.name)
			case a.name != "" && f.cfg.MaxLoras > 0 && r.resident(a, f.cfg.MaxLoras):
				s.Resident = append(s.Resident, a.name)
			}
		}
		out[i] = s
	}
	return out
}

// CacheSignal names what the picker knows of the replicas' prefix caches: "routed", the prompts this
// process sent each replica (an approximation by construction; docs/LORA.md, "Fleets"), or
// "kv-events", the replicas' own KV events (Config.KV), with the routed chains where those are not
// known (KVPicks).
func (f *Fleet) CacheSignal() string {
	if f.cfg.KV != nil {
		return "kv-events"
	}
	return "routed"
}

// KVPicks returns the conversation turns placed by the replicas' KV events and those placed by the
// routed chains instead (the session's prompt not yet tokenized, or a candidate's state unknown).
func (f *Fleet) KVPicks() (byEvents, routed uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.replicas {
		byEvents += r.kvPicks
		routed += r.kvRouted
	}
	return byEvents, routed
}

// Root is the replica's scheme://host:port, under which /health, /metrics and /tokenize are.
func (r *Replica) Root() string { return r.root }

// Config returns the picker's configuration, defaults filled in.
func (f *Fleet) Config() Config { return f.cfg }

// Replicas returns the replicas, in the order given.
func (f *Fleet) Replicas() []*Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Replica(nil), f.replicas...)
}
