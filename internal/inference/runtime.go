// Package inference serves the catalog's base models: the models file, the embedded simulator, the
// OpenAI-compatible upstream proxy (chat relayed, other surfaces passed through), and the Registry that
// hands them to the edge. It owns every upstream answer: it reads upstream streams, maps upstream
// errors, and hands the edge chunks it has read, whatever the surface.
package inference

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
)

// Runtime answers chat completions for one base model. The edge parses and validates the request
// first, so a runtime trusts the Call it is given.
type Runtime interface {
	// Complete answers a non-streaming request.
	Complete(ctx context.Context, c *Call) (*Completion, error)
	// Stream starts a streaming answer; the caller must Close the stream.
	Stream(ctx context.Context, c *Call) (Stream, error)
}

// Surface is a wire format of the edge that an upstream may serve itself; its value is the operation's
// path under the upstream's base URL.
type Surface string

// The surfaces of the edge.
const (
	SurfaceChat      Surface = "chat/completions"
	SurfaceMessages  Surface = "messages"
	SurfaceResponses Surface = "responses"
	// SurfaceCountTokens is Messages' count_tokens, passed through with Messages.
	SurfaceCountTokens Surface = "messages/count_tokens"
	// SurfaceResponsesInputTokens is the Responses API's input token count, passed through with Responses.
	SurfaceResponsesInputTokens Surface = "responses/input_tokens"
	// The extra routes a model may serve (the models file's routes).
	SurfaceEmbeddings  Surface = "embeddings"
	SurfaceCompletions Surface = "completions"
)

// PromptCounter is implemented by runtimes that know a call's prompt tokens exactly before its answer
// starts (the simulator, which counts them itself): a translated stream announces that count in its
// first event (the Messages API's message_start) instead of an estimate.
type PromptCounter interface {
	PromptTokens(c *Call) int
}

// PromptTokensOf is the prompt's token count that rt knows before answering c, else estimate.
func PromptTokensOf(rt Runtime, c *Call, estimate int) int {
	if pc, ok := rt.(PromptCounter); ok {
		return pc.PromptTokens(c)
	}
	return estimate
}

// Tokenizer is implemented by runtimes whose upstream may count a prompt's tokens (vLLM's
// /tokenize). body is a chat-form /tokenize request naming the client's model; ok is false when the
// upstream cannot count (it has no /tokenize, or failed), and the caller estimates instead.
type Tokenizer interface {
	Tokenize(ctx context.Context, c *Call, body []byte) (count int, ok bool)
}

// Passthrough is implemented by runtimes whose upstream may serve a surface itself. The request body
// (Call.Body) goes upstream with only its model renamed, and the answer comes back as the same
// Completion and Stream as a relayed chat answer, renamed for the served model: the edge writes,
// counts and records every surface alike, and never reads the upstream's bytes itself.
type Passthrough interface {
	// Passes reports whether the surface is passed through to the upstream.
	Passes(s Surface) bool
	// PassComplete answers a non-streamed request of the surface.
	PassComplete(ctx context.Context, s Surface, c *Call, header http.Header) (*Completion, error)
	// PassStream starts a streamed answer of the surface; the caller must Close the stream.
	PassStream(ctx context.Context, s Surface, c *Call, header http.Header) (Stream, error)
}

// Call is one validated chat completion request, addressed to a model of the catalog.
type Call struct {
	Model       string // the catalog id of the base model
	Served      string // the model name that responses carry (adapter name or base model)
	Adapter     string // artifact of the adapter to serve on top of the model ("" for none)
	AdapterName string

	// Body holds the request's top-level fields as sent; runtimes that forward the request may change
	// it (the model, stream options).
	Body map[string]json.RawMessage

	Messages     []Message
	MaxTokens    int // 0 when the request sets no limit
	Stream       bool
	IncludeUsage bool // the client asked for the final usage chunk
	// PromptUsage asks for the prompt's count in the stream's first chunk, where the upstream can give it
	// (ModelConfig.ContinuousUsage): a translated stream announces it before the first token. Relayed
	// chat streams never ask, so their clients get the chunks OpenAI sends.
	PromptUsage bool

	// RequestID is svc's id of the request, sent upstream as X-Request-Id.
	RequestID string
	// ID, when set, is the id an answer carries instead of the upstream's (the edge's chatcmpl- or, for
	// a passed-through Messages answer, msg_ and the run id's tail; docs/API.md "Ids are run ids"):
	// written in place of the upstream's in the answer, in every chat chunk and in message_start, and
	// the Chunk's and Completion's ID of a chat answer. Passed-through Responses keep the upstream's ids,
	// which its previous_response_id names.
	ID string
	// Hops is the HopHeader the call came with ("" from a caller that is not svc), sent on with this
	// process added: it refuses a call that comes back to it (Loop).
	Hops string
	// UpstreamRequestID is set by the runtime to the upstream's own id of the request, when it sent one.
	UpstreamRequestID string
	// Replica is set by the runtime to the replica (host:port) that answered, when the model has
	// replicas: the last one tried, after a retry.
	Replica string
	// RetriedFrom is set by the runtime to the replica that failed before any byte of its answer when
	// the call went once more to another (Replica, when that one answered).
	RetriedFrom string
}

