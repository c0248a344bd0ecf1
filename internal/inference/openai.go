package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/sse"
)

// maxUpstreamBody caps a non-streamed upstream answer held in memory.
const maxUpstreamBody = 64 << 20

// openAI proxies to an OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, a hosted API).
type openAI struct {
	cfg    ModelConfig
	key    string // upstream API key from the environment; never logged
	client *http.Client

	mu       sync.Mutex
	adapters map[string]*adapterState // by adapter name, when adapters are loaded on upstreamUrl itself

	pool *loraPool // loads adapters on every replica instead (loraTargets); nil without
}

type adapterState struct {
	mu     sync.Mutex
	loaded bool
}

func newOpenAI(m ModelConfig, key string, opts Options) *openAI {
	timeout := time.Duration(m.TimeoutMs) * time.Millisecond
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	// A tuned transport: many concurrent requests to one upstream host reuse keep-alive connections
	// instead of paying a TCP handshake each (the default keeps only 2 idle connections per host).
	tr := &http.Transport{
		Proxy:                 nil, // the upstream is addressed directly, whatever HTTP_PROXY says
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		// Token streams are small and already compressed poorly; gzip would only add latency and CPU.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}
	o := &openAI{cfg: m, key: key, client: &http.Client{Transport: tr}, adapters: map[string]*adapterState{}}
	if m.Lora == LoraVLLM && m.LoraTargets != nil {
		o.pool = newLoraPool(o, opts)
	}
	return o
}

// upstreamModel is the model name the upstream knows: the adapter's name when it serves adapters.
func (o *openAI) upstreamModel(c *Call) string {
	if c.AdapterName != "" && o.servesAdapters() {
		return c.AdapterName
	}
	return o.cfg.UpstreamModel
}

func (o *openAI) ServesMessages() bool { return o.cfg.UpstreamMessages }

// servesAdapters reports whether the upstream serves adapters: loaded by svc (vllm) or by itself
// (resolver).
func (o *openAI) servesAdapters() bool { return o.cfg.Lora == LoraVLLM || o.cfg.Lora == LoraResolver }

// checkAdapter refuses adapters on upstreams that cannot load them, rather than silently serving
// the base model in their place.
func (o *openAI) checkAdapter(c *Call) error {
	if c.Adapter != "" && !o.servesAdapters() {
		return &Error{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "adapter_not_supported",
			Message: fmt.Sprintf("model %q cannot serve adapters: its upstream is not configured with lora: vllm or resolver", o.cfg.Name)}
	}
	return nil
}

// send posts body to path on the upstream, loading the call's adapter first when needed. When the
// upstream answers that the model does not exist (it, or a replica behind it, restarted and forgot
// the adapter), the adapter is loaded again and the request retried once.
func (o *openAI) send(ctx context.Context, c *Call, path string, body []byte, header http.Header) (*http.Response, error) {
	if err := o.checkAdapter(c); err != nil {
		return nil, err
	}
	useAdapter := c.Adapter != "" && o.cfg.Lora == LoraVLLM
	for attempt := 0; ; attempt++ {
		if useAdapter {
			if err := o.loadAdapter(ctx, c.AdapterName, c.Adapter); err != nil {
				return nil, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.cfg.UpstreamURL+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		if o.key != "" {
			req.Header.Set("Authorization", "Bearer "+o.key)
		}
		if c.RequestID != "" {
			// vLLM (--enable-request-id-headers) and most gateways log and echo it: one id end to end.
			req.Header.Set("X-Request-Id", c.RequestID)
		}
		// The transport itself, not the client: an inference POST must not follow redirects, and the
		// client's redirect bookkeeping (a header copy per request) is measurable on the hot path.
		resp, err := o.client.Transport.RoundTrip(req)
		if err != nil {
			return nil, o.transportError(ctx, err)
		}
		c.UpstreamRequestID = upstreamRequestID(resp.Header)
		if useAdapter && attempt == 0 && resp.StatusCode == http.StatusNotFound {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if modelMissing(b) {
				if err := o.adapterMissing(ctx, c.AdapterName, c.Adapter); err != nil {
					return nil, err
				}
				continue
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
		}
		return resp, nil
	}
}

// modelMissing recognises vLLM's (and OpenAI's) answer for an unknown model.
func modelMissing(body []byte) bool {
	s := string(body)
	return strings.Contains(s, "does not exist") || strings.Contains(s, "model_not_found")
}

// transportError maps a failed round trip: cancelled by the client (passed through, nobody to answer),
// timed out (504) or unreachable (502). The message names the model, not the upstream's address.
func (o *openAI) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Status: http.StatusGatewayTimeout, Type: "api_error", Code: CodeUpstreamTimeout,
			Message: fmt.Sprintf("the upstream serving %q did not answer in time", o.cfg.Name)}
	}
	return &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamUnavailable,
		Message: fmt.Sprintf("the upstream serving %q could not be reached", o.cfg.Name)}
}

