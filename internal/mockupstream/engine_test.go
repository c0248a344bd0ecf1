package mockupstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/fleet"
	"github.com/svcdev/svc/internal/poll"
)

func chatBody(model string, stream bool, msgs ...string) []byte {
	var ms []map[string]string
	for i, m := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		ms = append(ms, map[string]string{"role": role, "content": m})
	}
	b, _ := json.Marshal(map[string]any{"model": model, "messages": ms, "stream": stream,
		"stream_options": map[string]bool{"include_usage": true}})
	return b
}

type engineUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// enginePost sends a chat request and returns the status and the usage (read from the stream's last
// chunk when streamed).
func enginePost(t *testing.T, url string, body []byte) (int, engineUsage) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u engineUsage
	if resp.StatusCode != 200 {
		return resp.StatusCode, u
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		done := false
		for sc.Scan() {
			line := strings.TrimPrefix(sc.Text(), "data: ")
			if line == "[DONE]" {
				done = true
			} else if strings.Contains(line, `"usage"`) {
				var c struct{ Usage engineUsage }
				if err := json.Unmarshal([]byte(line), &c); err != nil {
					t.Fatal(err)
				}
				u = c.Usage
			}
		}
		if !done {
			t.Fatal("stream without data: [DONE]")
		}
		return 200, u
	}
	var a struct{ Usage engineUsage }
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return 200, a.Usage
}

var system = strings.Repeat("You are an agent with tools read, write and run. ", 30)

func TestPrefixCacheCountsCachedTokens(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			srv := httptest.NewServer(NewEngine(EngineConfig{CacheBlocks: 1000}))
			defer srv.Close()
			_, u1 := enginePost(t, srv.URL, chatBody("fake-model", stream, system+"first question"))
			if u1.PromptTokens == 0 || u1.PromptTokensDetails.CachedTokens != 0 {
				t.Fatalf("first request: %+v, want prompt tokens and nothing cached", u1)
			}
			_, u2 := enginePost(t, srv.URL, chatBody("fake-model", stream, system+"first question", "an answer", "next"))
			if c := u2.PromptTokensDetails.CachedTokens; c < u1.PromptTokens-2*blockTokens || c > u1.PromptTokens {
				t.Errorf("second turn cached %d of %d tokens, want about the first turn's %d", c, u2.PromptTokens, u1.PromptTokens)
			}
		})
	}
}

func TestPrefixCacheEvictsLeastRecentlyUsed(t *testing.T) {
	srv := httptest.NewServer(NewEngine(EngineConfig{CacheBlocks: 20}))
	defer srv.Close()
	a := chatBody("fake-model", false, strings.Repeat("a", 16*4*15))
	b := chatBody("fake-model", false, strings.Repeat("b", 16*4*15))
	enginePost(t, srv.URL, a)
	enginePost(t, srv.URL, b) // 30 blocks in a cache of 20: a's are gone
	if _, u := enginePost(t, srv.URL, a); u.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("a evicted prompt still cached %d tokens", u.PromptTokensDetails.CachedTokens)
	}
}

