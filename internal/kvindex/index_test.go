package kvindex

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// tokens returns n token ids from base on.
func tokens(base, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(base + i)
	}
	return out
}

// stored is a BlockStored of the blocks of toks (whole blocks of 16), engine hashes from h on.
func stored(h uint64, parent uint64, toks []uint32) Event {
	e := Event{Kind: BlockStored, Tokens: toks, BlockSize: 16, Parent: parent, HasParent: parent != 0}
	for i := 0; i < len(toks)/16; i++ {
		e.Hashes = append(e.Hashes, h+uint64(i))
	}
	return e
}

// held returns what each replica holds of the session's prompt as a leading run (Most of that replica
// alone), -1 where its state is not known.
func held(t *testing.T, x *Index, key uint64) [MaxReplicas]int32 {
	t.Helper()
	var out [MaxReplicas]int32
	for i := range out {
		best, run, known, _, _, ok := x.Most(key, 1<<i)
		if !ok {
			t.Fatalf("session %d not known", key)
		}
		switch {
		case known == 0:
			out[i] = -1
		case best == 1<<i:
			out[i] = int32(run)
		}
	}
	return out
}

// TestIndexFollowsEvents drives the index with a fake event stream of two replicas: blocks stored over
// two batches (the second chained to the first by the engine's parent hash), removed, all cleared, a
// sequence gap, a restarted publisher, a replica that went quiet, and an engine that dropped a middle
// block (what the simulator does), checking what a pick and a prediction read after each.
func TestIndexFollowsEvents(t *testing.T) {
	x := New(16)
	now := time.Unix(1000, 0)
	x.now = func() time.Time { return now }
	a, b := x.Slot("10.0.0.1:8000"), x.Slot("10.0.0.2:8000")
	prompt := tokens(0, 70) // 4 whole blocks and 6 tokens
	x.Remember(7, "", prompt, 280)

	if h := held(t, x, 7); h[a] != 0 || h[b] != 0 {
		t.Fatalf("before any event: %v %v, want both holding nothing (quiet)", h[a], h[b])
	}
	if st := x.StateOf(a); st.State != Quiet {
		t.Fatalf("before any event: %v, want quiet", st.State)
	}
	// A stores the first two blocks, then the next two chained to them; B stores another prompt's.
	x.Apply("10.0.0.1:8000", 1, []Event{stored(100, 0, prompt[:32])})
	x.Apply("10.0.0.1:8000", 2, []Event{stored(200, 101, prompt[32:64])})
	x.Apply("10.0.0.2:8000", 1, []Event{stored(300, 0, tokens(5000, 48))})
	if h := held(t, x, 7); h[a] != 64 || h[b] != 0 {
		t.Fatalf("after stores: A holds %d tokens, B %d; want 64 and 0", h[a], h[b])
	}
	if got := x.StateOf(a); got.State != Exact || got.Blocks != 4 {
		t.Fatalf("A's state %v with %d blocks, want exact with 4", got.State, got.Blocks)
	}
	// Evicting the chain's tail shortens the run.
	x.Apply("10.0.0.1:8000", 3, []Event{{Kind: BlockRemoved, Hashes: []uint64{201}}})
	if h := held(t, x, 7); h[a] != 48 {
		t.Fatalf("after removing block 3: A holds %d, want 48", h[a])
	}
	// An adapter's blocks are never the base model's.
	x.Remember(8, "sql", prompt, 280)
	if h := held(t, x, 8); h[a] != 0 {
		t.Fatalf("the adapter's session reads %d tokens held on A, want 0", h[a])
	}
	// A block removed from the middle (the simulator evicts a finished prompt's blocks in any order):
	// the leading run stops there, the resident count (the simulator's cached_tokens) does not.
	x.Apply("10.0.0.1:8000", 4, []Event{{Kind: BlockRemoved, Hashes: []uint64{100}}, stored(201, 200, prompt[48:64])})
	if lead, res, _ := x.Predict(7, a); lead != 0 || res != 48 {
		t.Fatalf("with block 0 gone: leading %d, resident %d; want 0 and 48", lead, res)
	}
	// A gap: events were missed, so what A held is forgotten; it is partial, and learns again.
	x.Apply("10.0.0.1:8000", 6, []Event{stored(400, 0, tokens(9000, 16))})
	if st := x.StateOf(a); st.State != Partial || st.Gaps != 1 || st.Blocks != 1 {
		t.Fatalf("after a gap: %+v, want partial, 1 gap, 1 block", st)
	}
	if h := held(t, x, 7); h[a] != 0 {
		t.Fatalf("after a gap: A holds %d, want 0 (forgotten)", h[a])
	}
	// A stored block whose parent the index never saw (it was stored before the gap) is not indexed.
	x.Apply("10.0.0.1:8000", 7, []Event{stored(500, 101, prompt[32:48])})
	if st := x.StateOf(a); st.Dropped != 1 {
		t.Fatalf("a block whose parent is unknown: dropped %d, want 1", st.Dropped)
	}
	// A restarted publisher (its sequence starts again) has an empty cache: exact again.
	x.Apply("10.0.0.1:8000", 1, []Event{stored(100, 0, prompt[:64])})
	if st := x.StateOf(a); st.State != Exact || st.Blocks != 4 {
		t.Fatalf("after a restart: %+v, want exact with 4 blocks", st)
	}
	if h := held(t, x, 7); h[a] != 64 {
		t.Fatalf("after a restart: A holds %d, want 64", h[a])
	}
	// All blocks cleared.
	x.Apply("10.0.0.1:8000", 2, []Event{{Kind: AllBlocksCleared}})
	if h := held(t, x, 7); h[a] != 0 {
		t.Fatalf("after clearing: A holds %d, want 0", h[a])
	}
	// A replica sent calls that says nothing for StaleAfter is unknown until it speaks again.
	x.Sent(b)
	now = now.Add(StaleAfter)
	if h := held(t, x, 7); h[b] != -1 {
		t.Fatalf("B quiet for %v after a call: %d, want unknown", StaleAfter, h[b])
	}
	x.Apply("10.0.0.2:8000", 2, []Event{stored(600, 0, prompt[:16])})
	if h := held(t, x, 7); h[b] != 16 {
		t.Fatalf("B after its next event: %d, want 16", h[b])
	}
	// Events of a replica the index does not follow change nothing.
	if x.Apply("10.0.0.9:8000", 1, []Event{stored(700, 0, prompt[:64])}) {
		t.Fatal("an unknown replica's events were applied")
	}
}

