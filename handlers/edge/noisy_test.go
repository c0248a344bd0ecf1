package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// TestNoisyNeighbour is admission's promise over real HTTP on loopback (docs/OPERATIONS.md,
// "Admission"): against a replica that runs 16 sequences at once, key A floods with 80 calls at once
// (10× its fair half of the capacity) while key B sends 4 at a time. B's p95 latency stays within 1.2×
// of B alone, none of B's calls is refused, A's excess gets 429 model_busy with Retry-After, and
// nobody gets a 5xx. Bounded: about 3 s of B's calls alone, 3 s under the flood, 3 s alone again.
func TestNoisyNeighbour(t *testing.T) {
	const seqs, floodWorkers, steadyWorkers, steadyCalls = 16, 80, 4, 15
	f := httptest.NewServer(mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", MaxNumSeqs: seqs, PrefillTime: time.Microsecond,
		TTFTBase: 50 * time.Millisecond, ITL: 25 * time.Millisecond, Tokens: 16}))
	t.Cleanup(f.Close)
	e := newEnvWith(t, envOptions{models: `  - name: vllm-one
    runtime: openai
    upstreamUrl: ` + f.URL + `/v1
    upstreamModel: fake-model
    maxConcurrency: 16
    queueTimeoutMs: 1000
`})
	d, keyA := e.deploy("noisy", base("vllm-one"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionNone, 0)
	kb, err := e.srv.Service.IssueKey(context.Background(), e.pr, d.ID, "steady")
	if err != nil {
		t.Fatal(err)
	}
	keyB := kb.Plaintext

	addr := e.srv.Addr.String()
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// Answers of 4 to 16 tokens (the replica honours max_tokens), so that calls end at different times.
	call := func(key string, tokens int) (int, string, time.Duration) {
		body, _ := json.Marshal(chatBody("hello there", "max_tokens", tokens))
		req, _ := http.NewRequest("POST", "http://noisy."+e.srv.EndpointDomain+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", time.Since(start)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After"), time.Since(start)
	}
	// steady runs B's workers to the end and returns B's latencies; any answer but 200 fails the test.
	// B's calls have the same lengths alone and under the flood: its p95s compare like with like.
	lengths := rand.New(rand.NewPCG(1, 2))
	var bLengths [steadyWorkers][steadyCalls]int
	for w := range bLengths {
		for i := range bLengths[w] {
			bLengths[w][i] = 4 + lengths.IntN(13)
		}
	}
	steady := func() []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for w := range steadyWorkers {
			wg.Go(func() {
				for i := range steadyCalls {
					status, _, took := call(keyB, bLengths[w][i])
					if status != http.StatusOK {
						t.Errorf("B's call answered %d", status)
					}
					mu.Lock()
					lat = append(lat, took)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return lat
	}
	for range 4 {
		call(keyB, 8) // warm the connections
	}
	alone := steady()

	var stop atomic.Bool
	var ok, busy, badRetry, fivexx, other atomic.Int64
	var flood sync.WaitGroup
	for range floodWorkers {
		flood.Go(func() {
			for !stop.Load() {
				status, retry, _ := call(keyA, 4+rand.IntN(13))
				switch {
				case status == http.StatusOK:
					ok.Add(1)
				case status == http.StatusTooManyRequests:
					busy.Add(1)
					n, err := strconv.Atoi(retry)
					if err != nil || n < 1 {
						badRetry.Add(1)
						break
					}
					// As the OpenAI and Anthropic SDKs do; the flood's 80 calls at once go on regardless.
					for wait := time.Now().Add(time.Duration(n) * time.Second); !stop.Load() && time.Now().Before(wait); {
						time.Sleep(10 * time.Millisecond)
					}
				case status >= 500:
					fivexx.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	// B starts once A holds the model and has calls waiting.
	deadline := time.Now().Add(5 * time.Second)
	for busy.Load() == 0 {
		if time.Now().After(deadline) {
			stop.Store(true)
			flood.Wait()
			t.Fatalf("A's flood never saturated the model (%d answered)", ok.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	crowded := steady()
	stop.Store(true)
	flood.Wait()

	// B alone again, after the flood: the machine's own load drifts (other tests, other processes), and
	// the mean of the two is what B alone takes around the time of the flood.
	after := steady()
	pAlone, pCrowded := (p95(alone)+p95(after))/2, p95(crowded)
	ratio := float64(pCrowded) / float64(pAlone)
	t.Logf("B p95 alone %v (before %v, after %v), under A's flood %v (×%.2f); A: %d answered, %d model_busy, %d 5xx, %d other",
		pAlone, p95(alone), p95(after), pCrowded, ratio, ok.Load(), busy.Load(), fivexx.Load(), other.Load())
	if ratio > 1.2 {
		t.Errorf("B's p95 under A's flood is %.2f× B's alone (%v vs %v), want ≤ 1.2×", ratio, pCrowded, pAlone)
	}
	if fivexx.Load() != 0 || other.Load() != 0 {
		t.Errorf("A got %d 5xx and %d other answers; want only 200 and 429", fivexx.Load(), other.Load())
	}
	if busy.Load() == 0 || badRetry.Load() != 0 {
		t.Errorf("A's excess: %d model_busy, %d of them without a Retry-After of 1 s or more", busy.Load(), badRetry.Load())
	}
}

func p95(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*95+99)/100-1]
}
