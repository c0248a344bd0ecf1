// Package runtime serves chat completions for the catalog's base models: the models file, the embedded
// simulator, the OpenAI-compatible upstream proxy, and the Registry that hands them to the edge.
package inference

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Runtime answers chat completions for one base model. The edge parses and validates the request
// first, so a runtime trusts the Call it is given.
type Runtime interface {
	// Complete answers a non-streaming request.
	Complete(ctx context.Context, c *Call) (*Completion, error)
	// Stream starts a streaming answer; the caller must Close the stream.
	Stream(ctx context.Context, c *Call) (Stream, error)
}

// MessagesProxy is implemented by runtimes whose upstream may serve the Anthropic Messages API itself.
type MessagesProxy interface {
	// ServesMessages reports whether /v1/messages is passed through to the upstream.
	ServesMessages() bool
	// ProxyMessages forwards a Messages request (body already naming the upstream model) and returns
	// the upstream's answer, whatever its status; the caller closes the body.
	ProxyMessages(ctx context.Context, c *Call, header http.Header) (*http.Response, error)
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

	// RequestID is svc's id of the request, sent upstream as X-Request-Id.
	RequestID string
	// UpstreamRequestID is set by the runtime to the upstream's own id of the request, when it sent one.
	UpstreamRequestID string
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
}

// Completion is a finished, non-streamed answer.
type Completion struct {
	JSON         []byte // the chat.completion object sent to the client, naming Call.Served
	ID           string
	Created      int64
	Content      string // text of the first choice
	FinishReason string
	Usage        Usage
}

// Stream yields the chunks of a streamed answer.
type Stream interface {
	// Next returns the next chunk, or io.EOF after the last one. The chunk is valid until the next call.
	Next() (*Chunk, error)
	Close() error
}

// Pender is implemented by streams that can tell whether the next chunk has already arrived. The
// edge then writes it in the same flush: events that arrive together leave together, which saves a
// system call per event under load without holding any event back.
type Pender interface {
	Pending() bool
}

// Chunk is one chat.completion.chunk.
type Chunk struct {
	JSON    []byte // the chunk sent to the client, naming Call.Served
	ID      string
	Created int64
	Choices []ChunkChoice
	// Usage is set on the final usage chunk. Runtimes always produce it so that runs can be counted;
	// the edge forwards it only to clients that asked for it.
	Usage *Usage
}

// ChunkChoice is the part of a chunk's choice that the edge needs to assemble or translate a stream.
type ChunkChoice struct {
	Index        int
	Role         string
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

// UsageOnly reports whether the chunk is the final usage chunk (no choices, only usage).
func (c *Chunk) UsageOnly() bool { return c.Usage != nil && len(c.Choices) == 0 }

// Error is a failure to relay to the client with its status: an upstream that answered with an error,
// could not be reached (502) or took too long (504).
type Error struct {
	Status  int
	Type    string // OpenAI error type, e.g. "invalid_request_error", "api_error"
	Code    string
	Param   string
	Message string
	// RetryAfter and UpstreamRequestID are the upstream's Retry-After and request id headers, relayed.
	RetryAfter        string
	UpstreamRequestID string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Error codes of failures that the runtime itself detects.
const (
	CodeUpstreamUnavailable = "upstream_unavailable"
	CodeUpstreamTimeout     = "upstream_timeout"
	CodeUpstreamError       = "upstream_error"
	CodeUpstreamAuth        = "upstream_auth_failed"
)
