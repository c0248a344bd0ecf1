package inference

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Runtime names of the models file.
const (
	RuntimeSimulator = "simulator"
	RuntimeOpenAI    = "openai"
)

// LoRA loading strategies of openai-runtime models (docs/LORA.md).
const (
	LoraNone = "none"
	// LoraVLLM loads adapters through vLLM's load_lora_adapter API.
	LoraVLLM = "vllm"
	// LoraResolver leaves loading to the upstream, which resolves adapters by name (vLLM's LoRA
	// resolver plugins, LoRAX, llm-d): svc only sends the adapter name as the model.
	LoraResolver = "resolver"
)

// Reasoning controls of a model (the models file's `reasoning`): how a translated request's thinking
// or reasoning effort reaches the upstream (package translate's Reasoning* constants), and for the
// simulator, whether it reasons.
const (
	ReasoningEffort       = "reasoning_effort"
	ReasoningChatTemplate = "chat_template_kwargs"
	ReasoningNone         = "none"
)

// Extra OpenAI routes a model may serve (the models file's `routes`), besides chat completions.
const (
	RouteEmbeddings  = "embeddings"
	RouteCompletions = "completions"
)

// LoraTargetsDNS is the loraTargets value that loads adapters on every address of the upstream host.
const LoraTargetsDNS = "dns"

// Simulator output modes.
const (
	ModeEcho  = "echo"
	ModeLorem = "lorem"
)

// Bounds of a model's admission settings: a replica running more calls at once than this is no
// replica svc knows of, and a caller waiting longer than 10 minutes for a turn has left.
const (
	maxConcurrency    = 100000
	maxQueueTimeoutMs = 600000
)

// ModelConfig is one entry of the models file (docs/API.md, "Models file").
type ModelConfig struct {
	Name          string `yaml:"name"`
	Runtime       string `yaml:"runtime"`
	UpstreamURL   string `yaml:"upstreamUrl"`
	UpstreamModel string `yaml:"upstreamModel"`
	APIKeyEnv     string `yaml:"apiKeyEnv"`
	Public        bool   `yaml:"public"`
	Default       bool   `yaml:"default"`
	// SupportsMessages serves the model on /v1/messages.
	SupportsMessages bool `yaml:"supportsMessages"`
	// UpstreamMessages says that the upstream serves /v1/messages itself, so the edge passes Messages
	// requests through instead of translating them to chat completions.
	UpstreamMessages bool `yaml:"upstreamMessages"`
	// SupportsResponses says that the upstream serves /v1/responses itself (vLLM does), so the edge
	// passes Responses requests through instead of translating them to chat completions.
	SupportsResponses bool `yaml:"supportsResponses"`
	// ContinuousUsage says that the upstream reports usage in every streamed chunk when asked (vLLM's
	// stream_options.continuous_usage_stats): translated streams then announce the prompt's exact token
	// count in their first event (the Messages API's message_start) instead of svc's estimate.
	ContinuousUsage bool `yaml:"continuousUsage"`
	// Reasoning says how the upstream takes reasoning controls (reasoning_effort, the default, or
	// chat_template_kwargs, or none); a simulated model with it set reasons.
	Reasoning string `yaml:"reasoning"`
	// Routes lists the extra OpenAI routes served for the model, passed through unchanged but for the
	// model name: embeddings (/v1/embeddings), completions (/v1/completions).
	Routes []string `yaml:"routes"`
	Lora   string   `yaml:"lora"`
	// LoraTargets, with lora: vllm, loads adapters on every replica behind upstreamUrl instead of on
	// upstreamUrl itself: the addresses of its host (dns) or a fixed list of base URLs. Nil: upstreamUrl.
	LoraTargets *LoraTargets `yaml:"loraTargets"`
	// Replicas, instead of upstreamUrl, are the model's inference servers; Routing says how requests
	// are spread over them (affinity, least-loaded, round-robin) and MaxLoras is their --max-loras
	// (docs/LORA.md, "Fleets").
	Replicas *Replicas `yaml:"replicas"`
	Routing  string    `yaml:"routing"`
	MaxLoras int       `yaml:"maxLoras"`
	// KVEvents says where the replicas publish their KV-cache events (kvevents.go).
	KVEvents *KVEvents `yaml:"kvEvents"`
	// TimeoutMs bounds the wait for the upstream's response headers (default 600000): for a
	// non-streamed answer that is the whole generation, for a stream the first token.
	TimeoutMs int `yaml:"timeoutMs"`
	// FirstByteTimeoutMs bounds a streamed call's wait for the first byte of its answer (headers and
	// the first byte of the stream; default DefaultFirstByteTimeout), IdleTimeoutMs the silence
	// between two reads of any answer once it has begun (default DefaultIdleTimeout). Either ends the
	// call with 504 upstream_timeout and counts as a failure of the replica that answered.
	FirstByteTimeoutMs int `yaml:"firstByteTimeoutMs"`
	IdleTimeoutMs      int `yaml:"idleTimeoutMs"`
	// MaxConcurrency is how many calls one replica (or the upstreamUrl, or the simulator) runs at once;
	// beyond it (times the healthy replicas) calls wait at the edge for their turn, in lanes and per key
	// (internal/admission; docs/OPERATIONS.md, "Admission"). 0: no bound, calls go at once.
	MaxConcurrency int `yaml:"maxConcurrency"`
	// QueueTimeoutMs bounds a call's wait for its turn (default 30000), after which it gets 429 model_busy.
	QueueTimeoutMs int `yaml:"queueTimeoutMs"`

	Simulator *SimulatorConfig `yaml:"simulator"`
}

