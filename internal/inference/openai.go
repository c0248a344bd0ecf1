package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/sse"
)

// The runtime of OpenAI-compatible upstreams, split by concern as caddy splits its reverse proxy:
// openai.go (this file) answers calls, names their adapters, renders request bodies and renames models
// in answers; transport.go sends them; lora.go loads adapters; stream.go and messages.go read answers,
// streamed or not, of each surface (stream.go also assembles a streamed one for its run); errors.go maps
// every upstream failure.

// openAI proxies to an OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, a hosted API).
type openAI struct {
	cfg    ModelConfig
	key    string // upstream API key from the environment; never logged
	client *http.Client
	rt     http.RoundTripper // what inference calls go through: client's transport, traced when tracing is on

	mu       sync.Mutex
	adapters map[string]*adapterState // by adapter name, when adapters are loaded on upstreamUrl itself

	pool *loraPool // loads adapters on every replica instead (loraTargets); nil without

	fleet *modelFleet // picks the replica of each call (a list of replicas); nil without

	noTokenize atomic.Bool // the upstream answered 404 to /tokenize: count_tokens estimates

	// timeout waits for a non-streamed answer's headers (timeoutMs), firstByte for a streamed answer's
	// first byte; idle is the longest silence of an answer once begun (transport.go's watch).
	timeout, firstByte, idle time.Duration
}

func newOpenAI(m ModelConfig, key string, opts Options) *openAI {
	timeout := time.Duration(m.TimeoutMs) * time.Millisecond
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	o := &openAI{cfg: m, key: key, client: &http.Client{Transport: newTransport(timeout)}, adapters: map[string]*adapterState{},
		timeout: timeout, firstByte: DefaultFirstByteTimeout, idle: DefaultIdleTimeout}
	if m.FirstByteTimeoutMs > 0 {
		o.firstByte = time.Duration(m.FirstByteTimeoutMs) * time.Millisecond
	}
	if m.IdleTimeoutMs > 0 {
		o.idle = time.Duration(m.IdleTimeoutMs) * time.Millisecond
	}
	o.rt = o.client.Transport
	if opts.WrapTransport != nil {
		o.rt = opts.WrapTransport(o.rt)
	}
	o.fleet = newModelFleet(m, opts)
	if m.Lora == LoraVLLM && m.LoraTargets != nil {
		o.pool = newLoraPool(o, opts) // after the fleet, whose replicas it reads
	}
	return o
}

var _ Passthrough = (*openAI)(nil)

// Complete relays a non-streamed chat completion.
func (o *openAI) Complete(ctx context.Context, c *Call) (*Completion, error) {
	resp, err := o.send(ctx, c, "/chat/completions", o.chatBody(c), nil, false)
	if err != nil {
		return nil, err
	}
	body, err := o.readAnswer(ctx, resp)
	if err != nil {
		return nil, err
	}
	return o.readCompletion(body, jsonx.AppendString(nil, c.Served), c.ID)
}

// Stream relays a streamed chat completion.
func (o *openAI) Stream(ctx context.Context, c *Call) (Stream, error) {
	resp, err := o.send(ctx, c, "/chat/completions", o.chatBody(c), nil, true)
	if err != nil {
		return nil, err
	}
	return o.newStream(ctx, SurfaceChat, resp, c), nil
}

// Passes reports whether the upstream serves the surface itself (the models file says so).
func (o *openAI) Passes(s Surface) bool {
	switch s {
	case SurfaceMessages, SurfaceCountTokens:
		return o.cfg.UpstreamMessages
	case SurfaceResponses, SurfaceResponsesInputTokens:
		return o.cfg.SupportsResponses
	case SurfaceEmbeddings, SurfaceCompletions:
		return o.cfg.Serves(string(s))
	}
	return false
}

// PassComplete passes a non-streamed request of the surface through.
func (o *openAI) PassComplete(ctx context.Context, s Surface, c *Call, header http.Header) (*Completion, error) {
	resp, err := o.send(ctx, c, "/"+string(s), o.passBody(c), o.passHeader(s, header), false)
	if err != nil {
		return nil, err
	}
	body, err := o.readAnswer(ctx, resp)
	if err != nil {
		return nil, err
	}
	served := jsonx.AppendString(nil, c.Served)
	switch s {
	case SurfaceMessages:
		return o.readMessage(body, served, c.ID)
	case SurfaceResponses:
		return o.readResponse(body, served)
	case SurfaceCountTokens, SurfaceResponsesInputTokens:
		if !validObject(body) {
			return nil, o.badAnswer("answered with invalid JSON")
		}
		return &Completion{JSON: body}, nil
	}
	return o.readCompletion(body, served, "")
}