// UpstreamError turns an upstream's error answer into an Error with the same status. It understands
// OpenAI's envelope ({"error": {...}}) and vLLM's flat one ({"object": "error", "message": ...}).
func UpstreamError(status int, body []byte) *Error {
	e := &Error{Status: status, Type: errorType(status), Code: CodeUpstreamError}
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   *string         `json:"param"`
		Code    any             `json:"code"`
	}
	if json.Unmarshal(body, &env) == nil {
		if len(env.Error) > 0 && env.Error[0] == '{' {
			var inner struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    any     `json:"code"`
			}
			if json.Unmarshal(env.Error, &inner) == nil {
				env.Message, env.Type, env.Param, env.Code = inner.Message, inner.Type, inner.Param, inner.Code
			}
		} else if len(env.Error) > 0 && env.Error[0] == '"' {
			json.Unmarshal(env.Error, &env.Message)
		}
		if env.Message != "" {
			e.Message = env.Message
		}
		// The upstream's own type when it is one of OpenAI's; vLLM sends Python class names
		// ("BadRequestError"), which mean nothing to clients. A 429 is always a rate_limit_error.
		if env.Type != "" && strings.HasSuffix(env.Type, "_error") && status != http.StatusTooManyRequests {
			e.Type = env.Type
		}
		if code, ok := env.Code.(string); ok && code != "" {
			e.Code = code
		}
		if env.Param != nil {
			e.Param = *env.Param
		}
	}
	if e.Message == "" {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 500 {
			msg = msg[:500]
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		e.Message = "upstream answered " + fmt.Sprint(status) + ": " + msg
	}
	return e
}

// errorType is OpenAI's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// prepareAdapter loads an adapter ahead of the first request (the Registry's Prepare hook).
func (o *openAI) prepareAdapter(ctx context.Context, name, artifact string) error {
	switch {
	case o.cfg.Lora == LoraResolver:
		return nil // the upstream loads it by name on first use
	case o.cfg.Lora != LoraVLLM:
		return fmt.Errorf("model %q cannot serve adapters: its upstream is not configured with lora: vllm or resolver", o.cfg.Name)
	case o.pool != nil:
		return o.pool.prepare(ctx, name, artifact)
	}
	return o.ensureAdapter(ctx, name, artifact)
}

// loadAdapter makes an adapter servable before a request: on upstreamUrl, or on the pool's replicas.
func (o *openAI) loadAdapter(ctx context.Context, name, artifact string) error {
	if o.pool != nil {
		return o.pool.ensure(ctx, name, artifact)
	}
	return o.ensureAdapter(ctx, name, artifact)
}

// adapterMissing runs when the upstream answered that the adapter does not exist, before the one
// retry: a single upstream is marked as having forgotten it; a pool's replicas are checked and
// reloaded where they lack it.
func (o *openAI) adapterMissing(ctx context.Context, name, artifact string) error {
	if o.pool != nil {
		return o.pool.recover(ctx, name, artifact)
	}
	o.forgetAdapter(name)
	return nil
}

func (o *openAI) adapter(name string) *adapterState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.adapters[name]
	if st == nil {
		st = &adapterState{}
		o.adapters[name] = st
	}
	return st
}

func (o *openAI) forgetAdapter(name string) {
	st := o.adapter(name)
	st.mu.Lock()
	st.loaded = false
	st.mu.Unlock()
}

