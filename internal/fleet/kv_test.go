package fleet

import (
	"fmt"
	"testing"

	"github.com/svcdev/svc/internal/kvindex"
)

// kvTokens returns n token ids of a session: a shared head of 64 tokens, then the session's own.
func kvTokens(session, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
		if i >= 64 {
			out[i] = uint32(session<<20 | i)
		}
	}
	return out
}

// store is a BlockStored of the first n tokens' whole blocks, engine hashes from base on.
func store(base uint64, toks []uint32) kvindex.Event {
	e := kvindex.Event{Kind: kvindex.BlockStored, Tokens: toks, BlockSize: 16}
	for i := range len(toks) / 16 {
		e.Hashes = append(e.Hashes, base+uint64(i))
	}
	return e
}

// A conversation's next turn goes where the replicas' own events say its last prompt is held, not where
// this process routed it; when its prompt or a replica's state is not known, the routed chains decide
// (counted). Seen failing before placeKV: the turn went to its routed home.
func TestKVEventsPlaceATurnWhereItsPromptIsHeld(t *testing.T) {
	x := kvindex.New(16)
	f := newFleet(t, Config{KV: x}, 4)
	if got := f.CacheSignal(); got != "kv-events" {
		t.Fatalf("cache signal %q, want kv-events", got)
	}
	first, p := agentTurn(3, 2)
	key := SessionKey("", first)
	home := homeOf(f, key)
	holder := (home + 2) % 4
	toks := kvTokens(3, 800)
	req := Request{Blocks: blocks("", p), Session: key}

	// Nothing known yet: the routed chains place it (its home).
	if pk := mustPick(t, f, req); pk.Replica.pos != home {
		t.Fatalf("with no events the turn went to %d, want its home %d", pk.Replica.pos, home)
	} else {
		f.Done(pk, OK)
	}
	for i, r := range f.Replicas() {
		x.Apply(r.Addr, 1, nil) // every replica heard from: empty caches
		if uint8(i) == holder {
			x.Apply(r.Addr, 2, []kvindex.Event{store(1000, toks)})
		} else {
			x.Apply(r.Addr, 2, []kvindex.Event{store(uint64(i)<<20, toks[:64])}) // the shared head only
		}
	}
	x.Remember(key, "", toks, len(p))
	pk := mustPick(t, f, req)
	if pk.Replica.pos != holder || pk.Reason != ReasonAffinity {
		t.Fatalf("the turn went to %d (%s), want %d, which holds its prompt", pk.Replica.pos, pk.Reason, holder)
	}
	f.Done(pk, OK)
	// The holder evicts the prompt's tail: a replica holding more of it wins... none does, so the one
	// holding most (the holder still has the head and 20 blocks) keeps it.
	var tail []uint64
	for i := 20; i < 50; i++ {
		tail = append(tail, 1000+uint64(i))
	}
	x.Apply(f.Replicas()[holder].Addr, 3, []kvindex.Event{{Kind: kvindex.BlockRemoved, Hashes: tail}})
	if pk = mustPick(t, f, req); pk.Replica.pos != holder {
		t.Fatalf("after evicting the tail the turn went to %d, want %d (holds 20 blocks, others 4)", pk.Replica.pos, holder)
	}
	f.Done(pk, OK)
	// All cleared there: the head is on every replica; the least loaded, then rendezvous, takes it.
	x.Apply(f.Replicas()[holder].Addr, 4, []kvindex.Event{{Kind: kvindex.AllBlocksCleared}})
	if pk = mustPick(t, f, req); pk.Replica.pos == holder {
		t.Fatalf("after the holder cleared its cache the turn stayed there")
	}
	f.Done(pk, OK)
	// A session whose prompt was never tokenized falls back to the routed chains.
	other, q := agentTurn(4, 2)
	pk = mustPick(t, f, Request{Blocks: blocks("", q), Session: SessionKey("", other)})
	f.Done(pk, OK)
	if byEvents, fellBack := f.KVPicks(); byEvents != 3 || fellBack != 2 {
		t.Fatalf("kv picks %d, fallbacks %d; want 3 and 2", byEvents, fellBack)
	}
}

// BenchmarkPickSessionKV: BenchmarkPickSession's picks with the replicas' KV events: 64 sessions of
// about 6,900 tokens (430 blocks of 16) known, each held in part on every one of 16 replicas (a
// different run on each), 32 calls in flight.
func BenchmarkPickSessionKV(b *testing.B) {
	x := kvindex.New(16)
	f := newFleet(b, Config{KV: x}, 16)
	type call struct {
		key    uint64
		blocks []uint64
	}
	var calls []call
	seq := make([]uint64, 16)
	for s := range 64 {
		first, p := agentTurn(s, 4+s%8)
		key := SessionKey("", first)
		toks := kvTokens(s, 16*430)
		x.Remember(key, "", toks, len(p))
		for i, r := range f.Replicas() {
			seq[i]++
			n := 16 * ((s*7 + i*29) % 430)
			x.Apply(r.Addr, seq[i], []kvindex.Event{store(uint64(s)<<32|uint64(i)<<24, toks[:n])})
		}
		calls = append(calls, call{key, blocks("", p)})
	}
	var inflight []Pick
	for _, c := range calls[:32] {
		pk, _ := f.Pick(Request{Blocks: c.blocks, Session: c.key})
		inflight = append(inflight, pk)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c := calls[i%len(calls)]
		pk, err := f.Pick(Request{Blocks: c.blocks, Session: c.key})
		if err != nil {
			b.Fatal(err)
		}
		f.Done(inflight[i%32], OK)
		inflight[i%32] = pk
	}
	if byEvents, _ := f.KVPicks(); byEvents == 0 {
		b.Fatal("no pick read the KV events")
	}
}

