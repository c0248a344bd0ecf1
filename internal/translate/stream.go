package translate

import (
	"encoding/json"
	"strconv"

	"github.com/svcdev/svc/internal/jsonx"
)

// Stream translates a chat.completion.chunk stream into Anthropic stream events, one chunk at a time:
//
//	message_start, ping,
//	for each block: content_block_start, content_block_delta..., content_block_stop,
//	message_delta (stop_reason, stop_sequence, usage), message_stop.
//
// Blocks are thinking (from the upstream's reasoning, when the request asked for thinking), text
// (from delta.content) and tool_use (one per tool call), indexed from 0 in the order they start, one
// open at a time (the assembler's rules, assemble.go). A thinking block streams thinking_delta
// deltas, then a signature_delta just before its content_block_stop.
//
// A Stream is not safe for concurrent use.
type Stream struct {
	asm      assembler
	model    string
	info     *RequestInfo
	id       string
	started  bool
	finished bool
	start    int     // input tokens announced in message_start
	ev       []Event // events of the chunk being translated
}

// NewStream begins the translation of one streamed answer named model. inputTokensEstimate is the
// input token count announced in message_start when the first chunk carries no usage (see
// RequestInfo.InputTokensEstimate).
func NewStream(model string, info *RequestInfo, inputTokensEstimate int) *Stream {
	if info == nil {
		info = &RequestInfo{}
	}
	s := &Stream{model: model, info: info, id: messageID(""), start: inputTokensEstimate}
	s.asm = assembler{sink: s, reasoning: info.Thinking, calls: map[int]*streamBlock{}}
	return s
}

// StreamChunk is what a translation reads of one chat completion chunk: the edge's runtime has read
// the chunk already (to relay and count it), and passes what it read to Add.
type StreamChunk struct {
	ID      string
	Choices []StreamChoice
	Usage   *Usage // the upstream's usage (InputTokens: prompt, OutputTokens: completion), when sent
}

// StreamChoice is one choice of a chunk: its delta and, on its last chunk, why it finished.
type StreamChoice struct {
	Index        int
	Reasoning    string // the delta's reasoning_content (or reasoning)
	Content      string
	ToolCalls    []StreamToolCall
	FinishReason string
	StopReason   string // vLLM's stop_reason when it is a string: the stop sequence that ended the answer
}

// StreamToolCall is one fragment of a streamed tool call.
type StreamToolCall struct {
	Index               int
	ID, Name, Arguments string
}

// Add translates one chunk. The first chunk also yields message_start and ping. An error means the
// upstream sent something that cannot be translated; its message is safe to show. The events
// returned with an error come before the problem and are to be sent first; then, if Started, the
// stream ends with an error event, else the answer is an error status.
func (s *Stream) Add(c *StreamChunk) ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	s.ev = s.ev[:0] // the slice is reused: events are sent before the next chunk is added
	if !s.started {
		if c.ID != "" {
			s.id = messageID(c.ID)
		}
		if c.Usage != nil {
			s.start = c.Usage.InputTokens
		}
		s.begin()
	}
	if c.Usage != nil {
		u := *c.Usage
		s.asm.upstream = &u
	}
	for i := range c.Choices {
		if err := s.asm.add(&c.Choices[i]); err != nil {
			return s.ev, err
		}
	}
	return s.ev, nil
}

func (s *Stream) begin() {
	s.started = true
	s.ev = append(s.ev, event("message_start", struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}{"message_start", message{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []any{},
		Usage: usage{InputTokens: s.start}}}))
	s.ev = append(s.ev, Event{Name: "ping", Data: []byte(`{"type":"ping"}`)})
}

func (s *Stream) openBlock(b *streamBlock) {
	var cb any
	switch b.kind {
	case kindText:
		cb = textBlock{Type: "text", Text: ""}
	case kindThinking:
		cb = thinkingBlock{Type: "thinking"}
	default:
		cb = toolUseBlock{Type: "tool_use", ID: b.id, Name: b.name, Input: json.RawMessage("{}")}
	}
	s.ev = append(s.ev, event("content_block_start", struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}{"content_block_start", b.index, cb}))
}