// Message is the text of one chat message (content parts other than text are left out).
type Message struct {
	Role    string
	Content string
}

// Usage counts tokens the OpenAI way.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// ReasoningTokens are the completion tokens spent reasoning, where the upstream says
	// (completion_tokens_details.reasoning_tokens): what a translated answer reports as its reasoning.
	ReasoningTokens int `json:"-"`
	// CachedTokens are the prompt tokens the upstream's prefix cache held, where it says
	// (prompt_tokens_details.cached_tokens): what a fleet's affinity buys, and what a translated answer
	// reports as cache reads.
	CachedTokens int `json:"-"`
}

// Completion is a finished, non-streamed answer, of any surface.
type Completion struct {
	JSON         []byte // the answer sent to the client (a chat.completion, a Messages message), naming Call.Served
	ID           string
	Created      int64
	Content      string // its text (the first choice's, or the text blocks'), for svc's count when Usage is missing
	FinishReason string
	// Usage is what the upstream reported; a count of 0 is one it did not report (or reported malformed),
	// which the edge then counts itself.
	Usage Usage
}

// Stream yields the events of a streamed answer, of any surface: relayed chat chunks and the events of
// passed-through surfaces alike, each with its bytes for the client and what was read from them.
type Stream interface {
	// Next returns the next chunk, or io.EOF after the last one. The chunk is valid until the next call.
	// An upstream that fails mid-way (an error event, a cut connection) ends the stream with an *Error.
	Next() (*Chunk, error)
	Close() error
}

// Pender is implemented by streams that can tell whether the next chunk has already arrived. The
// edge then writes it in the same flush: events that arrive together leave together, which saves a
// system call per event under load without holding any event back.
type Pender interface {
	Pending() bool
}

// Chunk is one event of a streamed answer: a chat.completion.chunk, or an event of a passed-through
// surface.
type Chunk struct {
	// Event is the event's name on surfaces whose events are named (Messages); nil for chat chunks,
	// which are sent as unnamed events.
	Event []byte
	JSON  []byte // the event's data sent to the client, naming Call.Served
	// Last marks the surface's closing event (Messages' message_stop), after which the stream ends.
	Last bool

	// Chat chunks: what the edge needs to relay, translate and record them. ID is also the response's
	// id on a passed-through Responses stream's response.created event.
	ID      string
	Created int64
	Choices []ChunkChoice

	// Usage is what the upstream reported in this event: the final usage chunk of a chat stream (which
	// runtimes always request, so that runs can be counted; the edge forwards it only to clients that
	// asked for it), message_start and message_delta on Messages. A count of 0 is one it did not report.
	Usage *Usage
	// Deltas counts the pieces of generated content of a named event (a Messages content_block_delta);
	// chat chunks carry theirs in Choices. See Delivered.
	Deltas int
	// Finish is why the answer ended, on the named event that says so (Messages' message_delta); chat
	// chunks carry it in Choices. See FinishReason.
	Finish string
}

// ChunkChoice is the part of a chunk's choice that the edge needs to assemble or translate a stream.
type ChunkChoice struct {
	Index int
	Role  string
	// Reasoning is the delta's reasoning_content (or reasoning), from reasoning models.
	Reasoning    string
	Content      string
	FinishReason string
	// StopReason is vLLM's extra field naming the stop string that ended the answer, if one did.
	StopReason string
	ToolCalls  []ToolCallDelta
}

// ToolCallDelta is one fragment of a streamed tool call: the first fragment of a call carries its id and
// name, later ones only more of its arguments (a JSON text split anywhere).
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// UsageOnly reports whether the chunk is a chat stream's final usage chunk (no choices, only usage).
func (c *Chunk) UsageOnly() bool { return c.Event == nil && c.Usage != nil && len(c.Choices) == 0 }

// Delivered counts the pieces of generated content the chunk carried (text, reasoning, tool calls):
// about a token each, as inference servers stream them, for svc's count when usage is missing.
func (c *Chunk) Delivered() int {
	n := c.Deltas
	for i := range c.Choices {
		if c.Choices[i].Content != "" || c.Choices[i].Reasoning != "" || len(c.Choices[i].ToolCalls) > 0 {
			n++
		}
	}
	return n
}

// FinishReason is why the answer ended, on the event that says so: choice 0's finish_reason for chat
// chunks, stop_reason for Messages events; "" on other events.
func (c *Chunk) FinishReason() string {
	if c.Finish != "" {
		return c.Finish
	}
	for i := range c.Choices {
		if c.Choices[i].Index == 0 {
			return c.Choices[i].FinishReason
		}
	}
	return ""
}

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
