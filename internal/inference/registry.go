package inference

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
)

// Registry is the catalog of base models and their runtimes. It implements edgemodel.Catalog.
type Registry struct {
	infos   []edgemodel.ModelInfo
	byName  map[string]int
	configs []ModelConfig
	rts     []Runtime
	def     int // index of the default model, -1 when no model is public

	closeOnce sync.Once
}

// Options tunes a Registry; the zero value is what a server uses.
type Options struct {
	// LookupHost resolves the host of a `loraTargets: dns` upstream to its replicas' addresses
	// (default: the system resolver). Tests map a made-up name to loopback addresses with it.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// LoraSyncInterval is how often replica pools are re-resolved and checked for missing adapters
	// (default DefaultLoraSyncInterval).
	LoraSyncInterval time.Duration
	// Logger receives replica pools' failures and recoveries (default slog.Default()).
	Logger *slog.Logger
	// WrapTransport, when set, wraps the transport of inference calls to upstreams (tracing's, which
	// makes their spans and sends traceparent).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

var _ edgemodel.Catalog = (*Registry)(nil)
var _ edgemodel.Fleets = (*Registry)(nil)

// NewRegistryWith validates the models and builds their runtimes. Close stops the background work
// that models with loraTargets start.
func NewRegistryWith(models []ModelConfig, opts Options) (*Registry, error) {
	models = append([]ModelConfig(nil), models...)
	if err := Validate("models", models); err != nil {
		return nil, err
	}
	r := &Registry{byName: map[string]int{}, def: -1}
	for i, m := range models {
		var rt Runtime
		switch m.Runtime {
		case RuntimeSimulator:
			rt = newSimulator(m)
		case RuntimeOpenAI:
			rt = newOpenAI(m, os.Getenv(m.APIKeyEnv), opts)
		}
		r.infos = append(r.infos, edgemodel.ModelInfo{ID: m.Name, Public: m.Public, Default: m.Default,
			SupportsMessages: m.SupportsMessages, Runtime: m.Runtime, Simulated: m.Runtime == RuntimeSimulator,
			Adapters: servesAdapters(m)})
		r.byName[m.Name] = i
		r.configs = append(r.configs, m)
		r.rts = append(r.rts, rt)
		if m.Default {
			r.def = i
		}
	}
	return r, nil
}

// servesAdapters reports whether a model can serve LoRA adapters: the simulator "loads" any adapter
// by name, and an OpenAI-compatible upstream can when svc knows how to load adapters on it.
func servesAdapters(m ModelConfig) bool {
	return m.Runtime == RuntimeSimulator || (m.Runtime == RuntimeOpenAI && m.Lora == LoraVLLM)
}

// LoadWith builds the registry from a models file, or from the built-in simulated catalog when path
// is "".
func LoadWith(path string, opts Options) (*Registry, error) {
	if path == "" {
		return NewRegistryWith(BuiltinModels(), opts)
	}
	models, err := LoadModelsFile(path)
	if err != nil {
		return nil, err
	}
	return NewRegistryWith(models, opts)
}

// Model returns a model of the catalog.
func (r *Registry) Model(id string) (edgemodel.ModelInfo, bool) {
	i, ok := r.byName[id]
	if !ok {
		return edgemodel.ModelInfo{}, false
	}
	return r.infos[i], true
}

// Models returns every model, in the order of the models file.
func (r *Registry) Models() []edgemodel.ModelInfo {
	return append([]edgemodel.ModelInfo(nil), r.infos...)
}

// Default returns the multi-model default.
func (r *Registry) Default() (edgemodel.ModelInfo, bool) {
	if r.def < 0 {
		return edgemodel.ModelInfo{}, false
	}
	return r.infos[r.def], true
}

// Runtime returns the runtime serving a model, or nil for a model not in the catalog.
func (r *Registry) Runtime(id string) Runtime {
	i, ok := r.byName[id]
	if !ok {
		return nil
	}
	return r.rts[i]
}

// Config returns a model's entry of the models file.
func (r *Registry) Config(id string) (ModelConfig, bool) {
	i, ok := r.byName[id]
	if !ok {
		return ModelConfig{}, false
	}
	return r.configs[i], true
}

// Prepare gets a deployment's target ready to serve: it loads the adapter on upstreams with
// `lora: vllm` (on every replica with loraTargets, and keeps it there). The edge loads adapters lazily
// anyway, so a failure here only costs the first request a retry.
func (r *Registry) Prepare(ctx context.Context, d *edgemodel.EdgeDeployment) error {
	if d == nil || d.Adapter == "" || d.BaseModel == "" {
		return nil
	}
	rt := r.Runtime(d.BaseModel)
	if rt == nil {
		return fmt.Errorf("model %q is not in the catalog", d.BaseModel)
	}
	if o, ok := rt.(*openAI); ok {
		return o.prepareAdapter(ctx, d.AdapterName, d.Adapter)
	}
	return nil
}

// Close stops the replica pools' background loops (waiting for loads under way to end) and releases
// the runtimes' idle upstream connections. Call it once the edge no longer serves requests; calling it
// again does nothing.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		for _, rt := range r.rts {
			if o, ok := rt.(*openAI); ok {
				if o.pool != nil {
					o.pool.close()
				}
				if o.fleet != nil {
					o.fleet.close()
				}
				o.client.CloseIdleConnections()
			}
		}
	})
}
