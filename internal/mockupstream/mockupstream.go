// Package mockupstream is a fake OpenAI-compatible inference server (vLLM flavoured) for tests and the
// benchmark: real wire format, adjustable delays and failures, and a record of what it was asked.
package mockupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets the mock's behaviour. Change it through Server.Configure while requests are in flight.
type Config struct {
	// Model is the base model id the upstream serves (default "mock-model").
	Model string
	// APIKey, when set, is required as "Authorization: Bearer <APIKey>".
	APIKey string
	// Tokens is the number of completion tokens of each answer (default 8), capped by max_tokens.
	Tokens int
	// TTFT delays the first token (or the whole answer when not streaming, plus ITL per token).
	TTFT time.Duration
	// ITL is the delay between two streamed tokens.
	ITL time.Duration
	// CutAfter, when > 0, closes the connection abruptly after that many streamed content (or tool
	// call) chunks.
	CutAfter int
	// FailStatus and FailBody, when set, answer every chat request with that status and body, and with
	// FailHeaders (e.g. Retry-After).
	FailStatus  int
	FailBody    string
	FailHeaders map[string]string
	// ServeMessages makes the mock answer POST /v1/messages (the Anthropic wire format) itself.
	ServeMessages bool
	// StrictModels answers vLLM's 404 to a request naming neither Model nor a loaded adapter.
	StrictModels bool
	// EndDelay holds a streamed answer open that long after its last event ("data: [DONE]" or
	// message_stop), so that the end of the HTTP answer reaches the client apart from that event.
	EndDelay time.Duration
	// NoUsage answers without usage, streamed or not, as some OpenAI-compatible servers do (and any
	// that ignores stream_options), on chat and on Messages.
	NoUsage bool
	// Reasoning makes chat answers reason first, as vLLM with a reasoning parser does: the reasoning
	// in message.<Reasoning> (streamed as delta.<Reasoning>), "reasoning_content" or, as newer vLLM,
	// "reasoning". chat_template_kwargs.enable_thinking false turns it off, as Qwen3's template does.
	Reasoning string
	// ServeResponses makes the mock answer POST /v1/responses (the Responses wire format) itself, as
	// vLLM does.
	ServeResponses bool
	// ServeTokenize makes the mock answer vLLM's POST /tokenize (a word a token), reporting
	// MaxModelLen (default 8192).
	ServeTokenize bool
	MaxModelLen   int
}

// Request is what the mock saw of one chat, messages, responses or tokenize request.
type Request struct {
	Path          string
	Body          map[string]any
	Authorization string
	// Cancelled is closed if the request's context ended before the mock finished answering.
	Cancelled chan struct{}
	Done      chan struct{}

	raw []byte // the body as sent, for what Body's maps lose (the order of a schema's properties)
}

// Server is the mock upstream's http.Handler.
type Server struct {
	mu       sync.Mutex
	cfg      Config
	adapters map[string]string // name -> path
	requests []*Request
	loads    []map[string]string

	chatCount atomic.Int64
	respCount atomic.Int64 // responses answered
	idCount   atomic.Int64 // request ids handed out
	callCount atomic.Int64 // tool call ids handed out
	keepLog   bool
}

// New returns a mock with the given configuration. keepLog records every request (tests); the bench
// turns it off so that memory stays flat.
func New(cfg Config, keepLog bool) *Server {
	s := &Server{adapters: map[string]string{}, keepLog: keepLog}
	s.Configure(cfg)
	return s
}

// Configure replaces the configuration.
func (s *Server) Configure(cfg Config) {
	if cfg.Model == "" {
		cfg.Model = "mock-model"
	}
	if cfg.Tokens <= 0 {
		cfg.Tokens = 8
	}
	s.mu.Lock()
	s.cfg = cfg
	s.mu.Unlock()
}

// Config returns the current configuration.
func (s *Server) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Restart forgets every loaded adapter, as a restarted vLLM would.
func (s *Server) Restart() {
	s.mu.Lock()
	s.adapters = map[string]string{}
	s.mu.Unlock()
}

// Requests returns the chat and messages requests seen so far (with keepLog).
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// LastRequest returns the latest chat or messages request, or nil.
func (s *Server) LastRequest() *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil
	}
	return s.requests[len(s.requests)-1]
}

// Loads returns the bodies of the load_lora_adapter calls seen so far.
func (s *Server) Loads() []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]string(nil), s.loads...)
}

