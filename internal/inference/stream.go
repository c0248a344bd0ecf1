package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/svcdev/svc/internal/edgewire"
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

// A streamed answer as its run records it: the chunks read above, assembled into the object a
// client that did not stream would have read (Answer).

// MaxAnswerBytes caps what an assembled answer keeps of a stream for its run: half the shipper's cap on
// one run (edgewire.MaxRunBytes), the other half being the request's (at most 4 MiB) and the JSON
// around both, so that the run ships with its transcript. Past it the answer keeps what it has, reads
// nothing more of the stream's text, and is recorded with "truncated": true beside its content; the
// caller still gets every byte, relayed as it came.
const MaxAnswerBytes = edgewire.MaxRunBytes / 2

// kept counts the bytes an answer keeps, up to MaxAnswerBytes.
type kept struct {
	held      int
	truncated bool
}

// take reports whether n more bytes may be kept, and counts them when they may.
func (k *kept) take(n int) bool {
	if n == 0 {
		return true
	}
	if k.truncated || k.held+n > MaxAnswerBytes {
		k.truncated = true
		return false
	}
	k.held += n
	return true
}

// Answer rebuilds a streamed answer from its chunks, for the run's record: the object a client that did
// not stream would have received (a chat.completion, a Messages message), partial when the stream was
// cut, and marked "truncated": true past MaxAnswerBytes. The edge feeds it the chunks it relays when
// the run is kept.
type Answer interface {
	Add(ch *Chunk)
	// JSON returns the answer so far with usage, the request's counts as the edge settled them, and
	// errJSON, when set, the error that ended it (in the surface's envelope) beside its content.
	JSON(usage Usage, errJSON []byte) []byte
}

// NewAnswer returns the assembler of a streamed answer of the surface, named for the served model.
func NewAnswer(s Surface, served string) Answer {
	switch s {
	case SurfaceMessages:
		return &messageAnswer{served: served}
	case SurfaceResponses:
		return &responseAnswer{}
	}
	return &chatAnswer{served: served, text: s == SurfaceCompletions}
}

// WithError returns a recorded answer object with the error that ended it beside its content: the
// "error" member of errJSON's envelope (or errJSON itself) as the answer's "error".
func WithError(answer, errJSON []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(answer, &m) != nil || m == nil {
		return errJSON
	}
	if e := errorMember(errJSON); e != nil {
		m["error"] = e
	}
	return EncodeObject(m)
}

// errorMember is the "error" member of an error envelope, or the envelope itself.
func errorMember(errJSON []byte) json.RawMessage {
	if len(errJSON) == 0 {
		return nil
	}
	if e := jsonx.Field(errJSON, "error"); e != nil {
		return e
	}
	return errJSON
}

// chatAnswer assembles a chat.completion from its chunks: each choice's role, text, finish reason and
// tool calls. Choices and tool calls are kept by pointer, so that growing their lists (n >= 2, parallel
// tool calls arriving interleaved by index) never copies a strings.Builder in use.
type chatAnswer struct {
	kept
	served  string
	text    bool // a text completion (/v1/completions): choices hold text, not messages
	id      string
	created int64
	choices []*assembledChoice
}

type assembledChoice struct {
	role      string
	reasoning strings.Builder
	content   strings.Builder
	finish    string
	toolCalls []*assembledToolCall
}

type assembledToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	args strings.Builder
}

// maxIndex bounds the choices of an answer and the tool calls of a choice that are kept (an upstream
// could name any index).
const maxIndex = 128

func (a *chatAnswer) Add(ch *Chunk) {
	if a.id == "" && a.take(len(ch.ID)) {
		a.id, a.created = ch.ID, ch.Created
	}
	for _, c := range ch.Choices {
		if c.Index < 0 || c.Index >= maxIndex {
			continue
		}
		for len(a.choices) <= c.Index {
			a.choices = append(a.choices, &assembledChoice{})
		}
		ac := a.choices[c.Index]
		if c.Role != "" && a.take(len(c.Role)) {
			ac.role = c.Role
		}
		if a.take(len(c.Content)) {
			ac.content.WriteString(c.Content)
		}
		if a.take(len(c.Reasoning)) {
			ac.reasoning.WriteString(c.Reasoning)
		}
		if c.FinishReason != "" && a.take(len(c.FinishReason)) {
			ac.finish = c.FinishReason
		}
		for _, tc := range c.ToolCalls {
			if tc.Index < 0 || tc.Index >= maxIndex {
				continue
			}
			for len(ac.toolCalls) <= tc.Index {
				ac.toolCalls = append(ac.toolCalls, &assembledToolCall{Type: "function"})
			}
			call := ac.toolCalls[tc.Index]
			if tc.ID != "" && a.take(len(tc.ID)) {
				call.ID = tc.ID
			}
			if tc.Name != "" && a.take(len(tc.Name)) {
				call.Function.Name = tc.Name
			}
			if a.take(len(tc.Arguments)) {
				call.args.WriteString(tc.Arguments)
			}
		}
	}
}