// SimulatorConfig tunes a simulator model.
type SimulatorConfig struct {
	Mode        string `yaml:"mode"`        // echo (default) or lorem
	TTFTMs      int    `yaml:"ttftMs"`      // time to first token
	ITLMs       int    `yaml:"itlMs"`       // inter-token latency
	LoremTokens int    `yaml:"loremTokens"` // answer length in lorem mode (default 48)
	Seed        int64  `yaml:"seed"`        // mixed into the lorem generator
	// EmbeddingDim is the length of the vectors the simulator answers on /v1/embeddings (default 256).
	EmbeddingDim int `yaml:"embeddingDim"`
	// FaultShare (0 to 1) is the share of conversations, chosen by a hash of the conversation, whose
	// answers break what a caller parses: tool call arguments and structured output cut in half, so
	// invalid JSON. A worse model, the same every time, for replay evals (docs/API.md, "Evals").
	FaultShare float64 `yaml:"faultShare"`
}

// Serves reports whether the model's entry lists route (embeddings, completions) in routes.
func (m ModelConfig) Serves(route string) bool {
	for _, r := range m.Routes {
		if r == route {
			return true
		}
	}
	return false
}

// LoraTargets is the models file's loraTargets: the word dns, or a list of base URLs.
type LoraTargets struct {
	Mode string   // "dns"; "" for a list
	URLs []string // the list's base URLs, each ending in /v1 by convention
}

// UnmarshalYAML takes a scalar (the mode) or a sequence of URLs; Validate checks the values so that
// its errors can name the model.
func (t *LoraTargets) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		t.Mode = n.Value
		return nil
	case yaml.SequenceNode:
		t.URLs = []string{}
		return n.Decode(&t.URLs)
	}
	return fmt.Errorf("line %d: loraTargets must be %s or a list of URLs", n.Line, LoraTargetsDNS)
}

type modelsFile struct {
	Models []ModelConfig `yaml:"models"`
}

// BuiltinModels is the simulated catalog served when no models file is given.
func BuiltinModels() []ModelConfig {
	return []ModelConfig{
		{Name: "sim-llama-3.1-8b-instruct", Runtime: RuntimeSimulator, Public: true, Default: true, SupportsMessages: true,
			Routes:    []string{RouteEmbeddings, RouteCompletions},
			Simulator: &SimulatorConfig{Mode: ModeEcho, TTFTMs: 20, ITLMs: 5}},
		// A reasoning model, as Qwen3 on vLLM: its answers carry reasoning_content unless the request
		// turns thinking off (chat_template_kwargs.enable_thinking false).
		{Name: "sim-qwen3-8b", Runtime: RuntimeSimulator, Public: true, SupportsMessages: true, Reasoning: ReasoningChatTemplate,
			Routes:    []string{RouteCompletions},
			Simulator: &SimulatorConfig{Mode: ModeEcho, TTFTMs: 20, ITLMs: 5}},
		{Name: "sim-qwen2.5-7b-instruct", Runtime: RuntimeSimulator, Public: true, SupportsMessages: true,
			Simulator: &SimulatorConfig{Mode: ModeLorem, TTFTMs: 20, ITLMs: 5}},
		{Name: "sim-mistral-7b-instruct", Runtime: RuntimeSimulator, Public: true,
			Simulator: &SimulatorConfig{Mode: ModeLorem, TTFTMs: 20, ITLMs: 5, Seed: 7}},
		// A base model for fine-tunes only: registered for inference, not listed on multi-model endpoints.
		{Name: "sim-llama-3.1-8b", Runtime: RuntimeSimulator,
			Simulator: &SimulatorConfig{Mode: ModeLorem, TTFTMs: 20, ITLMs: 5}},
	}
}

// LoadModelsFile reads and validates a models file. Errors name the file and the offending entry.
func LoadModelsFile(path string) ([]ModelConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseModels(path, data)
}

