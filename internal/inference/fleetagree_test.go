package inference

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/mockupstream"
)

// Two edges (two registries, each with its own picker over the same four fake replicas) and a balancer
// sending each session's turns to them in turn: 8 agent sessions of 8 turns run at once, and a session's
// turns land on one replica through either edge, so the replicas find cached about what one unbounded
// cache over the fleet would have held (at least 0.93 of it under load; 0.95-0.98 and 0-4 of 56 turns moved on a quiet machine,
// measured). Before issue 43 an edge placed a session it had not seen on its least loaded replica:
// 28-56 of the 56 turns moved, and the replicas cached 0.88-0.92 of the ideal.
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
	var mu sync.Mutex
	moved, later := 0, 0
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			previous := ""
			for turn := range turns {
				c := fleetCall(fmt.Sprint("session ", s), turn+1, turn%2 == 0)
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
	// Bounds with room for a loaded machine (quiet: 0-4 moved, 0.95-0.98 cached; with other tests
	// running up to 8 and 0.94), well clear of the picker before (28-56 moved, 0.88-0.92).
	if moved > later*15/100 {
		t.Errorf("%d of %d later turns moved to another replica, want at most 15%%", moved, later)
	}
	if share < 0.93 {
		t.Errorf("the replicas cached %.2f of what the ideal did, want 0.93", share)
	}
}