// TestMostFindsTheLongestRun: of 41 replicas holding runs of every length, Most finds the longest
// among any subset, by a binary search.
func TestMostFindsTheLongestRun(t *testing.T) {
	x := New(16)
	prompt := tokens(0, 16*40)
	x.Remember(1, "", prompt, 0)
	for s := 0; s < 41; s++ {
		addr := fmt.Sprintf("r%d:1", s)
		x.Slot(addr)
		if s > 0 {
			x.Apply(addr, 1, []Event{stored(uint64(s)<<32, 0, prompt[:16*s])})
		} else {
			x.Apply(addr, 1, nil)
		}
	}
	h := held(t, x, 1)
	for s := 0; s < 41; s++ {
		if lead, _, _ := x.Predict(1, s); h[s] != int32(16*s) || lead != 16*s {
			t.Fatalf("replica %d: held %d, predicted %d; want %d", s, h[s], lead, 16*s)
		}
	}
	for _, c := range []struct {
		cand uint64
		best int
	}{{1<<41 - 1, 40}, {1<<3 | 1<<17 | 1<<9, 17}, {1, 0}, {1<<20 - 1, 19}} {
		best, run, _, _, _, _ := x.Most(1, c.cand)
		if best != 1<<c.best || run != 16*c.best {
			t.Fatalf("of %b: best %b with %d tokens, want replica %d with %d", c.cand, best, run, c.best, 16*c.best)
		}
	}
	// Ties: every replica holding the longest run is returned; none holding anything returns them all.
	x.Apply("r40:1", 2, []Event{{Kind: AllBlocksCleared}})
	x.Apply("r39:1", 2, []Event{stored(1<<40, 0, prompt[:16*39])}) // the same blocks again: a duplicate
	if best, run, _, _, _, _ := x.Most(1, 1<<40|1<<39|1<<38); best != 1<<39 || run != 16*39 {
		t.Fatalf("best %b with %d tokens, want replica 39 with %d", best, run, 16*39)
	}
	if best, run, _, _, _, _ := x.Most(1, 1<<40|1); best != 1<<40|1 || run != 0 {
		t.Fatalf("none holding: best %b with %d tokens, want both with 0", best, run)
	}
}

func TestMostDoesNotAllocate(t *testing.T) {
	x := New(16)
	prompt := tokens(0, 16*400)
	x.Remember(1, "", prompt, 0)
	for s := 0; s < 16; s++ {
		addr := fmt.Sprintf("r%d:1", s)
		x.Slot(addr)
		x.Apply(addr, 1, []Event{stored(uint64(s)<<32, 0, prompt[:16*(s*25)])})
	}
	if n := testing.AllocsPerRun(100, func() { x.Most(1, 0xffff) }); n != 0 {
		t.Fatalf("Most allocated %v times", n)
	}
}

func BenchmarkMost16(b *testing.B) {
	x := New(16)
	prompt := tokens(0, 16*430) // a 27 KB agent turn, about 6,900 tokens
	x.Remember(1, "", prompt, 0)
	for s := 0; s < 16; s++ {
		addr := fmt.Sprintf("r%d:1", s)
		x.Slot(addr)
		x.Apply(addr, 1, []Event{stored(uint64(s)<<32, 0, prompt[:16*(s*27)])})
	}
	b.ReportAllocs()
	for b.Loop() {
		x.Most(1, 0xffff)
	}
}

