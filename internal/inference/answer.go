package inference

import (
	"encoding/json"
	"strings"

	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/jsonx"
)

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