// ChatCount returns how many chat requests were answered.
func (s *Server) ChatCount() int64 { return s.chatCount.Load() }

// ServeHTTP routes the OpenAI-compatible paths, with or without the /v1 prefix. Every answer carries
// an X-Request-Id header, as vLLM's does: the request's own if it sent one, else mock-<n>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	if id == "" {
		id = "mock-" + strconv.FormatInt(s.idCount.Add(1), 10)
	}
	w.Header().Set("X-Request-Id", id)
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	switch {
	case path == "/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case path == "/messages" && r.Method == http.MethodPost:
		s.messages(w, r)
	case path == "/responses" && r.Method == http.MethodPost:
		s.responses(w, r)
	case path == "/tokenize" && r.Method == http.MethodPost:
		s.tokenize(w, r)
	case path == "/completions" && r.Method == http.MethodPost:
		s.textCompletion(w, r)
	case path == "/models" && r.Method == http.MethodGet:
		s.models(w)
	case path == "/load_lora_adapter" && r.Method == http.MethodPost:
		s.loadAdapter(w, r)
	default:
		vllmError(w, http.StatusNotFound, "NotFoundError", "Not Found")
	}
}

// vllmError answers in vLLM's error shape (which differs from OpenAI's: no "error" wrapper).
func vllmError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"object": "error", "message": msg, "type": typ, "param": nil, "code": status})
}

func (s *Server) models(w http.ResponseWriter) {
	s.mu.Lock()
	data := []map[string]any{{"id": s.cfg.Model, "object": "model", "created": 0, "owned_by": "vllm"}}
	for name := range s.adapters {
		data = append(data, map[string]any{"id": name, "object": "model", "created": 0, "owned_by": "vllm", "parent": s.cfg.Model})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

func (s *Server) loadAdapter(w http.ResponseWriter, r *http.Request) {
	var body map[string]string
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body["lora_name"] == "" || body["lora_path"] == "" {
		vllmError(w, http.StatusBadRequest, "BadRequestError", "lora_name and lora_path are required")
		return
	}
	s.mu.Lock()
	s.loads = append(s.loads, body)
	_, exists := s.adapters[body["lora_name"]]
	s.adapters[body["lora_name"]] = body["lora_path"]
	s.mu.Unlock()
	if exists {
		vllmError(w, http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("The lora adapter '%s' has already been loaded.", body["lora_name"]))
		return
	}
	io.WriteString(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", body["lora_name"]))
}

// begin decodes and logs a request; it answers and returns nil when the request is refused.
func (s *Server) begin(w http.ResponseWriter, r *http.Request) (*Request, Config, bool) {
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	req := &Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Cancelled: make(chan struct{}), Done: make(chan struct{})}
	// Read the whole body before answering: answering while a proxy still writes the request makes
	// Go's Transport drop the connection mid-response.
	raw, err := io.ReadAll(r.Body)
	req.raw = raw
	if err == nil {
		err = json.Unmarshal(raw, &req.Body)
	}
	if err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", "invalid JSON: "+err.Error())
		return nil, cfg, false
	}
	if s.keepLog {
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		go func() {
			select {
			case <-r.Context().Done():
				close(req.Cancelled)
			case <-req.Done:
			}
		}()
	}
	if cfg.APIKey != "" && req.Authorization != "Bearer "+cfg.APIKey {
		vllmError(w, http.StatusUnauthorized, "Unauthorized", "bad upstream key")
		return req, cfg, false
	}
	if cfg.FailStatus != 0 {
		for k, v := range cfg.FailHeaders {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(cfg.FailStatus)
		io.WriteString(w, cfg.FailBody)
		return req, cfg, false
	}
	model, _ := req.Body["model"].(string)
	if cfg.StrictModels && model != cfg.Model {
		s.mu.Lock()
		_, ok := s.adapters[model]
		s.mu.Unlock()
		if !ok {
			vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", model))
			return req, cfg, false
		}
	}
	return req, cfg, true
}

var words = strings.Fields("The quick brown fox jumps over the lazy dog while the mock upstream streams tokens one at a time")

func answer(n int) []string {
	out := make([]string, n)
	for i := range out {
		w := words[i%len(words)]
		if i > 0 {
			w = " " + w
		}
		out[i] = w
	}
	return out
}

func maxTokens(body map[string]any, def int) int {
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		if v, ok := body[k].(float64); ok && int(v) > 0 && int(v) < def {
			return int(v)
		}
	}
	return def
}

func promptTokens(body map[string]any) int {
	b, _ := json.Marshal(body["messages"])
	return len(bytes.Fields(b))
}

// sleep waits for d or until the request goes away; it reports whether the request is still there.
func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	req, cfg, ok := s.begin(w, r)
	if req != nil {
		defer close(req.Done)
	}
	if !ok {
		return
	}
	s.chatCount.Add(1)
	model, _ := req.Body["model"].(string)
	p, err := s.plan(req, cfg)
	if err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	prompt := promptTokens(req.Body)
	usage := map[string]int{"prompt_tokens": prompt, "completion_tokens": p.tokens, "total_tokens": prompt + p.tokens}
	id := "chatcmpl-mock" + strconv.FormatInt(s.chatCount.Load(), 10)
	created := time.Now().Unix()

	if stream, _ := req.Body["stream"].(bool); !stream {
		if !sleep(r, cfg.TTFT+time.Duration(p.tokens)*cfg.ITL) {
			return
		}
		message := map[string]any{"role": "assistant", "content": strings.Join(p.text, "")}
		if len(p.reasoning) > 0 {
			message[cfg.Reasoning] = strings.Join(p.reasoning, "")
		}
		if len(p.calls) > 0 {
			var calls []any
			for _, c := range p.calls {
				calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.arguments}})
			}
			message["content"], message["tool_calls"] = nil, calls
		}
		answer := map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": message,
				"logprobs": nil, "finish_reason": p.finish, "stop_reason": p.stopReason}},
			"usage": usage,
		}
		if cfg.NoUsage {
			delete(answer, "usage")
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer)
		return
	}

	includeUsage, continuous := false, false
	if so, ok := req.Body["stream_options"].(map[string]any); ok && !cfg.NoUsage {
		includeUsage, _ = so["include_usage"].(bool)
		// vLLM's continuous_usage_stats: usage in every chunk, the prompt's count from the first.
		continuous, _ = so["continuous_usage_stats"].(bool)
	}
	sent := 0 // completion tokens streamed so far, for continuous usage
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		flusher.Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
		if finish != nil {
			// vLLM names the stop string that ended the answer in the last choice chunk.
			choice["stop_reason"] = p.stopReason
		}
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{choice}}
		if includeUsage {
			c["usage"] = nil
		}
		if continuous {
			c["usage"] = map[string]int{"prompt_tokens": prompt, "completion_tokens": sent, "total_tokens": prompt + sent}
		}
		return c
	}
	if !sleep(r, cfg.TTFT) {
		return
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, d := range p.deltas(cfg.Reasoning) {
		if i > 0 && !sleep(r, cfg.ITL) {
			return
		}
		if cfg.CutAfter > 0 && i == cfg.CutAfter {
			// Abort the connection without ending the chunked body: the client sees an unexpected EOF.
			panic(http.ErrAbortHandler)
		}
		sent++
		send(chunk(d, nil))
	}
	send(chunk(map[string]any{}, p.finish))
	if includeUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": []any{}, "usage": usage})
	}
	io.WriteString(w, "data: [DONE]\n\n")
	flusher.Flush()
	sleep(r, cfg.EndDelay)
}

