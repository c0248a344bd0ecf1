package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Stream translates a chat.completion.chunk stream into Anthropic stream events, one chunk at a time:
//
//	message_start, ping,
//	for each block: content_block_start, content_block_delta..., content_block_stop,
//	message_delta (stop_reason, stop_sequence, usage), message_stop.
//
// Blocks are text (from delta.content) and tool_use (one per tool call) and are indexed from 0 in the
// order they start. Anthropic streams one block at a time, and clients (the SDK's MessageStream among
// them) are written for that, so exactly one block is open at any moment:
//
//   - Text and tool calls open blocks in the order they first appear; content for the open block is
//     sent at once, one delta per upstream delta.
//   - A block closes when content for a later block arrives and the open block is complete: text is
//     complete at once; a tool call when its arguments so far form a valid JSON value. So calls that
//     follow each other (what vLLM and OpenAI send) stream live.
//   - When calls interleave (a later call starts while the open call's arguments are still
//     incomplete), the later call's content is buffered and sent as one delta when its block opens,
//     after the open call completes or the stream finishes.
//   - A tool block opens only once its name is known.
//   - A delta carrying a new id for an index already in use starts a new call (some servers reuse
//     index 0 for every call).
//
// Only choice 0 is translated. A Stream is not safe for concurrent use.
type Stream struct {
	model    string
	info     *RequestInfo
	id       string
	started  bool
	finished bool

	blocks []*streamBlock
	live   *streamBlock         // the open block, nil between blocks
	calls  map[int]*streamBlock // the latest tool call of each upstream index
	opened int                  // blocks started so far: the next block's index

	finish   string
	matched  *string
	start    int            // input tokens announced in message_start
	upstream *upstreamUsage // the upstream's latest usage, nil until it sends one
	counted  int            // deltas that carried content, for usage without upstream usage
}

type streamBlock struct {
	tool     bool
	index    int // Anthropic index, once started
	started  bool
	closed   bool
	content  strings.Builder // text, or a tool call's arguments
	sent     int             // bytes of content already sent in deltas
	id, name string
}

// NewStream begins the translation of one streamed answer named model. inputTokensEstimate is the
// input token count announced in message_start when the first chunk carries no usage (see
// RequestInfo.InputTokensEstimate).
func NewStream(model string, info *RequestInfo, inputTokensEstimate int) *Stream {
	if info == nil {
		info = &RequestInfo{}
	}
	return &Stream{model: model, info: info, id: messageID(""), start: inputTokensEstimate, calls: map[int]*streamBlock{}}
}

// The parts of a chunk that translate.
type chunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string          `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *upstreamUsage  `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// StreamChunk is what a translation reads of one chat completion chunk. Callers that have read the
// chunk already (the edge's runtime has, to relay and count it) pass it to Add; Chunk reads it from
// the chunk's JSON.
type StreamChunk struct {
	ID      string
	Choices []StreamChoice
	Usage   *Usage // the upstream's usage (InputTokens: prompt, OutputTokens: completion), when sent
}

