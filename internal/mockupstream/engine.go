package mockupstream

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Engine is the mock upstream as one vLLM replica's engine, for fleet tests and benchmarks (it was
// package fakevllm; one fake upstream now): a prefix cache over hashed token blocks with LRU eviction,
// prefill time per uncached token, --max-num-seqs and --max-loras, vLLM's metric names and failure
// injection, on the OpenAI chat wire format, with vLLM's error shape (vllmError) and its LoRA API.
// Server is the wire-format mock (tool calls, reasoning, Messages, Responses); Engine the replica whose
// timing the fleet's routing is judged by.

// Tokens and blocks: the fake counts a token per bytesPerToken bytes of the prompt text and caches
// blocks of blockTokens tokens, as vLLM caches 16-token blocks.
const (
	bytesPerToken = 4
	blockTokens   = 16
)

// EngineConfig is a replica's engine settings, named after vLLM's flags.
type EngineConfig struct {
	Model       string // the served model name (default "fake-model")
	MaxNumSeqs  int    // --max-num-seqs: requests running at once (default 8); the rest wait
	MaxLoras    int    // --max-loras: adapters running at once (default 1)
	CacheBlocks int    // prefix cache size in blocks (default 4096)
	// PrefillTime is the time per uncached prompt token (default 20 µs) on the replica's one GPU:
	// prefill is compute-bound, so the replica prefills its requests' uncached tokens one request after
	// the other, in arrival order (vLLM batches them under a token budget per step; N tokens take
	// about as long either way), while decoding (ITL) runs alongside, batched.
	PrefillTime time.Duration
	TTFTBase    time.Duration // added to every first token
	ITL         time.Duration // between two output tokens
	Tokens      int           // output tokens of each answer (default 4)
	// Ideal, when set, is told every prompt this replica serves: replicas sharing one count what a
	// single unbounded cache over the whole fleet would have held (the ideal routing is judged by).
	Ideal *Ideal

	// LoraLoadTime is the time to bring an adapter into one of the --max-loras GPU slots when it is
	// not there already: vLLM copies its weights from CPU memory into the slot, and the step that needs
	// it waits, so the GPU is booked for it like a prefill. A slot keeps its adapter after its calls end
	// until another adapter needs it (the least recently used goes), as vLLM's GPU slots do. 0: free.
	LoraLoadTime time.Duration
	// AdapterLoadTime is how long POST /v1/load_lora_adapter takes before it answers (vLLM reads the
	// adapter's weights from disk, or downloads them, first); the adapter is not served until then. 0:
	// at once.
	AdapterLoadTime time.Duration

	// Trace, when set, is told how each call that reached its first token spent the time until then.
	Trace func(CallTrace)
}

// CallTrace is where one call's time to its first token went on the replica.
type CallTrace struct {
	Adapter string
	Prompt  string    // the prompt as the engine saw it
	Arrived time.Time // when the request reached the replica
	// SeqWait is the time waiting for a sequence slot (--max-num-seqs), SlotWait for the adapter to
	// get one of the --max-loras slots while a sequence slot was free.
	SeqWait, SlotWait time.Duration
	// GPUWait is the time behind other calls' prefills and adapter loads, Load this call's own adapter
	// load (LoraLoadTime when it brought its adapter into a slot), Prefill its own uncached tokens.
	GPUWait, Load, Prefill time.Duration
	Cached, Tokens         int // prompt tokens found in the prefix cache, of the prompt's
}

// Ideal counts the prompt tokens that were cacheable: those of each prompt's longest prefix (in whole
// blocks, as the replicas count them) that any earlier prompt of the fleet began with. Safe for
// concurrent use.
type Ideal struct {
	mu     sync.Mutex
	seen   map[uint64]bool
	cached atomic.Int64
}

// NewIdeal returns an empty ideal cache.
func NewIdeal() *Ideal { return &Ideal{seen: map[uint64]bool{}} }

// CachedTokens returns the prompt tokens the ideal cache held, over every prompt so far.
func (i *Ideal) CachedTokens() int64 { return i.cached.Load() }

func (i *Ideal) observe(adapter, prompt string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	cached, hit := 0, true
	eachBlock(adapter, prompt, func(key uint64) {
		if i.seen[key] {
			if hit {
				cached += blockTokens
			}
			return
		}
		hit = false
		i.seen[key] = true
	})
	i.cached.Add(int64(cached))
}