type assembledMessage struct {
	Role             string               `json:"role"`
	Content          *string              `json:"content"`
	ReasoningContent string               `json:"reasoning_content,omitempty"`
	ToolCalls        []*assembledToolCall `json:"tool_calls,omitempty"`
}

// assembledText is a text completion's choice.
type assembledText struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
}

type assembledCompletionChoice struct {
	Index        int              `json:"index"`
	Message      assembledMessage `json:"message"`
	FinishReason *string          `json:"finish_reason"`
}

type assembledCompletion struct {
	ID      string                      `json:"id"`
	Object  string                      `json:"object"`
	Created int64                       `json:"created"`
	Model   string                      `json:"model"`
	Choices []assembledCompletionChoice `json:"choices"`
	Usage   Usage                       `json:"usage"`
	Error   json.RawMessage             `json:"error,omitempty"`
	// Truncated marks an answer whose record stopped at MaxAnswerBytes.
	Truncated bool `json:"truncated,omitempty"`
}

func (a *chatAnswer) JSON(usage Usage, errJSON []byte) []byte {
	if a.text {
		return a.textJSON(usage, errJSON)
	}
	out := assembledCompletion{ID: a.id, Object: "chat.completion", Created: a.created, Model: a.served, Usage: usage,
		Error: errorMember(errJSON), Truncated: a.truncated}
	out.Choices = make([]assembledCompletionChoice, len(a.choices))
	for i, c := range a.choices {
		role := c.role
		if role == "" {
			role = "assistant"
		}
		msg := assembledMessage{Role: role, ReasoningContent: c.reasoning.String()}
		if text := c.content.String(); text != "" || len(c.toolCalls) == 0 {
			msg.Content = &text
		}
		for j := range c.toolCalls {
			c.toolCalls[j].Function.Arguments = c.toolCalls[j].args.String()
		}
		msg.ToolCalls = c.toolCalls
		var finish *string
		if c.finish != "" {
			finish = &c.finish
		}
		out.Choices[i] = assembledCompletionChoice{Index: i, Message: msg, FinishReason: finish}
	}
	b, _ := json.Marshal(out)
	return b
}

// textJSON is the text_completion a streamed text completion would have been.
func (a *chatAnswer) textJSON(usage Usage, errJSON []byte) []byte {
	out := struct {
		ID        string          `json:"id"`
		Object    string          `json:"object"`
		Created   int64           `json:"created"`
		Model     string          `json:"model"`
		Choices   []assembledText `json:"choices"`
		Usage     Usage           `json:"usage"`
		Error     json.RawMessage `json:"error,omitempty"`
		Truncated bool            `json:"truncated,omitempty"`
	}{ID: a.id, Object: "text_completion", Created: a.created, Model: a.served, Choices: make([]assembledText, len(a.choices)),
		Usage: usage, Error: errorMember(errJSON), Truncated: a.truncated}
	for i, c := range a.choices {
		var finish *string
		if c.finish != "" {
			finish = &c.finish
		}
		out.Choices[i] = assembledText{Index: i, Text: c.content.String(), FinishReason: finish}
	}
	b, _ := json.Marshal(out)
	return b
}

// messageAnswer assembles a Messages message from its stream events: message_start's message, each
// content block (text, thinking, tool use with its input), the stop reason.
type messageAnswer struct {
	kept
	served  string
	start   []byte // message_start's message
	blocks  []*assembledBlock
	stop    json.RawMessage
	stopSeq json.RawMessage
}

type assembledBlock struct {
	start     []byte // content_block_start's content_block
	text      []byte // text or thinking, as it arrived
	signature []byte
	input     []byte // a tool use's input JSON, as it arrived
}