// batch encodes events as the simulator publishes them: vLLM's array form.
func batch(t *testing.T, events ...any) []byte {
	t.Helper()
	raws := make([]msgpack.RawMessage, len(events))
	for i, e := range events {
		b, err := msgpack.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		raws[i] = b
	}
	b, err := msgpack.Marshal([]any{1.5, raws, 0})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seqFrame(n uint64) []byte {
	return []byte{byte(n >> 56), byte(n >> 48), byte(n >> 40), byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

// TestSubscribeOverZMQ publishes batches the way llm-d-inference-sim does (a PUB socket that connects
// to svc's bound SUB; topic kv@host:port@model, an 8-byte sequence, msgpack in vLLM's array form for
// stored and its map form for removed) and polls until the index holds them.
func TestSubscribeOverZMQ(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "tcp://" + ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x := New(16)
	a := x.Slot("127.0.0.1:8001")
	ready := make(chan struct{})
	go Subscribe(ctx, endpoint, false, x, slog.New(slog.NewTextHandler(io.Discard, nil)), ready)
	<-ready
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	prompt := tokens(0, 48)
	x.Remember(3, "", prompt, 0)
	store := []any{"BlockStored", []any{uint64(11), uint64(12), uint64(13)}, uint64(0), prompt, 16, nil, "GPU", nil}
	remove := map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(13)}, "medium": "GPU"}
	topic := []byte("kv@127.0.0.1:8001@meta-llama/Llama-3.1-8B-Instruct")
	// A SUB learns its subscription's peers asynchronously: publish until the first batch lands.
	deadline := time.Now().Add(10 * time.Second)
	for x.StateOf(a).Batches == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no batch reached the index in 10 s")
		}
		if err := pub.Send(zmq4.NewMsgFrom(topic, seqFrame(1), batch(t, store))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := pub.Send(zmq4.NewMsgFrom(topic, seqFrame(2), batch(t, remove))); err != nil {
		t.Fatal(err)
	}
	for x.StateOf(a).Removed == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the removal did not reach the index in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lead, _, _ := x.Predict(3, a); lead != 32 {
		t.Fatalf("predicted %d cached tokens, want 32 (3 blocks stored, the last removed)", lead)
	}
	if st := x.StateOf(a); st.State != Exact || st.Gaps != 0 {
		t.Fatalf("state %+v, want exact with no gap", st)
	}
}

// TestSimulatorHolesAreRepaired: llm-d-inference-sim evicts a finished prompt's blocks in any order and,
// when the prompt comes again, stores the missing middle blocks and the new tail in one event whose
// parent is the last block it still had. A block whose tokens sit in a known prompt is that prompt's;
// the tail chains on from the parent. Without the repair the middle block and every block after it in
// the event were indexed under wrong hashes (the proof on the simulator predicted 352 cached tokens
// where it reported 832).
func TestSimulatorHolesAreRepaired(t *testing.T) {
	x := New(16)
	a := x.Slot("a:1")
	prompt := tokens(0, 16*8)
	x.Remember(1, "", prompt[:16*6], 0) // the last turn: 6 blocks
	x.Apply("a:1", 1, []Event{stored(100, 0, prompt[:16*6])})
	x.Apply("a:1", 2, []Event{{Kind: BlockRemoved, Hashes: []uint64{102}}})
	// The next turn: block 2 again (new engine hash 202, same tokens), then blocks 6 and 7, under 105.
	toks := append(append([]uint32{}, prompt[32:48]...), prompt[96:128]...)
	x.Apply("a:1", 3, []Event{{Kind: BlockStored, Hashes: []uint64{202, 106, 107}, Parent: 105, HasParent: true, Tokens: toks, BlockSize: 16}})
	if lead, res, _ := x.Predict(1, a); lead != 96 || res != 96 {
		t.Fatalf("leading %d, resident %d; want 96 and 96", lead, res)
	}
	x.Remember(1, "", prompt, 0)
	if lead, _, _ := x.Predict(1, a); lead != 128 {
		t.Fatalf("the tail after the repaired block: leading %d, want 128", lead)
	}
}

// TestFollowConnectsToEachReplica: vLLM's publisher binds (tcp://*:5557) and svc connects to each
// replica's host at that port (Follow); a replica's batches reach the index under that replica, with
// vLLM's default topic ("").
func TestFollowConnectsToEachReplica(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Listen(fmt.Sprintf("tcp://127.0.0.1:%d", port)); err != nil {
		t.Fatal(err)
	}
	x := New(16)
	a := x.Slot("127.0.0.1:8000")
	go Follow(ctx, x, port, func() []string { return []string{"127.0.0.1:8000"} }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	store := []any{"BlockStored", []any{uint64(11)}, nil, tokens(0, 16), 16, nil, "GPU", nil}
	deadline := time.Now().Add(10 * time.Second)
	for x.StateOf(a).Stored == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no batch reached the index in 10 s")
		}
		if err := pub.Send(zmq4.NewMsgFrom([]byte(""), seqFrame(1), batch(t, store))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
