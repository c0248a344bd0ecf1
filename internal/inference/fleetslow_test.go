package inference

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/mockupstream"
)

// slowFleetRun sends 16 agent sessions of 8 turns at once through one edge over four fake replicas,
// the first of them slow when slow is set (4x the prefill time and 10x the time between tokens, issue
// 43's slow replica), and returns the calls the first answered, of all, and the mean time a session
// took.
func slowFleetRun(t *testing.T, slow bool) (first, all int64, took time.Duration) {
	var fakes []*mockupstream.Engine
	var srvs []*httptest.Server
	for i := range 4 {
		cfg := mockupstream.EngineConfig{Model: "fake-model", PrefillTime: 20 * time.Microsecond, ITL: 2 * time.Millisecond, Tokens: 6, CacheBlocks: 100000}
		if i == 0 && slow {
			cfg.PrefillTime, cfg.ITL = 4*cfg.PrefillTime, 10*cfg.ITL
		}
		f := mockupstream.NewEngine(cfg)
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		fakes, srvs = append(fakes, f), append(srvs, s)
	}
	reg := fleetRegistry(t, srvs)
	const sessions, turns = 16, 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	for s := range sessions {
		wg.Go(func() {
			start := time.Now()
			defer func() { mu.Lock(); took += time.Since(start) / sessions; mu.Unlock() }()
			for turn := range turns {
				if err := run(t, reg, fleetCall(fmt.Sprint("session ", s), turn+1, turn%2 == 0)); err != nil {
					t.Errorf("session %d turn %d: %v", s, turn, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, f := range fakes {
		all += f.Requests.Load()
	}
	return fakes[0].Requests.Load(), all, took
}

// One replica of four is slow: its calls stay in flight longer, so its pace (its calls' mean time
// against the fastest replica's) weighs the prefill queued there and what a call would prefill there,
// and the sessions placed there move once waiting costs more than prefilling their history again
// elsewhere. It answers at most 12% of the calls (2-8% measured; 9-24% before its pace counted).
func TestASlowReplicaTakesFewCalls(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's slowdown (a call takes 0.2 s) drowns the slow replica's 0.15 s")
	}
	_, _, equal := slowFleetRun(t, false)
	slow, all, took := slowFleetRun(t, true)
	t.Logf("the slow replica answered %d of %d calls (%.0f%%); a session took %v on average, %v on equal replicas", slow, all, 100*float64(slow)/float64(all), took, equal)
	if float64(slow) > 0.12*float64(all) {
		t.Errorf("the slow replica answered %d of %d calls, want at most 12%%", slow, all)
	}
	// The sessions' time against four equal replicas (1.1-1.4x on a quiet machine) is logged, not
	// judged: a time ratio moves with the machine's load (1.5-1.8x with other tests running), and speed
	// targets live in make bench (the fleet rows), not in unit tests.
}