// ensureAdapter loads the adapter once; concurrent first requests wait for the one load.
func (o *openAI) ensureAdapter(ctx context.Context, name, artifact string) error {
	st := o.adapter(name)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.loaded {
		return nil
	}
	if err := o.postLoad(ctx, o.client, o.cfg.UpstreamURL, name, artifact); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code != CodeUpstreamUnavailable && e.Code != CodeUpstreamTimeout {
			e.Message = fmt.Sprintf("loading adapter %q on the upstream failed: %s", name, e.Message)
		}
		return err
	}
	st.loaded = true
	return nil
}

// adapterPath turns an artifact URI into what vLLM's lora_path expects: a local path or a hub id.
func adapterPath(artifact string) string {
	for _, p := range []string{"file://", "hf://"} {
		if strings.HasPrefix(artifact, p) {
			return strings.TrimPrefix(artifact, p)
		}
	}
	return artifact
}

// requestBody renders the request for the upstream: its model name, and usage always requested on
// streams so that runs are counted even when the client did not ask for usage.
func (o *openAI) requestBody(c *Call) []byte {
	fields := make(map[string]json.RawMessage, len(c.Body)+1)
	for k, v := range c.Body {
		fields[k] = v
	}
	fields["model"] = jsonx.AppendString(nil, o.upstreamModel(c))
	if c.Stream {
		opts := map[string]json.RawMessage{}
		if raw, ok := fields["stream_options"]; ok {
			json.Unmarshal(raw, &opts)
		}
		opts["include_usage"] = json.RawMessage("true")
		fields["stream_options"] = EncodeObject(opts)
	}
	return EncodeObject(fields)
}

func (o *openAI) Complete(ctx context.Context, c *Call) (*Completion, error) {
	resp, err := o.send(ctx, c, "/chat/completions", o.requestBody(c), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		return nil, o.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, o.upstreamError(resp, body)
	}
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return nil, &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamError,
			Message: fmt.Sprintf("the upstream serving %q answered with invalid JSON", o.cfg.Name)}
	}
	// One pass over the answer with a cursor, as for stream chunks.
	out := &Completion{}
	model := [2]int{-1, -1}
	cur := jsonx.NewCursor(body)
	cur.Object(func(name []byte) {
		switch string(name) {
		case "id":
			out.ID = cur.String()
		case "created":
			out.Created = cur.Int()
		case "model":
			if model[0] < 0 && cur.Kind() == '"' {
				model[0], model[1] = cur.Span()
			}
		case "usage":
			if u, ok := readUsage(cur); ok {
				out.Usage = u
			}
		case "choices":
			first := true
			cur.Array(func() {
				if !first {
					return // left unread: skipped
				}
				first = false
				cur.Object(func(name []byte) {
					switch string(name) {
					case "message":
						cur.Object(func(name []byte) {
							if string(name) == "content" {
								out.Content = cur.String()
							}
						})
					case "finish_reason":
						out.FinishReason = cur.String()
					}
				})
			})
		}
	})
	served := jsonx.AppendString(nil, c.Served)
	out.JSON = body
	if model[0] >= 0 {
		out.JSON = spliceModel(make([]byte, 0, len(body)+len(served)), body, model, served)
	}
	return out, nil
}

func (o *openAI) Stream(ctx context.Context, c *Call) (Stream, error) {
	resp, err := o.send(ctx, c, "/chat/completions", o.requestBody(c), nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, o.upstreamError(resp, body)
	}
	served := jsonx.AppendString(nil, c.Served)
	return &openAIStream{ctx: ctx, o: o, body: resp.Body, rd: sse.NewReader(resp.Body), served: served}, nil
}

// upstreamError turns an upstream's error answer into the Error relayed to the client: the upstream's
// status, type, code and message, its Retry-After, and its request id. An upstream that refuses svc's
// own credentials is the operator's problem, not the caller's: it becomes a 502 naming the model,
// never a 401 that would blame the caller's key.
func (o *openAI) upstreamError(resp *http.Response, body []byte) *Error {
	return ResponseError(o.cfg.Name, resp, body)
}