// StreamChoice is one choice of a chunk: its delta and, on its last chunk, why it finished.
type StreamChoice struct {
	Index        int
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

// Chunk translates one chunk: the JSON data of one server-sent event, not "[DONE]". See Add.
func (s *Stream) Chunk(data []byte) ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("the upstream sent a stream chunk that is not valid: %v", err)
	}
	if !isNull(c.Error) {
		return nil, fmt.Errorf("the upstream failed: %s", upstreamErrorMessage(c.Error))
	}
	sc := StreamChunk{ID: c.ID}
	if c.Usage != nil {
		sc.Usage = &Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		choice := StreamChoice{Index: ch.Index, Content: ch.Delta.Content, FinishReason: ch.FinishReason}
		if m := matchedStop(ch.StopReason); m != nil {
			choice.StopReason = *m
		}
		for _, tc := range ch.Delta.ToolCalls {
			choice.ToolCalls = append(choice.ToolCalls, StreamToolCall{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		sc.Choices = append(sc.Choices, choice)
	}
	return s.Add(&sc)
}

// Add translates one chunk. The first chunk also yields message_start and ping. An error means the
// upstream sent something that cannot be translated; its message is safe to show. The events
// returned with an error come before the problem and are to be sent first; then, if Started, the
// stream ends with an error event, else the answer is an error status.
func (s *Stream) Add(c *StreamChunk) ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	var ev []Event
	if !s.started {
		if c.ID != "" {
			s.id = messageID(c.ID)
		}
		if c.Usage != nil {
			s.start = c.Usage.InputTokens
		}
		ev = s.begin(ev)
	}
	if c.Usage != nil {
		s.upstream = &upstreamUsage{PromptTokens: c.Usage.InputTokens, CompletionTokens: c.Usage.OutputTokens}
	}
	var err error
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.Content != "" {
			s.counted++
			ev, err = s.add(ev, s.textBlock(), ch.Content)
			if err != nil {
				return ev, err
			}
		}
		for _, tc := range ch.ToolCalls {
			b := s.calls[tc.Index]
			if b == nil || (tc.ID != "" && b.id != "" && tc.ID != b.id) {
				b = &streamBlock{tool: true}
				s.calls[tc.Index] = b
				s.blocks = append(s.blocks, b)
				s.counted++
			} else if tc.Arguments != "" {
				s.counted++
			}
			if b.id == "" && !b.started {
				b.id = tc.ID
			}
			if b.name == "" && !b.started {
				b.name = tc.Name
			}
			if b.closed {
				if strings.TrimSpace(tc.Arguments) != "" {
					return ev, fmt.Errorf("%w: the upstream sent more arguments for tool %q after they were complete", ErrInvalidToolArguments, b.name)
				}
				continue
			}
			ev, err = s.add(ev, b, tc.Arguments)
			if err != nil {
				return ev, err
			}
		}
		if ch.FinishReason != "" {
			s.finish = ch.FinishReason
			s.matched = nil
			if ch.StopReason != "" {
				stop := ch.StopReason
				s.matched = &stop
			}
		}
	}
	return ev, nil
}

// textBlock returns the block that new text goes to: the last block if it is text, else a new one.
func (s *Stream) textBlock() *streamBlock {
	if n := len(s.blocks); n > 0 && !s.blocks[n-1].tool {
		return s.blocks[n-1]
	}
	b := &streamBlock{}
	s.blocks = append(s.blocks, b)
	return b
}

// add appends content to b and sends what can be sent.
func (s *Stream) add(ev []Event, b *streamBlock, content string) ([]Event, error) {
	b.content.WriteString(content)
	return s.pump(ev)
}

// pump opens, feeds and closes blocks as far as the rules in Stream's comment allow.
func (s *Stream) pump(ev []Event) ([]Event, error) {
	for {
		if s.live == nil {
			b := s.firstOpen()
			if b == nil || (b.tool && b.name == "") {
				return ev, nil
			}
			ev = s.open(ev, b)
		}
		ev = s.flush(ev, s.live)
		if s.live == s.blocks[len(s.blocks)-1] || !s.complete(s.live) {
			return ev, nil
		}
		var err error
		if ev, err = s.close(ev, s.live, false); err != nil {
			return ev, err
		}
	}
}

// firstOpen returns the first block not closed yet.
func (s *Stream) firstOpen() *streamBlock {
	for _, b := range s.blocks {
		if !b.closed {
			return b
		}
	}
	return nil
}

// complete reports whether no more content is expected for b.
func (s *Stream) complete(b *streamBlock) bool {
	if !b.tool {
		return true
	}
	args := bytes.TrimSpace([]byte(b.content.String()))
	return len(args) > 0 && json.Valid(args)
}

func (s *Stream) begin(ev []Event) []Event {
	s.started = true
	ev = append(ev, event("message_start", struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}{"message_start", message{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []any{},
		Usage: usage{InputTokens: s.start}}}))
	return append(ev, event("ping", struct {
		Type string `json:"type"`
	}{"ping"}))
}

func (s *Stream) open(ev []Event, b *streamBlock) []Event {
	b.started, b.index = true, s.opened
	s.opened++
	s.live = b
	var cb any = textBlock{Type: "text", Text: ""}
	if b.tool {
		if b.id == "" {
			b.id = toolUseID()
		}
		cb = toolUseBlock{Type: "tool_use", ID: b.id, Name: b.name, Input: json.RawMessage("{}")}
	}
	return append(ev, event("content_block_start", struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}{"content_block_start", b.index, cb}))
}

