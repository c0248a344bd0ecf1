// Package kvindex keeps which KV-cache blocks each replica of a model holds, from the replicas' own KV events (vLLM's and llm-d-inference-sim's ZMQ msgpack batches), keyed by svc's own chained hash of token-id blocks, and the token blocks of each conversation's last prompt (docs/LORA.md, "Exact cache state from KV events").
package kvindex

import (
	"sync"
	"sync/atomic"
	"time"
)

// MaxReplicas is the most replicas one index follows (a replica set fits a machine word, as the
// picker's does).
const MaxReplicas = 64

// Bounds of the index's memory. A replica's blocks beyond MaxBlocks are not indexed (counted in
// Stats.Dropped; the index then holds a subset of what the replica holds, never more). About 120 bytes
// a block (two map entries on the replica and one shared): 15 MB a replica at most. Sessions keep at
// most MaxSessionBlocks blocks in all (4M tokens of 16-token blocks; about 100 bytes each with the
// maps by chain and content: 26 MB), the oldest session forgotten first.
const (
	MaxBlocks        = 1 << 17
	MaxSessionBlocks = 1 << 18
	maxSessions      = 1 << 16
)

// State is how far the index knows what a replica holds.
type State uint8

const (
	// Quiet: no event from the replica yet. It counts as holding nothing (a replica that cached
	// prompts before svc started reads low until its first event, which shows it Partial).
	Quiet State = iota
	// Exact: every event since the replica's publisher began (sequence 1, or a reset), none missed.
	Exact
	// Partial: joined mid-stream, or a sequence gap, or blocks past MaxBlocks: the index forgot what
	// it held then and keeps what it learned since, a subset of what the replica holds.
	Partial
	// Unknown: calls were sent to the replica and no event came from it for StaleAfter (a publisher
	// that stopped, a subscriber cut off): picks use the routed signal while a candidate is Unknown.
	Unknown
)

var stateNames = [...]string{Quiet: "quiet", Exact: "exact", Partial: "partial", Unknown: "unknown"}

func (s State) String() string { return stateNames[s] }

// StaleAfter is how long a replica may take calls with no event from it before its state reads
// Unknown (until its next event): a publisher that stopped, or a subscriber cut off. A call whose
// blocks were all cached already sends no event, hence the long wait.
const StaleAfter = 30 * time.Second

// DefaultBlockSize is the engines' block of tokens (vLLM's and the simulator's --block-size default).
const DefaultBlockSize = 16

type replica struct {
	engine map[uint64]uint64 // the engine's block hash -> svc's hash of the same block
	held   map[uint64]int32  // svc's hash -> the engine blocks of it (1 but for engine hash collisions of content)
	state  State
	seen   bool   // a sequence number was seen
	seq    uint64 // the last one
	stats  Stats
}

// Stats counts a replica's events, for metrics and tests.
type Stats struct {
	Batches, Stored, Removed, Cleared uint64
	// Dropped counts stored blocks not indexed: past MaxBlocks, or whose parent the index does not
	// know (after a gap), or whose token ids do not fill whole blocks.
	Dropped uint64
	// Gaps counts sequence gaps and resets; Blocks is what the index holds for it now.
	Gaps   uint64
	Blocks int
	State  State
}

type session struct {
	blocks  []uint64 // svc's chain hashes of the prompt's full token blocks
	content []uint64 // each block's hash of its tokens alone (and adapter)
	tokens  int      // the prompt's tokens
	bytes   int      // the prompt's length in bytes as the picker hashed it (0: unknown)
}

type knownBlock struct {
	chain uint64
	refs  int32
}

// Index is one model's KV-event index. Its methods are safe for concurrent use.
type Index struct {
	mu        sync.RWMutex
	blockSize int
	slots     map[string]int        // replica address (host:port, as its events' topic names it) -> slot
	reps      [MaxReplicas]*replica // nil: a free slot
	holders   maskTable             // svc's block hash -> the slots holding it
	sessions  map[uint64]*session
	order     []uint64 // session keys, oldest first (may name forgotten ones)
	nSession  int      // hashes held by sessions
	// chains counts the sessions' blocks by chain hash; known maps a block's content hash to its chain
	// hash (0 when the same tokens sit in two chains), with the blocks counted.
	chains map[uint64]int32
	known  map[uint64]knownBlock
	// sent is, per slot, when the oldest call sent there since its last event was sent (unix ns; 0: none).
	sent [MaxReplicas]atomic.Int64
	now  func() time.Time
}

// New makes an index of a model whose engines cache blocks of blockSize tokens (0: DefaultBlockSize).
func New(blockSize int) *Index {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	return &Index{blockSize: blockSize, slots: map[string]int{}, sessions: map[uint64]*session{},
		chains: map[uint64]int32{}, known: map[uint64]knownBlock{}, now: time.Now}
}

// Slot returns the slot of the replica at addr (host:port), adding it; -1 when MaxReplicas are
// followed already.
func (x *Index) Slot(addr string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.slots[addr]; ok {
		return s
	}
	for s, r := range x.reps {
		if r == nil {
			x.slots[addr] = s
			x.reps[s] = &replica{engine: map[uint64]uint64{}, held: map[uint64]int32{}}
			x.sent[s].Store(0)
			return s
		}
	}
	return -1
}

// Retain stops following the replicas not at addrs (they left: replicas: {dns}), forgetting what they
// held, so that their slots serve replicas to come.
func (x *Index) Retain(addrs []string) {
	keep := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		keep[a] = true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for addr, s := range x.slots {
		if !keep[addr] {
			x.forget(s)
			x.reps[s] = nil
			delete(x.slots, addr)
		}
	}
}