// ParseModels parses and validates the content of a models file; name is used in error messages.
func ParseModels(name string, data []byte) ([]ModelConfig, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt key is an error, not a silently ignored setting
	var f modelsFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no models listed (want a top-level \"models:\" list)", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := Validate(name, f.Models); err != nil {
		return nil, err
	}
	return f.Models, nil
}

// Validate checks a list of models and fills in defaults (runtime, upstreamModel, lora, default
// model). name prefixes the error messages.
func Validate(name string, models []ModelConfig) error {
	if len(models) == 0 {
		return fmt.Errorf("%s: no models listed (want a top-level \"models:\" list)", name)
	}
	seen := map[string]int{}
	defaults := []int{}
	firstPublic := -1
	for i := range models {
		m := &models[i]
		where := fmt.Sprintf("%s: models[%d] %q", name, i, m.Name)
		if m.Name == "" {
			return fmt.Errorf("%s: models[%d]: name is required", name, i)
		}
		if strings.IndexFunc(m.Name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 || len(m.Name) > 200 {
			return fmt.Errorf("%s: name must be at most 200 characters without spaces", where)
		}
		if j, dup := seen[m.Name]; dup {
			return fmt.Errorf("%s: name already used by models[%d]", where, j)
		}
		seen[m.Name] = i
		if m.Runtime == "" {
			m.Runtime = RuntimeSimulator
		}
		if m.MaxConcurrency < 0 || m.MaxConcurrency > maxConcurrency {
			return fmt.Errorf("%s: maxConcurrency must be between 0 (no bound) and %d", where, maxConcurrency)
		}
		if m.QueueTimeoutMs < 0 || m.QueueTimeoutMs > maxQueueTimeoutMs {
			return fmt.Errorf("%s: queueTimeoutMs must be between 0 (the default, 30000) and %d", where, maxQueueTimeoutMs)
		}
		if m.QueueTimeoutMs > 0 && m.MaxConcurrency == 0 && m.Replicas == nil {
			return fmt.Errorf("%s: queueTimeoutMs needs maxConcurrency or replicas (without them no call ever waits)", where)
		}
		switch m.Reasoning {
		case "", ReasoningEffort, ReasoningChatTemplate, ReasoningNone:
		default:
			return fmt.Errorf("%s: reasoning %q is not one of %s, %s, %s", where, m.Reasoning, ReasoningEffort, ReasoningChatTemplate, ReasoningNone)
		}
		routes := map[string]bool{}
		for _, r := range m.Routes {
			if r != RouteEmbeddings && r != RouteCompletions {
				return fmt.Errorf("%s: routes: %q is not one of %s, %s", where, r, RouteEmbeddings, RouteCompletions)
			}
			if routes[r] {
				return fmt.Errorf("%s: routes: %q is listed twice", where, r)
			}
			routes[r] = true
		}
		switch m.Runtime {
		case RuntimeSimulator:
			for _, f := range []struct {
				field string
				set   bool
			}{{"upstreamUrl", m.UpstreamURL != ""}, {"upstreamModel", m.UpstreamModel != ""}, {"apiKeyEnv", m.APIKeyEnv != ""},
				{"upstreamMessages", m.UpstreamMessages}, {"supportsResponses", m.SupportsResponses}, {"timeoutMs", m.TimeoutMs != 0},
				{"firstByteTimeoutMs", m.FirstByteTimeoutMs != 0}, {"idleTimeoutMs", m.IdleTimeoutMs != 0},
				{"loraTargets", m.LoraTargets != nil}, {"replicas", m.Replicas != nil}, {"routing", m.Routing != ""},
				{"maxLoras", m.MaxLoras != 0}, {"kvEvents", m.KVEvents != nil}} {
				if f.set {
					return fmt.Errorf("%s: %s is only for runtime %q", where, f.field, RuntimeOpenAI)
				}
			}
			if m.Lora != "" && m.Lora != LoraNone {
				return fmt.Errorf("%s: lora %q is only for runtime %q (the simulator loads adapters by name)", where, m.Lora, RuntimeOpenAI)
			}
			if m.Simulator == nil {
				m.Simulator = &SimulatorConfig{}
			}
			s := m.Simulator
			if s.Mode == "" {
				s.Mode = ModeEcho
			}
			if s.Mode != ModeEcho && s.Mode != ModeLorem {
				return fmt.Errorf("%s: simulator mode %q is not one of echo, lorem", where, s.Mode)
			}
			if s.TTFTMs < 0 || s.ITLMs < 0 || s.LoremTokens < 0 || s.EmbeddingDim < 0 {
				return fmt.Errorf("%s: simulator ttftMs, itlMs, loremTokens and embeddingDim must not be negative", where)
			}
			if s.FaultShare < 0 || s.FaultShare > 1 {
				return fmt.Errorf("%s: simulator faultShare must be between 0 and 1", where)
			}
			if s.LoremTokens == 0 {
				s.LoremTokens = 48
			}
			if s.EmbeddingDim == 0 {
				s.EmbeddingDim = 256
			}
			if s.EmbeddingDim > 8192 {
				return fmt.Errorf("%s: simulator embeddingDim must be at most 8192", where)
			}
		case RuntimeOpenAI:
			if m.Lora == "" {
				m.Lora = LoraNone
			}
			if err := validateReplicas(m); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if err := validateKVEvents(m); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if m.UpstreamURL == "" {
				return fmt.Errorf("%s: runtime %q needs upstreamUrl or replicas", where, m.Runtime)
			}
			u, err := url.Parse(m.UpstreamURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s: upstreamUrl %q is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)", where, m.UpstreamURL)
			}
			m.UpstreamURL = strings.TrimRight(m.UpstreamURL, "/")
			if m.UpstreamModel == "" {
				m.UpstreamModel = m.Name
			}
			if m.Simulator != nil {
				return fmt.Errorf("%s: simulator settings are only for runtime %q", where, RuntimeSimulator)
			}
			if m.Lora == "" {
				m.Lora = LoraNone
			}
			if m.Lora != LoraNone && m.Lora != LoraVLLM && m.Lora != LoraResolver {
				return fmt.Errorf("%s: lora %q is not one of none, vllm, resolver", where, m.Lora)
			}
			if err := validateLoraTargets(m, u.Hostname()); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if m.APIKeyEnv != "" && os.Getenv(m.APIKeyEnv) == "" {
				return fmt.Errorf("%s: apiKeyEnv names %s, which is not set in the environment", where, m.APIKeyEnv)
			}
			if m.UpstreamMessages && !m.SupportsMessages {
				return fmt.Errorf("%s: upstreamMessages needs supportsMessages: true", where)
			}
			if m.TimeoutMs < 0 || m.FirstByteTimeoutMs < 0 || m.IdleTimeoutMs < 0 {
				return fmt.Errorf("%s: timeoutMs, firstByteTimeoutMs and idleTimeoutMs must not be negative", where)
			}
		default:
			return fmt.Errorf("%s: runtime %q is not one of %s, %s", where, m.Runtime, RuntimeSimulator, RuntimeOpenAI)
		}
		if m.Default && !m.Public {
			return fmt.Errorf("%s: the default model must be public", where)
		}
		if m.Default {
			defaults = append(defaults, i)
		}
		if m.Public && firstPublic < 0 {
			firstPublic = i
		}
	}
	if len(defaults) > 1 {
		return fmt.Errorf("%s: models[%d] %q and models[%d] %q are both default; mark exactly one", name,
			defaults[0], models[defaults[0]].Name, defaults[1], models[defaults[1]].Name)
	}
	if len(defaults) == 0 && firstPublic >= 0 {
		models[firstPublic].Default = true
	}
	return nil
}

// validateLoraTargets checks a model's loraTargets and normalises its URLs (docs/LORA.md).
func validateLoraTargets(m *ModelConfig, upstreamHost string) error {
	if m.LoraTargets == nil {
		return nil
	}
	// A copy: the URLs are normalised below, and the caller's config must stay as it was.
	t := &LoraTargets{Mode: m.LoraTargets.Mode, URLs: append([]string(nil), m.LoraTargets.URLs...)}
	if m.LoraTargets.URLs != nil && t.URLs == nil {
		t.URLs = []string{}
	}
	m.LoraTargets = t
	if m.Lora != LoraVLLM {
		return fmt.Errorf("loraTargets is only for lora: %s (lora is %q)", LoraVLLM, m.Lora)
	}
	if t.URLs == nil {
		if t.Mode != LoraTargetsDNS {
			return fmt.Errorf("loraTargets %q is not %s or a list of URLs", t.Mode, LoraTargetsDNS)
		}
		if net.ParseIP(upstreamHost) != nil {
			return fmt.Errorf("loraTargets: dns needs a host name in upstreamUrl (e.g. a headless Service), not the address %s", upstreamHost)
		}
		return nil
	}
	if len(t.URLs) == 0 {
		return fmt.Errorf("loraTargets lists no URLs")
	}
	seen := map[string]bool{}
	for i, raw := range t.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("loraTargets[%d] %q is not an http(s) URL (e.g. http://10.0.0.7:8000/v1)", i, raw)
		}
		t.URLs[i] = strings.TrimRight(raw, "/")
		if seen[t.URLs[i]] {
			return fmt.Errorf("loraTargets[%d] %q is listed twice", i, raw)
		}
		seen[t.URLs[i]] = true
	}
	return nil
}