// ResponseError is upstreamError for any upstream answer of model, passed through or not: the one
// place that decides how an upstream's error reaches the client.
func ResponseError(model string, resp *http.Response, body []byte) *Error {
	e := UpstreamError(resp.StatusCode, body)
	e.RetryAfter = resp.Header.Get("Retry-After")
	e.UpstreamRequestID = upstreamRequestID(resp.Header)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		e.Status, e.Type, e.Code, e.Param = http.StatusBadGateway, "api_error", CodeUpstreamAuth, ""
		e.Message = fmt.Sprintf("the upstream serving %q refused svc's credentials (it answered %d); the operator must check the model's apiKeyEnv",
			model, resp.StatusCode)
	}
	return e
}

// upstreamRequestID is the upstream's id for a request: OpenAI-style servers send x-request-id,
// Anthropic's API request-id.
func upstreamRequestID(h http.Header) string {
	id := h.Get("X-Request-Id")
	if id == "" {
		id = h.Get("Request-Id")
	}
	if len(id) > 128 {
		id = id[:128]
	}
	return id
}

// ProxyMessages forwards an Anthropic Messages request to an upstream that serves it.
func (o *openAI) ProxyMessages(ctx context.Context, c *Call, header http.Header) (*http.Response, error) {
	fields := make(map[string]json.RawMessage, len(c.Body))
	for k, v := range c.Body {
		fields[k] = v
	}
	fields["model"] = jsonx.AppendString(nil, o.upstreamModel(c))
	h := http.Header{}
	for _, k := range []string{"Anthropic-Version", "Anthropic-Beta"} {
		if v := header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	if h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", "2023-06-01")
	}
	if o.key != "" {
		h.Set("X-Api-Key", o.key) // Anthropic-style upstreams read this one; vLLM reads Authorization
	}
	return o.send(ctx, c, "/messages", EncodeObject(fields), h)
}

// openAIStream reads the upstream's server-sent events one at a time.
type openAIStream struct {
	ctx    context.Context
	o      *openAI
	body   io.ReadCloser
	rd     *sse.Reader
	served []byte
	done   bool
	ended  bool // the stream's "data: [DONE]" was read
	chunk  Chunk
	out    []byte
	// id and created are read from the first chunk: every chunk of a stream repeats them.
	id      string
	created int64
}

func (s *openAIStream) Next() (*Chunk, error) {
	if s.done {
		return nil, io.EOF
	}
	ev, err := s.rd.Next()
	if err != nil {
		s.done = true
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamError,
				Message: fmt.Sprintf("the upstream serving %q ended the stream early", s.o.cfg.Name)}
		}
		return nil, s.o.transportError(s.ctx, err)
	}
	if ev.Done() {
		s.done, s.ended = true, true
		return nil, io.EOF
	}
	data := ev.Data
	if len(data) == 0 || data[0] != '{' {
		s.done = true
		return nil, &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamError,
			Message: fmt.Sprintf("the upstream serving %q sent an invalid event", s.o.cfg.Name)}
	}
	// One pass over the chunk with a cursor (each byte visited once, nested values included) instead of
	// json.Unmarshal or a scan per field: this runs for every token of every stream.
	s.chunk = Chunk{ID: s.id, Created: s.created, Choices: s.chunk.Choices[:0]}
	failed, model := false, [2]int{-1, -1}
	c := jsonx.NewCursor(data)
	c.Object(func(name []byte) {
		switch string(name) {
		case "error":
			failed = failed || c.Kind() != 'n'
		case "id":
			if s.id == "" && s.chunk.ID == "" { // every chunk of a stream repeats the first one's
				s.chunk.ID = c.String()
			}
		case "created":
			if s.id == "" && s.chunk.Created == 0 {
				s.chunk.Created = c.Int()
			}
		case "model":
			if model[0] < 0 && c.Kind() == '"' {
				model[0], model[1] = c.Span()
			}
		case "usage": // an object on the last chunk; OpenAI-style servers send null on the others
			if u, ok := readUsage(c); ok {
				usage := u // allocated only here, not for every chunk's null
				s.chunk.Usage = &usage
			}
		case "choices":
			c.Array(func() { s.chunk.Choices = append(s.chunk.Choices, chunkChoice(c)) })
		}
	})
	if failed {
		s.done = true
		return nil, UpstreamError(http.StatusBadGateway, data)
	}
	if s.id == "" {
		s.id, s.created = s.chunk.ID, s.chunk.Created
	}
	// Rewrite the model into a buffer reused across chunks.
	s.out = spliceModel(s.out[:0], data, model, s.served)
	s.chunk.JSON = s.out
	return &s.chunk, nil
}

