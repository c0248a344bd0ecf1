package fleet

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// agentTurn is the prompt of turn t of an agent session: a system prompt and tools every session shares
// (about 4 KiB, 16 blocks), the session's first message, then t turns of tool calls and results.
func agentTurn(session, t int) (string, []byte) {
	var b strings.Builder
	b.WriteString(strings.Repeat("You are a coding agent. Tools: read_file, write_file, run_tests, grep. ", 60))
	first := fmt.Sprintf("Fix the failing test in package p%d, then explain the change.", session)
	b.WriteString(first)
	for i := range t {
		fmt.Fprintf(&b, " [turn %d: called read_file, got %s]", i, strings.Repeat(fmt.Sprint("line ", session, i, " "), 40))
	}
	return first, []byte(b.String())
}

// Two edges, each with its own picker and no state shared, get the turns of 12 agent sessions in turn
// (a balancer alternating), each round's calls in flight together in a different order on each edge,
// and each edge with its own other calls in flight (none to 3 on one, 2 to 5 on the other): at least
// 95% of the turns land where the session's turn before went, through either edge, and every replica
// takes sessions. 96-108 of 108 measured (100% in 3 runs of 6); placing a session the edge had not
// seen on its least loaded replica (the picker before issue 43) kept 10-67 of 108.
func TestTwoPickersPlaceEachSessionAlike(t *testing.T) {
	const replicas, sessions, turns = 4, 12, 10
	for seed := range uint64(3) {
		edges := [2]*Fleet{newFleet(t, Config{}, replicas), newFleet(t, Config{}, replicas)}
		rng := rand.New(rand.NewPCG(seed, 1))
		previous := map[int]string{}
		stayed, total := 0, 0
		used := map[string]bool{}
		for turn := range turns {
			var inflight [2][]Pick
			for e, f := range edges { // other calls on each edge, a different number on each
				for i := range e*2 + rng.IntN(4) {
					inflight[e] = append(inflight[e], mustPick(t, f, Request{Blocks: blocks("", []byte(fmt.Sprint("other call ", turn, e, i, strings.Repeat(" x", 400))))}))
				}
			}
			for _, s := range rng.Perm(sessions) {
				e := (s + turn) % 2
				first, p := agentTurn(s, turn)
				pk := mustPick(t, edges[e], Request{Blocks: blocks("", p), Session: SessionKey("", first)})
				inflight[e] = append(inflight[e], pk)
				if turn > 0 {
					total++
					if pk.Replica.Addr == previous[s] {
						stayed++
					}
				}
				previous[s] = pk.Replica.Addr
				used[pk.Replica.Addr] = true
			}
			for e, f := range edges {
				for _, pk := range inflight[e] {
					f.Done(pk, OK)
				}
			}
		}
		t.Logf("seed %d: %d of %d later turns where the session's turn before went", seed, stayed, total)
		if float64(stayed) < 0.95*float64(total) {
			t.Errorf("seed %d: %d of %d later turns where the session's turn before went, want 95%%", seed, stayed, total)
		}
		if len(used) != replicas {
			t.Errorf("seed %d: the sessions reached %d of %d replicas", seed, len(used), replicas)
		}
	}
}