func TestLorasSlotsQueueAndMetrics(t *testing.T) {
	s := NewEngine(EngineConfig{MaxLoras: 1, TTFTBase: 300 * time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if st, _ := enginePost(t, srv.URL, chatBody("ad1", false, "hi")); st != http.StatusNotFound {
		t.Fatalf("an adapter never loaded answered %d, want 404", st)
	}
	for _, a := range []string{"ad1", "ad2"} {
		resp, err := http.Post(srv.URL+"/v1/load_lora_adapter", "application/json",
			strings.NewReader(fmt.Sprintf(`{"lora_name":%q,"lora_path":"/a/%s"}`, a, a)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("load %s: %v %v", a, err, resp.Status)
		}
		resp.Body.Close()
	}
	var wg sync.WaitGroup
	start := time.Now()
	ends := make([]time.Duration, 2)
	for i, a := range []string{"ad1", "ad2"} {
		wg.Go(func() {
			if st, _ := enginePost(t, srv.URL, chatBody(a, false, "hi")); st != 200 {
				t.Errorf("%s: %d", a, st)
			}
			ends[i] = time.Since(start)
		})
		time.Sleep(50 * time.Millisecond) // on purpose: ad1's call arrives first and takes the slot
	}
	poll.Until(t, 5*time.Second, "metrics with one slot taken: 1 running (ad1), 1 waiting", func() bool {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		load, err := fleet.ParseMetrics(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return load.Running == 1 && load.Waiting == 1 && fmt.Sprint(load.Adapters) == "[ad1]"
	})
	wg.Wait()
	if ends[1] < 550*time.Millisecond {
		t.Errorf("the second adapter finished after %v: it did not wait for the one --max-loras slot", ends[1])
	}
	if p := s.PeakAdapters.Load(); p != 1 {
		t.Errorf("PeakAdapters %d, want 1 (one slot)", p)
	}
}

// TestLoraSlotsKeepTheirAdapter: an adapter brought into a GPU slot costs LoraLoadTime on the GPU once
// and stays there after its calls end, until another adapter needs the slot (the least recently used
// goes), as vLLM's --max-loras slots do.
func TestLoraSlotsKeepTheirAdapter(t *testing.T) {
	const load = 200 * time.Millisecond
	s := NewEngine(EngineConfig{MaxLoras: 2, LoraLoadTime: load})
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, a := range []string{"ad1", "ad2", "ad3"} {
		resp, err := http.Post(srv.URL+"/v1/load_lora_adapter", "application/json",
			strings.NewReader(fmt.Sprintf(`{"lora_name":%q,"lora_path":"/a/%s"}`, a, a)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("load %s: %v %v", a, err, resp.Status)
		}
		resp.Body.Close()
	}
	call := func(a string) time.Duration {
		t.Helper()
		start := time.Now()
		if st, _ := enginePost(t, srv.URL, chatBody(a, false, "hi")); st != 200 {
			t.Fatalf("%s: %d", a, st)
		}
		return time.Since(start)
	}
	for i, step := range []struct {
		adapter string
		loads   int64
	}{
		{"ad1", 1}, // into a free slot
		{"ad1", 1}, // still there after its call ended
		{"ad2", 2}, // the second slot
		{"ad1", 2},
		{"ad3", 3}, // takes ad2's slot: ad1 was used since
		{"ad1", 3},
		{"ad2", 4},
	} {
		took := call(step.adapter)
		loaded := s.LoraLoads.Load()
		if loaded != step.loads {
			t.Fatalf("step %d (%s): %d adapters brought into a slot, want %d", i, step.adapter, loaded, step.loads)
		}
		if i == 0 && took < load {
			t.Errorf("the first call of ad1 took %v: bringing it into a slot costs %v", took, load)
		}
	}
}

func TestFailureInjectionAndHealth(t *testing.T) {
	s := NewEngine(EngineConfig{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	s.FailStatus.Store(503)
	if st, _ := enginePost(t, srv.URL, chatBody("fake-model", true, "hi")); st != 503 {
		t.Errorf("injected failure answered %d", st)
	}
	resp, err := http.Get(srv.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
}

// TestAffinityBeatsRoundRobin routes agent sessions over 4 fake replicas with the fleet picker, once
// in each mode, and compares the prompt tokens the replicas found cached.
func TestAffinityBeatsRoundRobin(t *testing.T) {
	cached := map[fleet.Mode]float64{}
	for _, mode := range []fleet.Mode{fleet.RoundRobin, fleet.Affinity} {
		var urls []string
		var servers []*Engine
		for range 4 {
			s := NewEngine(EngineConfig{CacheBlocks: 100000, PrefillTime: time.Nanosecond})
			srv := httptest.NewServer(s)
			defer srv.Close()
			urls = append(urls, srv.URL+"/v1")
			servers = append(servers, s)
		}
		f, err := fleet.New(fleet.Config{Mode: mode}, urls)
		if err != nil {
			t.Fatal(err)
		}
		byURL := map[string]string{}
		for i, r := range f.Replicas() {
			byURL[r.URL] = urls[i]
		}
		var wg sync.WaitGroup
		for s := range 8 {
			wg.Go(func() {
				msgs := []string{system + fmt.Sprint("session ", s)}
				for turn := range 10 {
					body := chatBody("fake-model", false, msgs...)
					pk, err := f.Pick(fleet.Request{Blocks: fleet.AppendBlocks(nil, "", body)})
					if err != nil {
						t.Error(err)
						return
					}
					st, _ := enginePost(t, strings.TrimSuffix(pk.Replica.URL, "/v1"), body)
					f.Done(pk, fleet.OK)
					if st != 200 {
						t.Errorf("status %d", st)
					}
					msgs = append(msgs, "answer", fmt.Sprintf("turn %d: %s", turn, strings.Repeat("more context ", 40)))
				}
			})
		}
		wg.Wait()
		var c, p int64
		for _, s := range servers {
			c += s.CachedTokens.Load()
			p += s.PromptTokens.Load()
		}
		cached[mode] = float64(c) / float64(p)
	}
	// Round-robin finds the shared system prompt everywhere but a session's history on 1 replica in 4;
	// affinity finds both, so it prefills a fraction of round-robin's uncached tokens.
	uncachedRR, uncachedAff := 1-cached[fleet.RoundRobin], 1-cached[fleet.Affinity]
	t.Logf("cached share of prompt tokens: round-robin %.2f, affinity %.2f", cached[fleet.RoundRobin], cached[fleet.Affinity])
	if uncachedAff > 0.5*uncachedRR {
		t.Errorf("affinity left %.2f of prompt tokens uncached, round-robin %.2f: want at most half", uncachedAff, uncachedRR)
	}
}

// Replicas sharing one Ideal count what a single unbounded cache over the fleet would have held: a
// prompt that grows one seen on another replica is cacheable there, though that replica's own cache
// holds none of it.
func TestIdealCountsWhatTheFleetCouldHaveCached(t *testing.T) {
	ideal := NewIdeal()
	a, b := NewEngine(EngineConfig{Ideal: ideal, PrefillTime: time.Nanosecond}), NewEngine(EngineConfig{Ideal: ideal, PrefillTime: time.Nanosecond})
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	_, u1 := enginePost(t, sa.URL, chatBody("fake-model", false, system+"first question"))
	_, u2 := enginePost(t, sb.URL, chatBody("fake-model", false, system+"first question", "an answer", "next"))
	if u2.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("replica b cached %d tokens of a prompt it never saw", u2.PromptTokensDetails.CachedTokens)
	}
	if got := ideal.CachedTokens(); got < int64(u1.PromptTokens-2*blockTokens) || got > int64(u1.PromptTokens) {
		t.Errorf("the ideal cached %d tokens, want about the first prompt's %d", got, u1.PromptTokens)
	}
	if a.CachedTokens.Load()+b.CachedTokens.Load() != 0 {
		t.Errorf("the replicas cached %d tokens, want none", a.CachedTokens.Load()+b.CachedTokens.Load())
	}
}

// Prefill is compute-bound: two requests arriving together on one replica are prefilled one after the
// other, so the second waits for the first's prefill (decoding would run alongside).
func TestPrefillsTakeTurns(t *testing.T) {
	srv := httptest.NewServer(NewEngine(EngineConfig{PrefillTime: 200 * time.Microsecond, CacheBlocks: 1}))
	defer srv.Close()
	prompt := strings.Repeat("z", 4*1000) // 1,000 tokens: 200 ms of prefill each
	var wg sync.WaitGroup
	took := make([]time.Duration, 2)
	start := time.Now()
	for i := range took {
		wg.Go(func() {
			enginePost(t, srv.URL, chatBody("fake-model", false, fmt.Sprint(i)+prompt))
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	if last := max(took[0], took[1]); last < 400*time.Millisecond {
		t.Errorf("two 200 ms prefills together ended after %v, want 400 ms or more (one after the other)", last)
	}
}

// GET /v1/models lists the base model and the adapters loaded, as vLLM does: what svc's adapter pools
// read to find a replica that lacks one.
func TestModelsListsLoadedAdapters(t *testing.T) {
	srv := httptest.NewServer(NewEngine(EngineConfig{}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/load_lora_adapter", "application/json", strings.NewReader(`{"lora_name":"ad1","lora_path":"/a"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("load: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 2 || list.Data[0].ID != "fake-model" || list.Data[1].ID != "ad1" {
		t.Errorf("models: %+v %v, want fake-model and ad1", list, err)
	}
}

func TestMaxTokensShortensTheAnswer(t *testing.T) {
	ts := httptest.NewServer(NewEngine(EngineConfig{Tokens: 8, ITL: 20 * time.Millisecond}))
	defer ts.Close()
	for _, c := range []struct{ max, want int }{{0, 8}, {3, 3}, {50, 8}} {
		body, _ := json.Marshal(map[string]any{"model": "fake-model", "messages": []any{map[string]string{"role": "user", "content": "hi"}}, "max_tokens": c.max})
		start := time.Now()
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		took := time.Since(start)
		if a.Usage.CompletionTokens != c.want || took < time.Duration(c.want-1)*20*time.Millisecond {
			t.Errorf("max_tokens %d: %d tokens in %v, want %d tokens and their time", c.max, a.Usage.CompletionTokens, took, c.want)
		}
	}
}