// maxBlocks bounds the blocks an assembled message keeps (an upstream could name any index).
const maxBlocks = 1024

func (a *messageAnswer) Add(ch *Chunk) {
	var typ string
	index := -1
	var message, block, text, partial, signature, stop, stopSeq []byte
	c := jsonx.NewCursor(ch.JSON)
	c.Object(func(name []byte) {
		switch string(name) {
		case "type":
			typ = c.String()
		case "index":
			if n, ok := jsonx.Integer(c.Raw()); ok && n >= 0 && n < maxBlocks {
				index = int(n)
			}
		case "message":
			message = c.Raw()
		case "content_block":
			block = c.Raw()
		case "delta":
			c.Object(func(name []byte) {
				switch string(name) {
				case "text", "thinking":
					text = []byte(c.String())
				case "partial_json":
					partial = []byte(c.String())
				case "signature":
					signature = []byte(c.String())
				case "stop_reason":
					stop = c.Raw()
				case "stop_sequence":
					stopSeq = c.Raw()
				}
			})
		}
	})
	if c.Bad() {
		return
	}
	switch typ {
	case "message_start":
		if len(message) > 0 && message[0] == '{' && json.Valid(message) && a.take(len(message)) {
			a.start = append(a.start[:0], message...)
		}
	case "content_block_start":
		if index >= 0 && len(block) > 0 && block[0] == '{' && json.Valid(block) && a.take(len(block)) {
			for len(a.blocks) <= index {
				a.blocks = append(a.blocks, nil)
			}
			a.blocks[index] = &assembledBlock{start: append([]byte(nil), block...)}
		}
	case "content_block_delta":
		if index < 0 || index >= len(a.blocks) || a.blocks[index] == nil || !a.take(len(text)+len(partial)+len(signature)) {
			return
		}
		b := a.blocks[index]
		b.text = append(b.text, text...)
		b.input = append(b.input, partial...)
		b.signature = append(b.signature, signature...)
	case "message_delta":
		if stop != nil && json.Valid(stop) && a.take(len(stop)) {
			a.stop = append(json.RawMessage(nil), stop...)
		}
		if stopSeq != nil && json.Valid(stopSeq) && a.take(len(stopSeq)) {
			a.stopSeq = append(json.RawMessage(nil), stopSeq...)
		}
	}
}

func (a *messageAnswer) JSON(usage Usage, errJSON []byte) []byte {
	msg := jsonx.Object(a.start)
	if msg == nil {
		msg = map[string]json.RawMessage{"type": json.RawMessage(`"message"`), "role": json.RawMessage(`"assistant"`)}
	}
	msg["model"] = jsonx.AppendString(nil, a.served)
	blocks := make([]json.RawMessage, 0, len(a.blocks))
	for _, b := range a.blocks {
		if b != nil {
			blocks = append(blocks, b.render())
		}
	}
	msg["content"], _ = json.Marshal(blocks)
	if a.stop != nil {
		msg["stop_reason"] = a.stop
	}
	if a.stopSeq != nil {
		msg["stop_sequence"] = a.stopSeq
	}
	msg["usage"], _ = json.Marshal(struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}{usage.PromptTokens, usage.CompletionTokens})
	if e := errorMember(errJSON); e != nil {
		msg["error"] = e
	}
	if a.truncated {
		msg["truncated"] = json.RawMessage("true")
	}
	return EncodeObject(msg)
}

// render returns the block as the message holds it: its start with what the deltas added.
func (b *assembledBlock) render() json.RawMessage {
	f := jsonx.Object(b.start)
	if f == nil {
		f = map[string]json.RawMessage{}
	}
	typ := jsonx.String(f["type"])
	switch {
	case typ == "tool_use" || typ == "server_tool_use" || b.input != nil:
		if b.input != nil {
			if json.Valid(b.input) {
				f["input"] = b.input
			} else {
				f["input"], _ = json.Marshal(string(b.input)) // cut mid-way: keep what arrived
			}
		}
	case typ == "thinking":
		f["thinking"], _ = json.Marshal(jsonx.String(f["thinking"]) + string(b.text))
		if b.signature != nil {
			f["signature"], _ = json.Marshal(string(b.signature))
		}
	default:
		if b.text != nil || typ == "text" {
			f["text"], _ = json.Marshal(jsonx.String(f["text"]) + string(b.text))
		}
	}
	return EncodeObject(f)
}
