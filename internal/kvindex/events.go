package kvindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Kind is a KV event's type.
type Kind uint8

const (
	BlockStored Kind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

// Event is one KV-cache event of a replica, as vLLM's KVEventBatch carries it.
type Event struct {
	Kind Kind
	// Hashes are the engine's hashes of the blocks stored or removed, in chain order.
	Hashes []uint64
	// Parent is the engine's hash of the block before the first stored (HasParent false: none, the
	// chain begins).
	Parent    uint64
	HasParent bool
	// Tokens are the stored blocks' token ids, BlockSize for each hash.
	Tokens    []uint32
	BlockSize int
	// Adapter is the LoRA adapter the blocks were computed for ("" the base model).
	Adapter string
}

// seeds of svc's block hash; fixed, so that every edge computes the same chain.
const (
	k0 = 0x9e3779b97f4a7c15
	k1 = 0xbf58476d1ce4e5b9
	k2 = 0x94d049bb133111eb
)

func mix64(h uint64) uint64 {
	h ^= h >> 30
	h *= k1
	h ^= h >> 27
	h *= k2
	h ^= h >> 31
	return h
}

// chainSeed is the chain's start for an adapter: an adapter's KV cache is never its base model's.
func chainSeed(adapter string) uint64 {
	h := uint64(k0)
	for i := 0; i < len(adapter); i++ {
		h = (h ^ uint64(adapter[i])) * 0x100000001b3
	}
	return mix64(h ^ uint64(len(adapter)))
}

// blockHash is svc's hash of one block of tokens after the block hashed parent.
func blockHash(parent uint64, tokens []uint32) uint64 {
	h := parent
	for _, t := range tokens {
		h = mix64(h ^ uint64(t)*k1 + k2)
	}
	if h = mix64(h ^ uint64(len(tokens))); h == 0 {
		h = 1
	}
	return h
}

// AppendBlocks appends to dst svc's chain hashes of the full blocks of tokens (a partial last block
// is not cached by an engine, so not hashed): each includes the one before, so equal hashes at i mean
// equal tokens up to the end of block i.
func AppendBlocks(dst []uint64, adapter string, tokens []uint32, blockSize int) []uint64 {
	h := chainSeed(adapter)
	for len(tokens) >= blockSize {
		h = blockHash(h, tokens[:blockSize])
		dst = append(dst, h)
		tokens = tokens[blockSize:]
	}
	return dst
}

// Apply folds one batch of events of the replica at addr, with its publisher's sequence number
// (1 for the first), into the index. A sequence that skips numbers (events missed), or the first
// batch seen being past 1 (joined mid-stream), leaves the replica Partial: what it held before is
// forgotten, what it stores after is known. A sequence that goes back is a restarted publisher, whose
// cache is new: Exact again, from empty. It returns false for an address the index does not follow.
func (x *Index) Apply(addr string, seq uint64, events []Event) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.slots[addr]
	if !ok {
		return false
	}
	r := x.reps[s]
	switch {
	case !r.seen && seq <= 1, r.seen && seq < r.seq:
		if r.seen {
			r.stats.Gaps++
		}
		x.forget(s)
		r.state = Exact
	case !r.seen, seq > r.seq+1:
		r.stats.Gaps++
		x.forget(s)
		r.state = Partial
	case seq == r.seq:
		return true // a duplicate
	}
	r.seen, r.seq = true, seq
	x.sent[s].Store(0)
	r.stats.Batches++
	for i := range events {
		x.apply(s, &events[i])
	}
	return true
}

// forget clears what the index holds for slot s. Under mu.
func (x *Index) forget(s int) {
	r := x.reps[s]
	for h := range r.held {
		x.unhold(s, h)
	}
	clear(r.engine)
	clear(r.held)
}

func (x *Index) unhold(s int, h uint64) {
	x.holders.andNot(h, 1<<s)
}

func (x *Index) apply(s int, e *Event) {
	r := x.reps[s]
	switch e.Kind {
	case AllBlocksCleared:
		r.stats.Cleared++
		x.forget(s)
	case BlockRemoved:
		for _, eh := range e.Hashes {
			h, ok := r.engine[eh]
			if !ok {
				continue
			}
			r.stats.Removed++
			delete(r.engine, eh)
			if r.held[h]--; r.held[h] <= 0 {
				delete(r.held, h)
				x.unhold(s, h)
			}
		}
	case BlockStored:
		bs := e.BlockSize
		if bs == 0 {
			bs = x.blockSize
		}
		seed := chainSeed(e.Adapter)
		parent := seed
		if e.HasParent {
			p, ok := r.engine[e.Parent]
			if !ok {
				r.stats.Dropped += uint64(len(e.Hashes))
				return
			}
			parent = p
		}
		if bs != x.blockSize || len(e.Tokens) != bs*len(e.Hashes) {
			r.stats.Dropped += uint64(len(e.Hashes))
			return
		}
		for i, eh := range e.Hashes {
			toks := e.Tokens[i*bs : (i+1)*bs]
			h := blockHash(parent, toks)
			if x.chains[h] == 0 {
				// Not a block of a prompt svc knows. llm-d-inference-sim stores, in one event, blocks
				// evicted from the middle of a prompt before those after its last cached block, all
				// under that block as parent; a block whose tokens sit in one known chain is that
				// chain's, and the chain of those after goes on from the event's parent.
				if k := x.known[blockHash(seed, toks)]; k.chain != 0 {
					h = k.chain
				} else {
					parent = h
				}
			} else {
				parent = h
			}
			if _, dup := r.engine[eh]; dup {
				continue
			}
			if len(r.engine) >= MaxBlocks {
				r.stats.Dropped += uint64(len(e.Hashes) - i)
				r.state = Partial
				return
			}
			r.stats.Stored++
			r.engine[eh] = h
			r.held[h]++
			x.holders.or(h, 1<<s)
		}
	}
}

