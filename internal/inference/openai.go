package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/sse"
)

// The runtime of OpenAI-compatible upstreams, split by concern as caddy splits its reverse proxy:
// openai.go (this file) answers calls and names their adapters; transport.go sends them; lora.go loads
// adapters; body.go renders request bodies and renames models in answers; stream.go and messages.go
// read answers, streamed or not, of each surface; errors.go maps every upstream failure.

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