func (s *Stream) deltaBlock(b *streamBlock, part string) {
	var delta any
	switch b.kind {
	case kindText:
		// The event of nearly every chunk, written by hand: encoding/json's reflection would cost more
		// than the rest of the translation.
		d := make([]byte, 0, 80+len(part))
		d = append(d, `{"type":"content_block_delta","index":`...)
		d = strconv.AppendInt(d, int64(b.index), 10)
		d = append(d, `,"delta":{"type":"text_delta","text":`...)
		d = jsonx.AppendString(d, part)
		s.ev = append(s.ev, Event{Name: "content_block_delta", Data: append(d, "}}"...)})
		return
	case kindThinking:
		if s.info.ThinkingOmitted {
			return
		}
		delta = struct {
			Type     string `json:"type"`
			Thinking string `json:"thinking"`
		}{"thinking_delta", part}
	default:
		delta = struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		}{"input_json_delta", part}
	}
	s.blockDelta(b.index, delta)
}

func (s *Stream) blockDelta(index int, delta any) {
	s.ev = append(s.ev, event("content_block_delta", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}{"content_block_delta", index, delta}))
}

// closeBlock ends the open block b. A thinking block gets its signature first. A tool call's
// arguments must form a JSON object by then, unless the answer was cut at max_tokens (cut), when the
// client gets what there is, as from Anthropic.
func (s *Stream) closeBlock(b *streamBlock, cut bool) error {
	switch b.kind {
	case kindTool:
		if !cut {
			if _, err := toolInput([]byte(b.content.String()), b.name, false); err != nil {
				return err
			}
		}
	case kindThinking:
		s.blockDelta(b.index, struct {
			Type      string `json:"type"`
			Signature string `json:"signature"`
		}{"signature_delta", s.info.sign(b.content.String())})
	}
	s.ev = append(s.ev, Event{Name: "content_block_stop",
		Data: append(strconv.AppendInt([]byte(`{"type":"content_block_stop","index":`), int64(b.index), 10), '}')})
	return nil
}

// Finish ends the translation after the upstream's last chunk: it closes the blocks still open (in
// order, sending what was buffered) and sends message_delta (stop_reason, stop_sequence, usage) and
// message_stop, preceded by message_start if no chunk came. An error means a tool call cannot be
// given to the client (arguments not a JSON object, or no name): the events returned with it are to
// be sent, then an error event instead of message_delta and message_stop. Calls after the first
// return nothing.
func (s *Stream) Finish() ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	s.finished = true
	s.ev = nil
	if !s.started {
		s.begin()
	}
	if err := s.asm.end(); err != nil {
		return s.ev, err
	}
	reason, seq := s.stop()
	u := s.Usage()
	s.ev = append(s.ev, event("message_delta", messageDelta{Type: "message_delta", Delta: stopDelta{reason, seq},
		Usage: messageUsage(u)}))
	s.ev = append(s.ev, Event{Name: "message_stop", Data: []byte(`{"type":"message_stop"}`)})
	return s.ev, nil
}

type messageDelta struct {
	Type  string    `json:"type"`
	Delta stopDelta `json:"delta"`
	Usage usage     `json:"usage"`
}

type stopDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

func (s *Stream) stop() (string, *string) {
	return stopReason(s.asm.finish, s.asm.matched, s.info, s.asm.tools())
}

// Usage returns the upstream's usage if it sent any; otherwise the input tokens announced in
// message_start and, as output tokens, the number of upstream deltas that carried reasoning or text,
// started a tool call or carried tool arguments.
func (s *Stream) Usage() Usage { return s.asm.usage(s.start) }

// Message returns the message assembled so far, complete or partial (for run history): every block
// received, including content not sent yet; stop_reason and stop_sequence stay null until Finish. A
// tool call whose arguments do not form a JSON object (a stream cut short) has them as a JSON string
// in input, so that the run keeps what the upstream sent.
func (s *Stream) Message() []byte {
	m := message{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []any{}}
	for _, b := range s.asm.blocks {
		switch b.kind {
		case kindText:
			m.Content = append(m.Content, textBlock{Type: "text", Text: b.content.String()})
		case kindThinking:
			m.Content = append(m.Content, s.info.thinkingBlock(b.content.String()))
		default:
			input, err := toolInput([]byte(b.content.String()), b.name, false)
			if err != nil {
				input, _ = json.Marshal(b.content.String())
			}
			m.Content = append(m.Content, toolUseBlock{Type: "tool_use", ID: b.id, Name: b.name, Input: input})
		}
	}
	if s.finished {
		reason, seq := s.stop()
		m.StopReason, m.StopSequence = &reason, seq
	}
	u := s.Usage()
	m.Usage = messageUsage(u)
	out, _ := json.Marshal(m)
	return out
}

func event(name string, v any) Event {
	b, _ := json.Marshal(v)
	return Event{Name: name, Data: b}
}