// eachBlock calls fn with the chain hash of each full block of prompt, in order: equal keys mean equal
// prompts (and adapters) up to the end of that block.
func eachBlock(adapter, prompt string, fn func(key uint64)) {
	h := fnv.New64a()
	h.Write([]byte(adapter))
	blockBytes := blockTokens * bytesPerToken
	for off := 0; off+blockBytes <= len(prompt); off += blockBytes {
		h.Write([]byte(prompt[off : off+blockBytes])) // the running hash chains the blocks
		fn(h.Sum64())
	}
}

// Engine is one fake replica, an http.Handler.
type Engine struct {
	cfg EngineConfig

	mu       sync.Mutex
	cond     *sync.Cond
	running  int
	waiting  int
	active   map[string]int // adapter -> running requests
	wanted   map[string]int // adapter -> waiting requests
	loaded   map[string]bool
	slots    []string // the adapters in GPU slots, the most recently used first
	loraTime float64
	gpuFree  time.Time // when the prefills under way end
	cache    map[uint64]*list.Element
	lru      *list.List

	// FailStatus, when set, answers every chat request with that status before any byte of an answer.
	FailStatus atomic.Int32

	Requests     atomic.Int64
	PromptTokens atomic.Int64
	CachedTokens atomic.Int64
	// SlotWaits counts the requests that waited for their adapter to get a slot (--max-loras) while
	// a sequence slot was free, and SlotWaitTime sums how long.
	SlotWaits    atomic.Int64
	SlotWaitTime atomic.Int64 // nanoseconds
	// LoraLoads counts the adapters brought into a GPU slot (each costing LoraLoadTime).
	LoraLoads atomic.Int64
	// Missing counts the calls answered 404 for an adapter not loaded here (or still loading).
	Missing atomic.Int64
	// PeakAdapters is the most adapters that ran at once (never above MaxLoras).
	PeakAdapters atomic.Int64
}

// NewEngine returns a replica with cfg, its defaults filled in.
func NewEngine(cfg EngineConfig) *Engine {
	if cfg.Model == "" {
		cfg.Model = "fake-model"
	}
	if cfg.MaxNumSeqs <= 0 {
		cfg.MaxNumSeqs = 8
	}
	if cfg.MaxLoras <= 0 {
		cfg.MaxLoras = 1
	}
	if cfg.CacheBlocks <= 0 {
		cfg.CacheBlocks = 4096
	}
	if cfg.PrefillTime == 0 {
		cfg.PrefillTime = 20 * time.Microsecond
	}
	if cfg.Tokens <= 0 {
		cfg.Tokens = 4
	}
	s := &Engine{cfg: cfg, active: map[string]int{}, wanted: map[string]int{}, loaded: map[string]bool{},
		cache: map[uint64]*list.Element{}, lru: list.New()}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == "/metrics" && r.Method == http.MethodGet:
		s.metrics(w)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		s.models(w)
	case r.URL.Path == "/v1/load_lora_adapter" && r.Method == http.MethodPost:
		s.loadAdapter(w, r)
	case r.URL.Path == "/v1/unload_lora_adapter" && r.Method == http.MethodPost:
		s.unloadAdapter(w, r)
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	default:
		vllmError(w, http.StatusNotFound, "NotFoundError", "not found: "+r.URL.Path)
	}
}

func (s *Engine) loadAdapter(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"lora_name"`
		Path string `json:"lora_path"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" || body.Path == "" {
		vllmError(w, http.StatusBadRequest, "BadRequestError", "lora_name and lora_path are required")
		return
	}
	if !sleep(r, s.cfg.AdapterLoadTime) {
		return
	}
	s.mu.Lock()
	s.loaded[body.Name] = true
	s.mu.Unlock()
	fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", body.Name)
}