// flush sends the content of b not sent yet as one delta.
func (s *Stream) flush(ev []Event, b *streamBlock) []Event {
	all := b.content.String()
	if b.sent == len(all) {
		return ev
	}
	part := all[b.sent:]
	if b.tool && strings.TrimSpace(all[:b.sent]) == "" {
		// Leading whitespace alone is no JSON a client could parse; it is left out.
		part = strings.TrimLeft(part, " \t\r\n")
	}
	b.sent = len(all)
	if part == "" {
		return ev
	}
	var delta any = struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text_delta", part}
	if b.tool {
		delta = struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		}{"input_json_delta", part}
	}
	return append(ev, event("content_block_delta", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}{"content_block_delta", b.index, delta}))
}

// close ends the open block b. A tool call's arguments must form a JSON object by then, unless the
// answer was cut at max_tokens (cut), when the client gets what there is, as from Anthropic.
func (s *Stream) close(ev []Event, b *streamBlock, cut bool) ([]Event, error) {
	if b.tool && !cut {
		if _, err := toolInput([]byte(b.content.String()), b.name, false); err != nil {
			return ev, err
		}
	}
	b.closed = true
	s.live = nil
	return append(ev, event("content_block_stop", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}{"content_block_stop", b.index})), nil
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
	var ev []Event
	if !s.started {
		ev = s.begin(ev)
	}
	cut := s.finish == "length"
	for _, b := range s.blocks {
		if b.closed {
			continue
		}
		if b.tool && b.name == "" {
			return ev, errors.New("the upstream called a tool without naming it")
		}
		if !b.started {
			ev = s.open(ev, b)
		}
		ev = s.flush(ev, b)
		var err error
		if ev, err = s.close(ev, b, cut); err != nil {
			return ev, err
		}
	}
	reason, seq := s.stop()
	u := s.Usage()
	ev = append(ev, event("message_delta", messageDelta{Type: "message_delta", Delta: stopDelta{reason, seq},
		Usage: usage{u.InputTokens, u.OutputTokens}}))
	return append(ev, event("message_stop", struct {
		Type string `json:"type"`
	}{"message_stop"})), nil
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
	tools := false
	for _, b := range s.blocks {
		tools = tools || b.tool
	}
	return stopReason(s.finish, s.matched, s.info, tools)
}

// Started reports whether message_start was emitted, i.e. whether the client has been sent a stream
// (an error after that must be an error event, not a status).
func (s *Stream) Started() bool { return s.started }

// Usage returns the upstream's usage if it sent any; otherwise the input tokens announced in
// message_start and, as output tokens, the number of upstream deltas that carried text, started a
// tool call or carried tool arguments.
func (s *Stream) Usage() Usage {
	if s.upstream != nil {
		return Usage{s.upstream.PromptTokens, s.upstream.CompletionTokens}
	}
	return Usage{s.start, s.counted}
}

// Message returns the message assembled so far, complete or partial (for run history): every block
// received, including content not sent yet; stop_reason and stop_sequence stay null until Finish. A
// tool call whose arguments do not form a JSON object (a stream cut short) has them as a JSON string
// in input, so that the run keeps what the upstream sent.
func (s *Stream) Message() []byte {
	m := message{ID: s.id, Type: "message", Role: "assistant", Model: s.model, Content: []any{}}
	for _, b := range s.blocks {
		if !b.tool {
			m.Content = append(m.Content, textBlock{Type: "text", Text: b.content.String()})
			continue
		}
		input, err := toolInput([]byte(b.content.String()), b.name, false)
		if err != nil {
			input, _ = json.Marshal(b.content.String())
		}
		m.Content = append(m.Content, toolUseBlock{Type: "tool_use", ID: b.id, Name: b.name, Input: input})
	}
	if s.finished {
		reason, seq := s.stop()
		m.StopReason, m.StopSequence = &reason, seq
	}
	u := s.Usage()
	m.Usage = usage{u.InputTokens, u.OutputTokens}
	out, _ := json.Marshal(m)
	return out
}

func event(name string, v any) Event {
	b, _ := json.Marshal(v)
	return Event{Name: name, Data: b}
}