// Topic's form: kv@<host:port>@<model>, the simulator's and llm-d's (the replica's serving address).
func topicAddr(topic string) (string, bool) {
	rest, ok := strings.CutPrefix(topic, "kv@")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '@')
	if i < 0 {
		return rest, rest != ""
	}
	return rest[:i], i > 0
}

// applyMessage folds one ZMQ message of frames topic, sequence (8 bytes, big-endian) and a msgpack
// KVEventBatch into the index: for the replica at addr, whatever the topic, when addr is not ""; else
// for the replica its topic names (kv@host:port@model).
func (x *Index) applyMessage(frames [][]byte, addr string) error {
	if len(frames) != 3 || len(frames[1]) != 8 {
		return fmt.Errorf("kvindex: a message of %d frames, want topic, sequence and payload", len(frames))
	}
	if addr == "" {
		var ok bool
		if addr, ok = topicAddr(string(frames[0])); !ok {
			return fmt.Errorf("kvindex: topic %q is not kv@host:port@model", frames[0])
		}
	}
	events, err := Decode(frames[2])
	if err != nil {
		return err
	}
	x.Apply(addr, binary.BigEndian.Uint64(frames[1]), events)
	return nil
}

// Decode reads a msgpack KVEventBatch: [ts, [event...], dp_rank?], each event either vLLM's array
// form [tag, ...fields] or its map form {"type": tag, ...}. Block hashes may be integers or bytes
// (vLLM's sha256 hashes; folded to 64 bits).
func Decode(payload []byte) ([]Event, error) {
	var batch []msgpack.RawMessage
	if err := msgpack.Unmarshal(payload, &batch); err != nil {
		return nil, fmt.Errorf("kvindex: batch: %w", err)
	}
	if len(batch) < 2 {
		return nil, errors.New("kvindex: a batch of fewer than 2 fields")
	}
	var raws []msgpack.RawMessage
	if err := msgpack.Unmarshal(batch[1], &raws); err != nil {
		return nil, fmt.Errorf("kvindex: events: %w", err)
	}
	out := make([]Event, 0, len(raws))
	for _, raw := range raws {
		var v any
		if err := msgpack.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("kvindex: event: %w", err)
		}
		e, ok := decodeEvent(v)
		if ok {
			out = append(out, e)
		}
	}
	return out, nil
}

// decodeEvent reads one event; false for one of another type (vLLM may add some).
func decodeEvent(v any) (Event, bool) {
	var tag string
	var hashes, parent, tokens, size, lora any
	switch ev := v.(type) {
	case []any:
		if len(ev) == 0 {
			return Event{}, false
		}
		tag, _ = ev[0].(string)
		at := func(i int) any {
			if i < len(ev) {
				return ev[i]
			}
			return nil
		}
		switch tag {
		case "BlockStored": // [tag, hashes, parent, token_ids, block_size, lora_id, medium, lora_name, ...]
			hashes, parent, tokens, size, lora = at(1), at(2), at(3), at(4), at(7)
		case "BlockRemoved": // [tag, hashes, medium]
			hashes = at(1)
		}
	case map[string]any:
		tag, _ = ev["type"].(string)
		hashes, parent, tokens, size, lora = ev["block_hashes"], ev["parent_block_hash"], ev["token_ids"], ev["block_size"], ev["lora_name"]
	default:
		return Event{}, false
	}
	var e Event
	switch tag {
	case "BlockStored":
		e.Kind = BlockStored
	case "BlockRemoved":
		e.Kind = BlockRemoved
	case "AllBlocksCleared":
		return Event{Kind: AllBlocksCleared}, true
	default:
		return Event{}, false
	}
	hs, _ := hashes.([]any)
	for _, h := range hs {
		if u, ok := hashOf(h); ok {
			e.Hashes = append(e.Hashes, u)
		}
	}
	if e.Kind == BlockRemoved {
		return e, true
	}
	// A parent of 0 is the simulator's array form for none (llm-d's EmptyBlockHash).
	if p, ok := hashOf(parent); ok && p != 0 {
		e.Parent, e.HasParent = p, true
	}
	ts, _ := tokens.([]any)
	e.Tokens = make([]uint32, 0, len(ts))
	for _, t := range ts {
		u, _ := toUint(t)
		e.Tokens = append(e.Tokens, uint32(u))
	}
	n, _ := toUint(size)
	e.BlockSize = int(n)
	e.Adapter, _ = lora.(string)
	return e, true
}

func hashOf(v any) (uint64, bool) {
	if b, ok := v.([]byte); ok {
		f := fnv.New64a()
		f.Write(b)
		return f.Sum64(), true
	}
	return toUint(v)
}

func toUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint64:
		return n, true
	case uint32:
		return uint64(n), true
	case uint16:
		return uint64(n), true
	case uint8:
		return uint64(n), true
	case int64:
		return uint64(n), true
	case int32:
		return uint64(n), true
	case int16:
		return uint64(n), true
	case int8:
		return uint64(n), true
	case int:
		return uint64(n), true
	}
	return 0, false
}