// Replicas that leave (replicas: {dns}) free their slots of the KV-event index: 64 addresses come and
// go, 4 at a time, and the last four still get slots and are placed by their events.
func TestKVSlotsFollowTheReplicas(t *testing.T) {
	x := kvindex.New(16)
	f := newFleet(t, Config{KV: x}, 4)
	for round := 1; round <= 20; round++ {
		var us []string
		for i := range 4 {
			us = append(us, fmt.Sprintf("http://10.1.%d.%d:8000/v1", round, i))
		}
		if err := f.SetReplicas(us); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range f.Replicas() {
		if r.kvSlot < 0 {
			t.Fatalf("replica %s has no slot after 80 addresses came and went", r.Addr)
		}
		if st := x.StateOf(int(r.kvSlot)); st.State != kvindex.Quiet || st.Batches != 0 {
			t.Fatalf("replica %s inherited a state: %+v", r.Addr, st)
		}
	}
}

// Two edges, each with its own picker and its own index fed the same replicas' events, get a
// conversation's turns in turn (a balancer alternating), each remembering only the prompts it sent,
// with different calls in flight: from the third turn on, every turn lands where the one before went,
// placed by the events. The events are state every edge sees alike (docs/LORA.md); an edge that did not
// send the last turn reads the one before it, a prefix of it, held on the same replica. The second turn
// may move once: the edge that first sees the conversation knows none of its tokens (it never
// tokenizes before a pick) and places it by the routed rule, at its home, where the opening went to the
// least loaded replica of the other edge's view.
func TestTwoEdgesPlaceByTheSameEvents(t *testing.T) {
	var edges [2]*Fleet
	var xs [2]*kvindex.Index
	for i := range edges {
		xs[i] = kvindex.New(16)
		edges[i] = newFleet(t, Config{KV: xs[i]}, 4)
	}
	seq := make([]uint64, 4)
	held := make([]int, 4*12) // per replica and session: the blocks stored there
	// store publishes, to both edges, that replica r stored the blocks of toks it did not hold.
	store := func(r, s int, toks []uint32) {
		have := held[r*12+s]
		n := len(toks) / 16
		if n <= have {
			return
		}
		e := kvindex.Event{Kind: kvindex.BlockStored, Tokens: toks[have*16 : n*16], BlockSize: 16}
		if have > 0 {
			e.Parent, e.HasParent = uint64(r)<<40|uint64(s)<<32|uint64(have-1), true
		}
		for i := have; i < n; i++ {
			e.Hashes = append(e.Hashes, uint64(r)<<40|uint64(s)<<32|uint64(i))
		}
		held[r*12+s] = n
		seq[r]++
		for _, x := range xs {
			x.Apply(edges[0].Replicas()[r].Addr, seq[r], []kvindex.Event{e})
		}
	}
	// Each edge has a different load: edge 1 has two calls in flight on replica 0 and one on 2.
	for _, r := range []int{0, 0, 2} {
		edges[1].mu.Lock()
		edges[1].replicas[r].inflight++
		edges[1].mu.Unlock()
	}
	for s := range 12 {
		// Sessions' tokens share nothing (the head differs), so that each is held only where it went.
		toks := func(turn int) []uint32 {
			out := make([]uint32, 16*(8+6*turn))
			for i := range out {
				out[i] = uint32(s<<24 | i)
			}
			return out
		}
		first, _ := agentTurn(s, 0)
		key := SessionKey("", first)
		where := -1
		for turn := range 6 {
			e := turn % 2
			_, p := agentTurn(s, turn)
			pk := mustPick(t, edges[e], Request{Blocks: blocks("", p), Session: key, Opening: turn == 0})
			edges[e].Done(pk, OK)
			r := int(pk.Replica.pos)
			if turn > 1 && (r != where || pk.Reason != ReasonAffinity) {
				t.Fatalf("session %d turn %d through edge %d went to %d, the turn before to %d (%s)", s, turn, e, r, where, pk.Reason)
			}
			where = r
			store(r, s, toks(turn))
			xs[e].Remember(key, "", toks(turn), len(p))
		}
	}
	for i, f := range edges {
		if byEvents, _ := f.KVPicks(); byEvents == 0 {
			t.Errorf("edge %d placed no turn by the events", i)
		}
	}
}
