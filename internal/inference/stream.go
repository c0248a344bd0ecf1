package inference

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/sse"
)

// upstreamStream reads an upstream's server-sent events one at a time, for every surface: the relayed
// chat stream and passed-through surfaces alike. Each event is read once, in one pass with a cursor
// (each byte visited once, nested values included) instead of json.Unmarshal or a scan per field: this
// runs for every token of every stream. The surface decides what is read of an event (chat chunks
// here, Messages events in messages.go); the rest (the end of the stream, errors, draining the
// connection for reuse) is the same for all.
type upstreamStream struct {
	ctx     context.Context
	o       *openAI
	surface Surface
	body    io.ReadCloser
	rd      *sse.Reader
	served  []byte // the served model, JSON-encoded
	done    bool
	ended   bool // the stream's last event was read ("data: [DONE]", message_stop)
	chunk   Chunk
	out     []byte
	spare   []byte // a second buffer, for an event rewritten twice (message_start without a model)
	// id and created are read from a chat stream's first chunk: every chunk of a stream repeats them.
	// With Call.ID, id is svc's, and idJSON (it, JSON-encoded) replaces the upstream's in every chunk.
	id      string
	idJSON  []byte
	created int64
}

func (s *upstreamStream) Next() (*Chunk, error) {
	if s.done {
		return nil, io.EOF
	}
	ev, err := s.rd.Next()
	if err != nil {
		s.done = true
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
		replicaFailed(s.body) // cut after its headers: the replica's failure, though not retried
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, s.o.badAnswer("ended the stream early")
		}
		if errors.Is(err, sse.ErrTooLong) {
			return nil, s.o.badAnswer(fmt.Sprintf("sent a line or an event longer than %d MiB", sse.MaxLine>>20))
		}
		return nil, s.o.transportError(s.ctx, err)
	}
	if s.surface == SurfaceChat || s.surface == SurfaceCompletions {
		if ev.Done() {
			s.done, s.ended = true, true
			return nil, io.EOF
		}
	}
	data := ev.Data
	if len(data) == 0 || data[0] != '{' {
		s.done = true
		return nil, s.o.badAnswer("sent an invalid event")
	}
	switch s.surface {
	case SurfaceMessages:
		err = s.messagesEvent(data)
	case SurfaceResponses:
		err = s.responsesEvent(data)
	default:
		err = s.chatChunk(data)
	}
	if err != nil {
		s.done = true
		return nil, err
	}
	if s.chunk.Last {
		s.done, s.ended = true, true
	}
	return &s.chunk, nil
}

// chatChunk reads a chat.completion.chunk into s.chunk and renames its model. An error event (a chunk
// whose "error" is set) ends the stream with the upstream's error.
func (s *upstreamStream) chatChunk(data []byte) error {
	failed := false
	s.chunk = Chunk{ID: s.id, Created: s.created, Choices: s.chunk.Choices[:0]}
	model, id := [2]int{-1, -1}, [2]int{-1, -1}
	c := jsonx.NewCursor(data)
	c.Object(func(name []byte) {
		switch string(name) {
		case "error":
			failed = failed || c.Kind() != 'n'
		case "id":
			if s.idJSON != nil {
				if id[0] < 0 && c.Kind() == '"' {
					id[0], id[1] = c.Span()
				}
				return
			}
			if s.id == "" && s.chunk.ID == "" { // every chunk of a stream repeats the first one's
				s.chunk.ID = c.String()
			}
		case "created":
			if s.created == 0 && s.chunk.Created == 0 {
				s.chunk.Created = c.Int()
			}
		case "model":
			if model[0] < 0 && c.Kind() == '"' {
				model[0], model[1] = c.Span()
			}
		case "usage": // an object on the last chunk; OpenAI-style servers send null on the others
			if u, ok := readUsage(c, &openAIUsage); ok {
				usage := u // allocated only here, not for every chunk's null
				s.chunk.Usage = &usage
			}
		case "choices":
			c.Array(func() { s.chunk.Choices = append(s.chunk.Choices, chunkChoice(c)) })
		}
	})
	if failed {
		return s.o.upstreamError(http.StatusBadGateway, nil, data)
	}
	if s.id == "" {
		s.id = s.chunk.ID
	}
	if s.created == 0 {
		s.created = s.chunk.Created
	}
	// Rewrite the model (and svc's id) into a buffer reused across chunks.
	s.out = splice(s.out[:0], data, id, s.idJSON, model, s.served)
	s.chunk.JSON = s.out
	return nil
}

// usageNames are the names under which a surface reports its token counts.
type usageNames struct{ prompt, completion, total, completionDetails, promptDetails string }

var (
	openAIUsage    = usageNames{"prompt_tokens", "completion_tokens", "total_tokens", "completion_tokens_details", "prompt_tokens_details"}
	anthropicUsage = usageNames{"input_tokens", "output_tokens", "", "", ""}
)

// readUsage reads the usage object at the cursor. Its counts must be integers (or null, which leaves
// a count at 0), under the surface's names, matched exactly; other members (prompt_tokens_details,
// ...) are skipped. ok is false when the value is not an object or a count is not an integer: a
// malformed usage is not trusted (the call is then counted by svc itself).
func readUsage(c *jsonx.Cursor, names *usageNames) (u Usage, ok bool) {
	if c.Kind() != '{' {
		c.Raw()
		return Usage{}, false
	}
	ok = true
	c.Object(func(name []byte) {
		var count *int
		switch string(name) {
		case names.prompt:
			count = &u.PromptTokens
		case names.completion:
			count = &u.CompletionTokens
		case names.total:
			if names.total == "" {
				return
			}
			count = &u.TotalTokens
		case names.promptDetails:
			// {cached_tokens, ...}: the prompt tokens the upstream's prefix cache held (vLLM's, a fleet's
			// replica); an odd value leaves it at 0.
			if names.promptDetails == "" || c.Kind() != '{' {
				return
			}
			c.Object(func(name []byte) {
				if string(name) == "cached_tokens" {
					if n, isInt := jsonx.Integer(c.Raw()); isInt && n >= 0 && n == int64(int(n)) {
						u.CachedTokens = int(n)
					}
				}
			})
			return
		case names.completionDetails:
			if names.completionDetails == "" {
				return
			}
			// {reasoning_tokens, ...}: an odd value here leaves the count at 0, not the usage untrusted.
			if c.Kind() != '{' {
				return
			}
			c.Object(func(name []byte) {
				if string(name) == "reasoning_tokens" {
					if n, isInt := jsonx.Integer(c.Raw()); isInt && n >= 0 && n == int64(int(n)) {
						u.ReasoningTokens = int(n)
					}
				}
			})
			return
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
	if names.total == "" && ok {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
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
		case "text": // a text completion's chunk (/v1/completions)
			ch.Content = c.String()
		case "delta":
			c.Object(func(name []byte) {
				switch string(name) {
				case "content":
					ch.Content = c.String()
				case "reasoning_content", "reasoning": // reasoning models (vLLM's reasoning parsers)
					if r := c.String(); r != "" {
						ch.Reasoning = r
					}
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

// Pending reports whether a whole event is already buffered.
func (s *upstreamStream) Pending() bool { return s.rd != nil && s.rd.Pending() }

// Close ends the stream. A stream read to its last event is drained first, so that its connection is
// reused.
func (s *upstreamStream) Close() error {
	if s.rd == nil {
		return nil // closed before
	}
	s.done = true
	if s.ended {
		drain(s.body)
	}
	err := s.body.Close()
	s.rd.Release()
	s.rd = nil
	return err
}