// unloadAdapter is vLLM's POST /v1/unload_lora_adapter {lora_name}: the adapter is no longer served,
// and leaves its GPU slot unless a call of it is running.
func (s *Engine) unloadAdapter(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"lora_name"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Name == "" {
		vllmError(w, http.StatusBadRequest, "BadRequestError", "lora_name is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded[body.Name] {
		vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", body.Name))
		return
	}
	delete(s.loaded, body.Name)
	if i := slices.Index(s.slots, body.Name); i >= 0 && s.active[body.Name] == 0 {
		s.slots = slices.Delete(s.slots, i, i+1)
	}
	fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", body.Name)
}

// models lists the base model and the adapters loaded, as vLLM's GET /v1/models does (an adapter's
// parent is the base model).
func (s *Engine) models(w http.ResponseWriter) {
	s.mu.Lock()
	names := make([]string, 0, len(s.loaded))
	for a := range s.loaded {
		names = append(names, a)
	}
	s.mu.Unlock()
	sort.Strings(names)
	data := []any{map[string]any{"id": s.cfg.Model, "object": "model", "owned_by": "vllm", "root": s.cfg.Model, "parent": nil}}
	for _, a := range names {
		data = append(data, map[string]any{"id": a, "object": "model", "owned_by": "vllm", "root": a, "parent": s.cfg.Model})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

type engineRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
	// MaxTokens caps the answer's length below Config.Tokens, as vLLM's max_tokens does.
	MaxTokens     int `json:"max_tokens"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// promptText is the prompt as the engine sees it: each message's role and content in order.
func (c *engineRequest) promptText() string {
	var b strings.Builder
	for _, m := range c.Messages {
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.Write(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *Engine) chat(w http.ResponseWriter, r *http.Request) {
	var req engineRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		vllmError(w, http.StatusBadRequest, "BadRequestError", "a body with messages is required")
		return
	}
	if st := s.FailStatus.Load(); st != 0 {
		vllmError(w, int(st), "InternalServerError", "injected failure")
		return
	}
	adapter := ""
	if req.Model != s.cfg.Model {
		s.mu.Lock()
		ok := s.loaded[req.Model]
		s.mu.Unlock()
		if !ok {
			s.Missing.Add(1)
			vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
			return
		}
		adapter = req.Model
	}
	arrived := time.Now()
	ok, slotWait, loaded := s.acquire(r.Context(), adapter)
	if !ok {
		return
	}
	admitted := time.Now()
	defer s.release(adapter)
	prompt := req.promptText()
	promptTokens := (len(prompt) + bytesPerToken - 1) / bytesPerToken
	cached := s.lookupAndInsert(adapter, prompt)
	if s.cfg.Ideal != nil {
		s.cfg.Ideal.observe(adapter, prompt)
	}
	s.Requests.Add(1)
	s.PromptTokens.Add(int64(promptTokens))
	s.CachedTokens.Add(int64(cached))
	gpuWait, own := s.prefill(promptTokens - cached)
	if s.cfg.Trace != nil {
		var load time.Duration
		if loaded {
			load = min(s.cfg.LoraLoadTime, gpuWait) // booked just before this call's prefill
		}
		s.cfg.Trace(CallTrace{Adapter: adapter, Prompt: prompt, Arrived: arrived, SeqWait: admitted.Sub(arrived) - slotWait,
			SlotWait: slotWait, GPUWait: gpuWait - load, Load: load, Prefill: own, Cached: cached, Tokens: promptTokens})
	}
	tokens := s.cfg.Tokens
	if req.MaxTokens > 0 && req.MaxTokens < tokens {
		tokens = req.MaxTokens
	}
	if !sleep(r, s.cfg.TTFTBase+gpuWait+own) {
		return
	}
	usage := map[string]any{"prompt_tokens": promptTokens, "completion_tokens": tokens,
		"total_tokens": promptTokens + tokens, "prompt_tokens_details": map[string]any{"cached_tokens": cached}}
	id := fmt.Sprintf("chatcmpl-%d", s.Requests.Load())
	created := time.Now().Unix()
	if !req.Stream {
		for i := 1; i < tokens; i++ {
			if !sleep(r, s.cfg.ITL) {
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": strings.Repeat("tok ", tokens)},
				"finish_reason": "length"}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any, u any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{}}
		if delta != nil {
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		}
		if u != nil {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	for i := 0; i < tokens; i++ {
		if i > 0 && !sleep(r, s.cfg.ITL) {
			return
		}
		var finish any
		if i == tokens-1 {
			finish = "length"
		}
		chunk(map[string]any{"content": "tok "}, finish, nil)
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		chunk(nil, nil, usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// prefill books the GPU for tokens' prefill after the prefills (and adapter loads) booked before, and
// returns how long from now it waits for them and then prefills.
func (s *Engine) prefill(tokens int) (wait, own time.Duration) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.gpuFree
	if start.Before(now) {
		start = now
	}
	own = time.Duration(tokens) * s.cfg.PrefillTime
	s.gpuFree = start.Add(own)
	return start.Sub(now), own
}

// acquire waits for a sequence slot and, for an adapter, for it to run or for a free adapter slot. It
// returns false when ctx ended first, how long the adapter waited for a slot while a sequence slot was
// free, and whether it brought the adapter into a GPU slot.
func (s *Engine) acquire(ctx context.Context, adapter string) (ok bool, slotWait time.Duration, loaded bool) {
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	if adapter != "" {
		s.wanted[adapter]++
	}
	defer func() {
		s.waiting--
		if adapter != "" {
			if s.wanted[adapter]--; s.wanted[adapter] == 0 {
				delete(s.wanted, adapter)
			}
		}
	}()
	var slotSince time.Time // when a sequence slot was free but the adapter had none
	for !(s.running < s.cfg.MaxNumSeqs && (adapter == "" || s.active[adapter] > 0 || len(s.active) < s.cfg.MaxLoras)) {
		if ctx.Err() != nil {
			return false, 0, false
		}
		if s.running < s.cfg.MaxNumSeqs && slotSince.IsZero() {
			slotSince = time.Now()
		}
		s.cond.Wait()
	}
	if !slotSince.IsZero() {
		slotWait = time.Since(slotSince)
		s.SlotWaits.Add(1)
		s.SlotWaitTime.Add(int64(slotWait))
	}
	s.running++
	if adapter != "" {
		if s.active[adapter] == 0 {
			s.loraTime = float64(time.Now().UnixNano()) / 1e9
		}
		s.active[adapter]++
		if n := int64(len(s.active)); n > s.PeakAdapters.Load() {
			s.PeakAdapters.Store(n)
		}
		loaded = s.useSlot(adapter)
	}
	return true, slotWait, loaded
}

// useSlot puts adapter first among the GPU slots. One not there takes the slot of the least recently
// used adapter that no running call needs (there is one: fewer than --max-loras adapters were running
// before it) and books the GPU for LoraLoadTime; loaded says so. Called with s.mu held.
func (s *Engine) useSlot(adapter string) (loaded bool) {
	if i := slices.Index(s.slots, adapter); i >= 0 {
		copy(s.slots[1:i+1], s.slots[:i])
		s.slots[0] = adapter
		return false
	}
	if len(s.slots) == s.cfg.MaxLoras {
		for i := len(s.slots) - 1; i >= 0; i-- {
			if s.active[s.slots[i]] == 0 {
				s.slots = slices.Delete(s.slots, i, i+1)
				break
			}
		}
	}
	s.slots = slices.Insert(s.slots, 0, adapter)
	s.LoraLoads.Add(1)
	if s.cfg.LoraLoadTime > 0 {
		if now := time.Now(); s.gpuFree.Before(now) {
			s.gpuFree = now
		}
		s.gpuFree = s.gpuFree.Add(s.cfg.LoraLoadTime)
	}
	return true
}

func (s *Engine) release(adapter string) {
	s.mu.Lock()
	s.running--
	if adapter != "" {
		if s.active[adapter]--; s.active[adapter] == 0 {
			delete(s.active, adapter)
			s.loraTime = float64(time.Now().UnixNano()) / 1e9
		}
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// lookupAndInsert returns how many of the prompt's tokens the cache holds (whole blocks from the
// start, as vLLM's automatic prefix caching counts them) and caches every full block of it.
func (s *Engine) lookupAndInsert(adapter, prompt string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	cached, hit := 0, true
	eachBlock(adapter, prompt, func(key uint64) {
		if e, ok := s.cache[key]; ok {
			s.lru.MoveToFront(e)
			if hit {
				cached += blockTokens
			}
			return
		}
		hit = false
		s.cache[key] = s.lru.PushFront(key)
		for s.lru.Len() > s.cfg.CacheBlocks {
			old := s.lru.Back()
			s.lru.Remove(old)
			delete(s.cache, old.Value.(uint64))
		}
	})
	return cached
}

// metrics writes vLLM's load gauges and prefix cache counters in the Prometheus text format.
func (s *Engine) metrics(w http.ResponseWriter) {
	s.mu.Lock()
	running := make([]string, 0, len(s.active))
	for a := range s.active {
		running = append(running, a)
	}
	waitingA := make([]string, 0, len(s.wanted))
	for a := range s.wanted {
		if s.active[a] == 0 {
			waitingA = append(waitingA, a)
		}
	}
	run, wait, lt := s.running, s.waiting, s.loraTime
	s.mu.Unlock()
	sort.Strings(running)
	sort.Strings(waitingA)
	m := s.cfg.Model
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=%q} %d\n", m, run)
	fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=%q} %d\n", m, wait)
	fmt.Fprintf(w, "# TYPE vllm:lora_requests_info gauge\nvllm:lora_requests_info{max_lora=\"%d\",running_lora_adapters=%q,waiting_lora_adapters=%q} %f\n",
		s.cfg.MaxLoras, strings.Join(running, ","), strings.Join(waitingA, ","), lt)
	fmt.Fprintf(w, "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{model_name=%q} %d\n", m, s.PromptTokens.Load())
	fmt.Fprintf(w, "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{model_name=%q} %d\n", m, s.CachedTokens.Load())
	fmt.Fprintf(w, "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total{model_name=%q} %d\n", m, s.PromptTokens.Load())
}