// messages answers the Anthropic Messages wire format, for upstreams that serve it natively.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	req, cfg, ok := s.begin(w, r)
	if req != nil {
		defer close(req.Done)
	}
	if !ok {
		return
	}
	if !cfg.ServeMessages {
		vllmError(w, http.StatusNotFound, "NotFoundError", "Not Found")
		return
	}
	model, _ := req.Body["model"].(string)
	n := maxTokens(req.Body, cfg.Tokens)
	toks := answer(n)
	stop := "end_turn"
	if n < cfg.Tokens {
		stop = "max_tokens"
	}
	in := promptTokens(req.Body)
	msg := map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "model": model,
		"content":     []any{map[string]any{"type": "text", "text": strings.Join(toks, "")}},
		"stop_reason": stop, "stop_sequence": nil, "usage": map[string]int{"input_tokens": in, "output_tokens": n}}
	if cfg.NoUsage {
		delete(msg, "usage")
	}
	if stream, _ := req.Body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		flusher.Flush()
	}
	start := map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": in, "output_tokens": 1}}
	end := map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": n}}
	if cfg.NoUsage {
		delete(start, "usage")
		delete(end, "usage")
	}
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for _, t := range toks {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": t}})
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", end)
	send("message_stop", map[string]any{"type": "message_stop"})
	sleep(r, cfg.EndDelay)
}