// PassStream passes a streamed request of the surface through. Text completions ask for the final
// usage chunk, as chat streams do, so that runs are counted.
func (o *openAI) PassStream(ctx context.Context, s Surface, c *Call, header http.Header) (Stream, error) {
	body := o.passBody(c)
	if s == SurfaceCompletions {
		body = o.chatBody(c)
	}
	resp, err := o.send(ctx, c, "/"+string(s), body, o.passHeader(s, header), true)
	if err != nil {
		return nil, err
	}
	return o.newStream(ctx, s, resp, c), nil
}

// validObject reports whether an upstream's answer is a JSON object, which every surface's answer is.
func validObject(body []byte) bool {
	return len(body) > 0 && body[0] == '{' && json.Valid(body)
}

// readCompletion reads a chat.completion in one pass with a cursor, as stream chunks are read, and
// renames its model for the client; id, when set, replaces the upstream's id (Call.ID).
func (o *openAI) readCompletion(body, served []byte, id string) (*Completion, error) {
	if !validObject(body) {
		return nil, o.badAnswer("answered with invalid JSON")
	}
	out := &Completion{}
	model, idSpan := [2]int{-1, -1}, [2]int{-1, -1}
	cur := jsonx.NewCursor(body)
	cur.Object(func(name []byte) {
		switch string(name) {
		case "id":
			if id != "" && idSpan[0] < 0 && cur.Kind() == '"' {
				idSpan[0], idSpan[1] = cur.Span()
				out.ID = id
				return
			}
			out.ID = cur.String()
		case "created":
			out.Created = cur.Int()
		case "model":
			if model[0] < 0 && cur.Kind() == '"' {
				model[0], model[1] = cur.Span()
			}
		case "usage":
			if u, ok := readUsage(cur, &openAIUsage); ok {
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
	out.JSON = body
	if model[0] >= 0 || idSpan[0] >= 0 {
		var idJSON []byte
		if idSpan[0] >= 0 {
			idJSON = jsonx.AppendString(nil, id)
		}
		out.JSON = splice(make([]byte, 0, len(body)+len(served)+len(idJSON)), body, idSpan, idJSON, model, served)
	}
	return out, nil
}

// newStream begins reading an upstream's streamed answer of a surface.
func (o *openAI) newStream(ctx context.Context, s Surface, resp *http.Response, c *Call) *upstreamStream {
	st := &upstreamStream{ctx: ctx, o: o, surface: s, body: resp.Body, rd: sse.NewReader(resp.Body),
		served: jsonx.AppendString(nil, c.Served)}
	if (s == SurfaceChat || s == SurfaceMessages) && c.ID != "" {
		st.id, st.idJSON = c.ID, jsonx.AppendString(nil, c.ID)
	}
	return st
}

// Adapters on OpenAI-compatible upstreams: the name the upstream knows a call's model by, and the
// cache of adapters loaded on upstreamUrl itself (lora.go keeps them on a pool of replicas instead).

type adapterState struct {
	mu     sync.Mutex
	loaded bool
}

// upstreamModel is the model name the upstream knows: the adapter's name when it serves adapters.
func (o *openAI) upstreamModel(c *Call) string {
	if c.AdapterName != "" && o.servesAdapters() {
		return c.AdapterName
	}
	return o.cfg.UpstreamModel
}

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

// modelMissing recognises vLLM's (and OpenAI's) answer for an unknown model.
func modelMissing(body []byte) bool {
	s := string(body)
	return strings.Contains(s, "does not exist") || strings.Contains(s, "model_not_found")
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

// Request bodies as they go upstream, and the renaming of the model in answers as they come back.

// chatBody renders a chat request for the upstream: its model name, and usage always requested on
// streams so that runs are counted even when the client did not ask for usage. The members are the
// call's as the edge read them (or as a translation wrote them), written once: stream_options is not
// decoded again, include_usage is spliced into it (WithUsage).
func (o *openAI) chatBody(c *Call) []byte {
	model := jsonx.AppendString(nil, o.upstreamModel(c))
	if !c.Stream {
		return encodeWith(c.Body, "model", model, "", nil)
	}
	opts := WithUsage(c.Body["stream_options"])
	if c.PromptUsage && o.cfg.ContinuousUsage {
		// WithUsage's object opens with its first member or include_usage: continuous_usage_stats goes first.
		opts = append([]byte(`{"continuous_usage_stats":true,`), bytes.TrimPrefix(opts, []byte("{"))...)
	}
	return encodeWith(c.Body, "model", model, "stream_options", opts)
}

// WithUsage returns stream_options (a JSON object as the edge checked it, null or absent) asking the
// upstream for usage: include_usage set to true where it is written, or added first.
func WithUsage(opts []byte) []byte {
	c := jsonx.NewCursor(opts)
	if c.Kind() != '{' {
		return []byte(`{"include_usage":true}`)
	}
	s, e, n := -1, -1, 0
	c.Object(func(name []byte) {
		n++
		if s < 0 && string(name) == "include_usage" {
			s, e = c.Span()
		}
	})
	switch {
	case c.Bad():
		return []byte(`{"include_usage":true}`)
	case s >= 0 && string(opts[s:e]) == "true":
		return opts
	case s >= 0:
		return append(append(append(make([]byte, 0, len(opts)+4), opts[:s]...), "true"...), opts[e:]...)
	case n == 0:
		return []byte(`{"include_usage":true}`)
	}
	i := bytes.IndexByte(opts, '{') + 1
	return append(append(append(make([]byte, 0, len(opts)+22), opts[:i]...), `"include_usage":true,`...), opts[i:]...)
}

// encodeWith is EncodeObject of fields with the members k1 and k2 (each when not "") set to v1 and v2,
// without copying fields.
func encodeWith(fields map[string]json.RawMessage, k1 string, v1 []byte, k2 string, v2 []byte) []byte {
	keys := make([]string, 0, len(fields)+2)
	size := 2 + len(k1) + len(v1) + len(k2) + len(v2) + 8
	set := func(k string) bool { return k != "" && (k == k1 || k == k2) }
	for k, v := range fields {
		if !set(k) {
			keys = append(keys, k)
			size += len(k) + len(v) + 4
		}
	}
	for _, k := range []string{k1, k2} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonx.AppendString(out, k)
		out = append(out, ':')
		switch {
		case k1 != "" && k == k1:
			out = append(out, v1...)
		case k2 != "" && k == k2:
			out = append(out, v2...)
		default:
			out = append(out, fields[k]...)
		}
	}
	return append(out, '}')
}

// passBody renders a passed-through request for the upstream: as sent, but for the model's name.
func (o *openAI) passBody(c *Call) []byte {
	return encodeWith(c.Body, "model", jsonx.AppendString(nil, o.upstreamModel(c)), "", nil)
}

// passHeaders are the request headers a passed-through surface forwards upstream.
var passHeaders = map[Surface][]string{
	SurfaceMessages: {"Anthropic-Version", "Anthropic-Beta"},
}

// passHeader returns the headers of a passed-through request: the surface's own, as the client sent
// them, and the upstream's credentials the surface's way.
func (o *openAI) passHeader(s Surface, header http.Header) http.Header {
	h := http.Header{}
	for _, k := range passHeaders[s] {
		if v := header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	if s == SurfaceMessages {
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", "2023-06-01")
		}
		if o.key != "" {
			h.Set("X-Api-Key", o.key) // Anthropic-style upstreams read this one; vLLM reads Authorization
		}
	}
	return h
}

// EncodeObject writes the fields of a JSON object back out, keys sorted. The values are trusted to be
// valid JSON (they came from json.Unmarshal), which saves the re-validation json.Marshal would do.
func EncodeObject(fields map[string]json.RawMessage) []byte {
	return encodeWith(fields, "", nil, "", nil)
}

// spliceModel appends b to dst with the byte range span of b (its model's JSON string, quotes
// included) replaced by model; with span[0] < 0 (no model to rename) b is appended as it is. The one
// place an answer, a streamed chunk or a passed-through event is renamed for the served model.
func spliceModel(dst, b []byte, span [2]int, model []byte) []byte {
	return splice(dst, b, span, model, [2]int{-1, -1}, nil)
}

// splice appends b to dst with the byte ranges a and m of b (two JSON strings, either unset: -1)
// replaced by av and mv: a chat answer's id and model, rewritten in one copy.
func splice(dst, b []byte, a [2]int, av []byte, m [2]int, mv []byte) []byte {
	if a[0] >= 0 && m[0] >= 0 && m[0] < a[0] {
		a, m, av, mv = m, a, mv, av
	}
	if a[0] < 0 {
		a, av = m, mv
		m[0] = -1
	}
	if a[0] < 0 {
		return append(dst, b...)
	}
	dst = append(dst, b[:a[0]]...)
	dst = append(dst, av...)
	if m[0] < 0 {
		return append(dst, b[a[1]:]...)
	}
	dst = append(dst, b[a[1]:m[0]]...)
	dst = append(dst, mv...)
	return append(dst, b[m[1]:]...)
}
