package inference

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/fleet"
	"github.com/svcdev/svc/internal/mockupstream"
)

// Two edges (two registries, each with its own picker over the same four fake replicas) and a balancer
// sending each session's turns to them in turn: 8 agent sessions of 8 turns run at once, and a session's
// turns land on one replica through either edge, so the replicas find cached about what one unbounded
// cache over the fleet would have held (at least 0.93 of it under load; 0.95-0.98 and 0-4 of 56 turns
// moved on a quiet machine, measured). Before issue 43 an edge placed a session it had not seen on its
// least loaded replica: 28-56 of the 56 turns moved, and the replicas cached 0.88-0.92 of the ideal.
//
// The sessions are chosen two to a home (balancedSessions): the replicas' rendezvous seeds come from
// their loopback ports, and with 8 names taken as they come a run could home 4 sessions on one
// replica, whose turns then rightly spilled past the load bound as calls overlapped on a loaded
// machine (10-20 of 56 moved under -race beside CPU hogs, every move following a load pick, none a
// disagreement; CI failed so once). The test is about the edges agreeing, not about the bound.
func TestTwoEdgesKeepEachSessionOnOneReplica(t *testing.T) {
	ideal := mockupstream.NewIdeal()
	var fakes []*mockupstream.Engine
	var srvs []*httptest.Server
	for range 4 {
		f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: 2 * time.Microsecond, Ideal: ideal, CacheBlocks: 100000})
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		fakes, srvs = append(fakes, f), append(srvs, s)
	}
	edges := [2]*Registry{fleetRegistry(t, srvs), fleetRegistry(t, srvs)}
	const sessions, turns = 8, 8
	names := balancedSessions(t, srvs, sessions)
	var mu sync.Mutex
	moved, later := 0, 0
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			previous := ""
			for turn := range turns {
				c := fleetCall(names[s], turn+1, turn%2 == 0)
				if err := run(t, edges[(s+turn)%2], c); err != nil {
					t.Errorf("session %d turn %d: %v", s, turn, err)
					return
				}
				mu.Lock()
				if turn > 0 {
					later++
					if c.Replica != previous {
						moved++
					}
				}
				mu.Unlock()
				previous = c.Replica
			}
		})
	}
	wg.Wait()
	var cached int64
	for _, f := range fakes {
		cached += f.CachedTokens.Load()
	}
	share := float64(cached) / float64(ideal.CachedTokens())
	t.Logf("%d of %d later turns moved; cached %d tokens, %.2f of the ideal's %d", moved, later, cached, share, ideal.CachedTokens())
	// Bounds with room for a loaded machine (quiet: 0-4 moved, 0.95-0.98 cached; under -race beside
	// six CPU hogs on two cores, 140 runs: 0-8 moved, each move one turn away for load and the next
	// back, 0.95-0.98 cached), well clear of the picker before (28-56 moved, 0.88-0.92).
	if moved > later*20/100 {
		t.Errorf("%d of %d later turns moved to another replica, want at most 20%%", moved, later)
	}
	if share < 0.93 {
		t.Errorf("the replicas cached %.2f of what the ideal did, want 0.93", share)
	}
}

// balancedSessions returns n session names (for fleetCall) whose homes, the replicas their
// conversations are placed on by rendezvous hashing, are spread evenly over srvs: each name's home is
// what a fresh picker over the same replicas chooses for its second turn.
func balancedSessions(t *testing.T, srvs []*httptest.Server, n int) []string {
	t.Helper()
	var urls []string
	for _, s := range srvs {
		urls = append(urls, s.URL+"/v1")
	}
	f, err := fleet.New(fleet.Config{Mode: fleet.Affinity}, urls)
	if err != nil {
		t.Fatal(err)
	}
	per := make(map[string]int)
	var names []string
	for i := 0; len(names) < n && i < 1000; i++ {
		name := fmt.Sprint("session ", i)
		key, _ := sessionKey(fleetCall(name, 2, false))
		pk, err := f.Pick(fleet.Request{Session: key})
		if err != nil {
			t.Fatal(err)
		}
		f.Done(pk, fleet.OK)
		if home := pk.Replica.Addr; per[home] < (n+len(srvs)-1)/len(srvs) {
			per[home]++
			names = append(names, name)
		}
	}
	if len(names) < n {
		t.Fatalf("found %d of %d sessions spread over the replicas", len(names), n)
	}
	return names
}