// Sent notes that a call went to the replica at slot: if no event comes from it for StaleAfter, its
// state reads Unknown. It takes no lock (the picker calls it with each pick).
func (x *Index) Sent(slot int) {
	if slot < 0 || slot >= MaxReplicas || x.sent[slot].Load() != 0 {
		return
	}
	x.sent[slot].CompareAndSwap(0, x.now().UnixNano())
}

// usable is the slots whose state a pick may read: all but those quiet for StaleAfter after a call
// (Unknown). Under mu.
func (x *Index) usable(now time.Time) uint64 {
	var m uint64
	for s, r := range x.reps {
		if r == nil {
			continue
		}
		if sent := x.sent[s].Load(); sent == 0 || now.UnixNano()-sent < int64(StaleAfter) {
			m |= 1 << s
		}
	}
	return m
}

// StateOf returns the replica's state and counts.
func (x *Index) StateOf(slot int) Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if slot < 0 || slot >= MaxReplicas || x.reps[slot] == nil {
		return Stats{}
	}
	r := x.reps[slot]
	st := r.stats
	st.Blocks, st.State = len(r.engine), r.state
	if x.usable(x.now())&(1<<slot) == 0 {
		st.State = Unknown
	}
	return st
}

// Remember keeps the token blocks of a conversation's prompt (tokens as the replica's /tokenize gave
// them; promptBytes the prompt's length as the picker hashed it) under its session key: its next turn
// repeats them, and a pick reads where they are held (Held).
func (x *Index) Remember(key uint64, adapter string, tokens []uint32, promptBytes int) {
	if key == 0 {
		return
	}
	s := &session{tokens: len(tokens), bytes: promptBytes}
	s.blocks = AppendBlocks(nil, adapter, tokens, x.blockSize)
	s.content = make([]uint64, len(s.blocks))
	seed := chainSeed(adapter)
	for i := range s.blocks {
		s.content[i] = blockHash(seed, tokens[i*x.blockSize:(i+1)*x.blockSize])
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.sessions[key]; old != nil {
		x.drop(old)
	} else {
		x.order = append(x.order, key)
	}
	x.sessions[key] = s
	x.add(s)
	for (x.nSession > MaxSessionBlocks || len(x.sessions) > maxSessions) && len(x.order) > 0 {
		k := x.order[0]
		x.order = x.order[1:]
		if old := x.sessions[k]; old != nil && k != key {
			x.drop(old)
			delete(x.sessions, k)
		}
	}
	if len(x.order) > 2*maxSessions { // drop the keys of sessions replaced or forgotten
		live := x.order[:0]
		for _, k := range x.order {
			if x.sessions[k] != nil {
				live = append(live, k)
			}
		}
		x.order = append([]uint64(nil), live...)
	}
}

// add counts a session's blocks among those known by content (Apply's repair of the simulator's
// stores). Under mu.
func (x *Index) add(s *session) {
	x.nSession += len(s.blocks)
	for i, h := range s.blocks {
		x.chains[h]++
		k, ok := x.known[s.content[i]]
		switch {
		case !ok:
			k.chain = h
		case k.chain != h:
			k.chain = 0 // the same tokens in two places: content says nothing
		}
		k.refs++
		x.known[s.content[i]] = k
	}
}

// drop undoes add. Under mu.
func (x *Index) drop(s *session) {
	x.nSession -= len(s.blocks)
	for i, h := range s.blocks {
		if x.chains[h]--; x.chains[h] <= 0 {
			delete(x.chains, h)
		}
		if k := x.known[s.content[i]]; k.refs <= 1 {
			delete(x.known, s.content[i])
		} else {
			k.refs--
			x.known[s.content[i]] = k
		}
	}
}

// Known says whether the index has the token blocks of the session.
func (x *Index) Known(key uint64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.sessions[key] != nil
}

// Most returns, of the slots in cand, those holding the longest leading run of the session's last
// prompt (all of cand when none holds its first block) and that run in tokens; known is the slots of
// cand whose state is known (only those are searched). tokens and bytes are the prompt's (bytes 0 when
// not given); ok is false when the session's prompt is not known. A binary search over the session's
// blocks that keeps the slots holding the middle block when any does: about log2(blocks) lookups
// whatever the replicas, and no allocation. A block held implies its chain's earlier blocks held
// (engines evict a chain's tail first); where one did not, the run found is shorter, never longer than
// the prefix held.
func (x *Index) Most(key uint64, cand uint64) (best uint64, run int, known uint64, tokens, bytes int, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.sessions[key]
	if s == nil {
		return 0, 0, 0, 0, 0, false
	}
	known = cand & x.usable(x.now())
	best = known
	lo, hi := 0, len(s.blocks)
	for lo < hi {
		mid := (lo + hi + 1) / 2 // a run of mid or more holds block mid-1
		if m := x.holders.get(s.blocks[mid-1]) & best; m != 0 {
			best, lo = m, mid
		} else {
			hi = mid - 1
		}
	}
	return best, lo * x.blockSize, known, s.tokens, s.bytes, true
}

// Predict returns, for the replica at slot, the tokens of the session's last prompt it holds as a
// leading run (vLLM's cached tokens for a prompt that repeats it) and in all (what
// llm-d-inference-sim reports as cached_tokens: it counts every block of the prompt it holds).
func (x *Index) Predict(key uint64, slot int) (leading, resident int, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := x.sessions[key]
	if s == nil || slot < 0 || slot >= MaxReplicas || x.reps[slot] == nil {
		return 0, 0, false
	}
	r := x.reps[slot]
	run := true
	for _, b := range s.blocks {
		if r.held[b] > 0 {
			resident++
			if run {
				leading++
			}
		} else {
			run = false
		}
	}
	return leading * x.blockSize, resident * x.blockSize, true
}
