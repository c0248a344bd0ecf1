package inference

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

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