// readUsage reads the usage object at the cursor. Its counts must be integers (or null, which leaves
// a count at 0), under the names OpenAI-compatible servers send, matched exactly; other members
// (prompt_tokens_details, ...) are skipped. ok is false when the value is not an object or a count is
// not an integer: a malformed usage is not trusted (a stream's run is then counted by svc itself).
func readUsage(c *jsonx.Cursor) (u Usage, ok bool) {
	if c.Kind() != '{' {
		c.Raw()
		return Usage{}, false
	}
	ok = true
	c.Object(func(name []byte) {
		var count *int
		switch string(name) {
		case "prompt_tokens":
			count = &u.PromptTokens
		case "completion_tokens":
			count = &u.CompletionTokens
		case "total_tokens":
			count = &u.TotalTokens
		default:
			return
		}
		raw := c.Raw()
		if string(raw) == "null" {
			return
		}
		n, isInt := jsonx.Integer(raw)
		if !isInt || n != int64(int(n)) {
			ok = false
			return
		}
		*count = int(n)
	})
	if c.Bad() {
		return Usage{}, false
	}
	return u, ok
}

// chunkChoice reads one element of a chunk's choices at the cursor.
func chunkChoice(c *jsonx.Cursor) ChunkChoice {
	var ch ChunkChoice
	var stop string
	c.Object(func(name []byte) {
		switch string(name) {
		case "index":
			ch.Index = int(c.Int())
		case "finish_reason":
			ch.FinishReason = c.String()
		case "stop_reason": // vLLM's: the stop string that ended the answer
			if c.Kind() == '"' {
				stop = c.String()
			}
		case "delta":
			c.Object(func(name []byte) {
				switch string(name) {
				case "content":
					ch.Content = c.String()
				case "role":
					ch.Role = c.String()
				case "tool_calls":
					c.Array(func() { ch.ToolCalls = append(ch.ToolCalls, toolCallDelta(c)) })
				}
			})
		}
	})
	if ch.FinishReason != "" {
		ch.StopReason = stop
	}
	return ch
}

// toolCallDelta reads one element of a chunk's delta.tool_calls at the cursor.
func toolCallDelta(c *jsonx.Cursor) ToolCallDelta {
	var tc ToolCallDelta
	c.Object(func(name []byte) {
		switch string(name) {
		case "index":
			tc.Index = int(c.Int())
		case "id":
			tc.ID = c.String()
		case "function":
			c.Object(func(name []byte) {
				switch string(name) {
				case "name":
					tc.Name = c.String()
				case "arguments":
					tc.Arguments = c.String()
				}
			})
		}
	})
	return tc
}

// How long and how far Close reads past a stream's "data: [DONE]", for the end of the HTTP answer.
const (
	drainWait  = 100 * time.Millisecond
	drainLimit = 4 << 10
)

// Drain reads what follows the last event of a finished upstream stream, usually nothing but the end of
// the chunked answer, so that the transport can reuse the upstream connection: a body closed before
// its end costs the next request a new connection (a TLS handshake in production). It gives up after
// drainWait or drainLimit bytes, as a server that lingers after its last event must not hold the
// client's answer open. The caller still closes body.
func Drain(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	io.CopyN(io.Discard, body, drainLimit)
	t.Stop()
}

// Pending reports whether a whole event is already buffered.
func (s *openAIStream) Pending() bool { return s.rd != nil && s.rd.Pending() }

func (s *openAIStream) Close() error {
	if s.rd == nil {
		return nil // closed before
	}
	s.done = true
	if s.ended {
		Drain(s.body)
	}
	err := s.body.Close()
	s.rd.Release()
	s.rd = nil
	return err
}
