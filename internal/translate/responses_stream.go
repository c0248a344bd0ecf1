package translate

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/svcdev/svc/internal/jsonx"
)

// ResponsesStream translates a chat.completion.chunk stream into Responses API events, one chunk at a
// time, each with its sequence_number:
//
//	response.created, response.in_progress,
//	for each output item (reasoning, message, function_call, in the order they start):
//	  response.output_item.added,
//	  reasoning: response.content_part.added, response.reasoning_text.delta..., .done, response.content_part.done
//	  message: response.content_part.added, response.output_text.delta..., .done, response.content_part.done
//	  function_call: response.function_call_arguments.delta..., .done
//	  response.output_item.done,
//	response.completed (or response.incomplete after a length stop) with usage.
//
// One item is open at a time (the assembler's rules, assemble.go). An error after the start is a
// response.failed event (Fail). The events a call returns are good until the next call (their slice
// and bytes are reused). A ResponsesStream is not safe for concurrent use.
type ResponsesStream struct {
	asm       assembler
	info      *ResponsesInfo
	model, id string
	createdAt int64
	start     int // input tokens when the upstream reports none
	seq       int
	started   bool
	finished  bool
	failed    *responseError
	items     []any // the output items closed so far, by output_index
	ev        []Event
	// final is the response object as the last event carried it, once the stream has finished
	// (Response: the run's record and the recent responses take it, not two more writings of it). It
	// stands in the last event's own buffer (last), which nothing writes to once the stream has finished.
	final []byte
	// buf holds the data of the events being returned, one after the other: reused from one Add to
	// the next (the events are sent before the next chunk is added), so that a stream's events cost
	// about one buffer, not one each. It is never grown in place under an event handed out: a buffer
	// too small is replaced (reserve), the events written in the old one keep it.
	buf []byte
	// spare is buf as the stream's last event left it, for Release.
	spare []byte
}

// eventBufs keeps the event buffers of finished streams (Release) for the next streams to begin in:
// the first chunk's events, which carry the response object twice, made each stream allocate and
// clear some tens of kilobytes.
var eventBufs sync.Pool

// maxKeptEventBuf is the largest event buffer eventBufs keeps.
const maxKeptEventBuf = 256 << 10

// NewResponsesStream begins the translation of one streamed answer: the response id (the run's) and
// model it is named, its creation time (Unix seconds), and the input token count to report when the
// upstream reports no usage (info.InputTokensEstimate()).
func NewResponsesStream(id, model string, createdAt int64, info *ResponsesInfo, inputTokensEstimate int) *ResponsesStream {
	if info == nil {
		info = &ResponsesInfo{}
	}
	s := &ResponsesStream{info: info, model: model, id: id, createdAt: createdAt, start: inputTokensEstimate,
		ev: make([]Event, 0, 8)} // a text answer's first and last chunks give 5 and 4 events
	s.asm = assembler{sink: s, reasoning: true, calls: map[int]*streamBlock{}}
	return s
}

// Add translates one chunk. The first chunk also yields response.created and response.in_progress.
// An error means the upstream sent something that cannot be translated (its message is safe to
// show): the events returned with it are to be sent first, then Fail's.
func (s *ResponsesStream) Add(c *StreamChunk) ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	s.ev, s.buf = s.ev[:0], s.buf[:0] // reused: the events are sent before the next chunk is added
	if !s.started {
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

// Finish ends the translation after the upstream's last chunk: it closes the items still open and
// sends response.completed (response.incomplete after a length or content filter stop). An error
// means a tool call cannot be given to the client (no name): the events returned with it are to be
// sent, then Fail's. Calls after the first return nothing.
func (s *ResponsesStream) Finish() ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	s.ev = s.ev[:0] // reused, as Add's: the events of the call before were sent
	if !s.started {
		s.begin()
	}
	if err := s.asm.end(); err != nil {
		return s.ev, err
	}
	s.finished = true
	r := s.response()
	name := "response.completed"
	if r.Status == "incomplete" {
		name = "response.incomplete"
	}
	s.last(name, r)
	return s.ev, nil
}

// Fail ends the stream with a response.failed event, for an error after the start (an upstream that
// failed or went away, an answer that cannot be translated): code is OpenAI's error code
// ("server_error", "rate_limit_exceeded", ...), message what the client reads. The response it
// carries keeps the output items completed so far. Without a start, it starts the stream first.
func (s *ResponsesStream) Fail(code, message string) []Event {
	if s.finished {
		return nil
	}
	s.ev = s.ev[:0]
	if !s.started {
		s.begin()
	}
	s.finished = true
	s.failed = &responseError{Code: code, Message: message}
	r := s.response()
	s.last("response.failed", r)
	return s.ev
}

// Release tells a finished stream that the events of its last call have been sent: their buffer is
// kept for another stream to write its events in. The response (Response) stays. Calls before the
// end do nothing.
func (s *ResponsesStream) Release() {
	if !s.finished || s.spare == nil {
		return
	}
	b := s.spare[:0]
	s.spare = nil
	if cap(b) <= maxKeptEventBuf {
		eventBufs.Put(&b)
	}
}

// Usage returns the upstream's usage if it sent any; otherwise the input tokens given to
// NewResponsesStream and, as output tokens, the number of upstream deltas that carried content.
func (s *ResponsesStream) Usage() Usage { return s.asm.usage(s.start) }

// Response returns the response object as it stands (for run history and GET /v1/responses/{id}):
// in_progress with the items so far (complete ones as sent, the open one with what arrived) until
// the end, then completed, incomplete or failed, as the stream's last event carried it (the same bytes
// each time: not to be modified).
func (s *ResponsesStream) Response() []byte {
	if s.final != nil {
		return s.final
	}
	r := s.response()
	return r.appendJSON(make([]byte, 0, r.sizeHint()))
}

func (s *ResponsesStream) response() *responseObject {
	r := s.info.response(s.id, s.model, s.createdAt)
	r.Output = append(r.Output, s.items...)
	for _, b := range s.asm.blocks {
		if !b.closed {
			r.Output = append(r.Output, s.item(b, len(r.Output), "in_progress"))
		}
	}
	switch {
	case s.failed != nil:
		r.Status, r.Error = "failed", s.failed
	case s.finished:
		r.Status, r.IncompleteDetails = finishStatus(s.asm.finish)
	}
	if s.finished {
		r.Usage = newResponseUsage(s.Usage())
	}
	return r
}

// item is the output item of block b.
func (s *ResponsesStream) item(b *streamBlock, index int, status string) any {
	text := b.content.String()
	switch b.kind {
	case kindThinking:
		return s.info.reasoningItem(s.id, index, text)
	case kindText:
		return outputMessage{ID: itemID("msg", s.id, index), Type: "message", Status: status, Role: "assistant",
			Content: []outputText{newOutputText(text)}}
	}
	return s.info.toolItem(s.id, index, b.id, b.name, text, status)
}

func (s *ResponsesStream) emit(name string, v sequenced) {
	v.setSequence(s.seq)
	s.seq++
	if a, ok := v.(appender); ok {
		s.reserve(256)
		start := len(s.buf)
		s.buf = a.appendJSON(s.buf)
		s.add(name, start)
		return
	}
	s.ev = append(s.ev, event(name, v))
}

// reserve makes room for n more bytes in buf. A buffer without the room is replaced, not grown: the
// events written in it so far keep their bytes there (appending to a full slice would move them).
func (s *ResponsesStream) reserve(n int) {
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]byte, 0, max(n+1024, 2*cap(s.buf)))
	}
}

// add returns the bytes written to buf since start as the event name. An event written past what
// reserve made room for moved buf: its bytes are then all in the new buffer (append copies them), and
// the events before it keep the old one.
func (s *ResponsesStream) add(name string, start int) {
	s.ev = append(s.ev, Event{Name: name, Data: s.buf[start:len(s.buf):len(s.buf)]})
}

// begin emits response.created and response.in_progress, which carry the same response: it is written
// once, into the first event, and copied from there into the second.
func (s *ResponsesStream) begin() {
	s.started = true
	r := s.response()
	if b, ok := eventBufs.Get().(*[]byte); ok {
		s.buf = *b
	}
	s.reserve(2*(r.sizeHint()+96) + 1024) // both events, and the first chunk's
	object := s.lifecycle("response.created", r)
	s.lifecycleJSON("response.in_progress", object)
}

// lifecycle emits an event that carries the response (response.created, .in_progress, .completed,
// .incomplete, .failed), written by hand around the response's JSON: {"type":…,"response":…,
// "sequence_number":…}, as json.Marshal would write it from a struct of those members in that order.
// The response is written into the event's own buffer; lifecycle returns its bytes there.
func (s *ResponsesStream) lifecycle(name string, r *responseObject) (object []byte) {
	s.reserve(len(name) + r.sizeHint() + 64)
	start := len(s.buf)
	s.buf = openLifecycle(s.buf, name)
	at := len(s.buf)
	s.buf = r.appendJSON(s.buf)
	object = s.buf[at:len(s.buf):len(s.buf)]
	s.closeLifecycle(name, start)
	return object
}

// last emits the stream's last event (response.completed, .incomplete or .failed) into a buffer of its
// own, sized for it, and keeps its response as final: what the run's record and the recent responses
// keep is that event's bytes, not the larger buffer of the stream's other events (the recent
// responses count what they keep against maxRecentBytes).
func (s *ResponsesStream) last(name string, r *responseObject) {
	s.spare = s.buf                                    // the events before it keep it, until Release
	s.buf = make([]byte, 0, len(name)+r.sizeHint()+64) // (as reserve leaves a buffer to the events in it)
	s.final = s.lifecycle(name, r)
}

// lifecycleJSON is lifecycle with the response written already.
func (s *ResponsesStream) lifecycleJSON(name string, object []byte) {
	s.reserve(len(name) + len(object) + 64)
	start := len(s.buf)
	s.buf = append(openLifecycle(s.buf, name), object...)
	s.closeLifecycle(name, start)
}

func openLifecycle(d []byte, name string) []byte {
	d = append(d, `{"type":`...)
	d = jsonx.AppendString(d, name)
	return append(d, `,"response":`...)
}

// closeLifecycle ends the event begun at start in buf.
func (s *ResponsesStream) closeLifecycle(name string, start int) {
	s.buf = append(s.buf, `,"sequence_number":`...)
	s.buf = strconv.AppendInt(s.buf, int64(s.seq), 10)
	s.seq++
	s.buf = append(s.buf, '}')
	s.add(name, start)
}

func (s *ResponsesStream) openBlock(b *streamBlock) {
	var added any
	switch b.kind {
	case kindThinking:
		added = reasoningItem{ID: itemID("rs", s.id, b.index), Type: "reasoning", Summary: []any{}, Content: []reasoningText{}}
	case kindText:
		added = outputMessage{ID: itemID("msg", s.id, b.index), Type: "message", Status: "in_progress", Role: "assistant", Content: []outputText{}}
	default:
		if s.info.custom[b.name] {
			added = customToolCallItem{ID: itemID("ctc", s.id, b.index), Type: "custom_tool_call", Status: "in_progress", CallID: b.id, Name: b.name}
		} else {
			added = functionCallItem{ID: itemID("fc", s.id, b.index), Type: "function_call", Status: "in_progress", CallID: b.id, Name: b.name}
		}
	}
	s.emit("response.output_item.added", &itemEvent{Type: "response.output_item.added", OutputIndex: b.index, Item: added})
	switch b.kind {
	case kindThinking:
		s.emit("response.content_part.added", &partEvent{Type: "response.content_part.added", ItemID: itemID("rs", s.id, b.index),
			OutputIndex: b.index, Part: reasoningText{Type: "reasoning_text"}})
		if s.info.summary {
			s.emit("response.reasoning_summary_part.added", &summaryPartEvent{Type: "response.reasoning_summary_part.added",
				ItemID: itemID("rs", s.id, b.index), OutputIndex: b.index, Part: reasoningText{Type: "summary_text"}})
		}
	case kindText:
		s.emit("response.content_part.added", &partEvent{Type: "response.content_part.added", ItemID: itemID("msg", s.id, b.index),
			OutputIndex: b.index, Part: newOutputText("")})
	}
}

func (s *ResponsesStream) deltaBlock(b *streamBlock, part string) {
	switch b.kind {
	case kindThinking:
		s.emit("response.reasoning_text.delta", &textDeltaEvent{Type: "response.reasoning_text.delta", ItemID: itemID("rs", s.id, b.index),
			OutputIndex: b.index, Delta: part})
		if s.info.summary {
			s.emit("response.reasoning_summary_text.delta", &summaryDeltaEvent{Type: "response.reasoning_summary_text.delta",
				ItemID: itemID("rs", s.id, b.index), OutputIndex: b.index, Delta: part})
		}
	case kindText:
		// The event of nearly every chunk, written by hand: encoding/json's reflection would cost more
		// than the rest of the translation.
		if b.surfaceID == "" {
			b.surfaceID = itemID("msg", s.id, b.index)
		}
		s.reserve(160 + len(part))
		start := len(s.buf)
		d := append(s.buf, `{"type":"response.output_text.delta","item_id":`...)
		d = jsonx.AppendString(d, b.surfaceID)
		d = append(d, `,"output_index":`...)
		d = strconv.AppendInt(d, int64(b.index), 10)
		d = append(d, `,"content_index":0,"delta":`...)
		d = jsonx.AppendString(d, part)
		d = append(d, `,"logprobs":[],"sequence_number":`...)
		d = strconv.AppendInt(d, int64(s.seq), 10)
		s.seq++
		s.buf = append(d, '}')
		s.add("response.output_text.delta", start)
	default:
		if s.info.custom[b.name] {
			return // the input is the "input" argument, known when the arguments are complete
		}
		s.emit("response.function_call_arguments.delta", &argsDeltaEvent{Type: "response.function_call_arguments.delta",
			ItemID: itemID("fc", s.id, b.index), OutputIndex: b.index, Delta: part})
	}
}

func (s *ResponsesStream) closeBlock(b *streamBlock, cut bool) error {
	status := "completed"
	if cut {
		status = "incomplete"
	}
	if b.kind == kindTool && strings.TrimSpace(b.content.String()) == "" {
		b.content.Reset()
		b.content.WriteString("{}")
		b.sent = 0
		if !s.info.custom[b.name] {
			s.deltaBlock(b, "{}")
		}
		b.sent = 2
	}
	item := s.item(b, b.index, status)
	text := b.content.String()
	switch it := item.(type) {
	case reasoningItem:
		s.emit("response.reasoning_text.done", &textDoneEvent{Type: "response.reasoning_text.done", ItemID: it.ID, OutputIndex: b.index, Text: text})
		s.emit("response.content_part.done", &partEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: b.index,
			Part: reasoningText{Type: "reasoning_text", Text: text}})
		if s.info.summary {
			s.emit("response.reasoning_summary_text.done", &summaryDoneEvent{Type: "response.reasoning_summary_text.done",
				ItemID: it.ID, OutputIndex: b.index, Text: text})
			s.emit("response.reasoning_summary_part.done", &summaryPartEvent{Type: "response.reasoning_summary_part.done",
				ItemID: it.ID, OutputIndex: b.index, Part: reasoningText{Type: "summary_text", Text: text}})
		}
	case outputMessage:
		s.emit("response.output_text.done", &textDoneEvent{Type: "response.output_text.done", ItemID: it.ID, OutputIndex: b.index, Text: text, Logprobs: noLogprobs})
		s.emit("response.content_part.done", &partEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: b.index, Part: it.Content[0]})
	case functionCallItem:
		s.emit("response.function_call_arguments.done", &argsDoneEvent{Type: "response.function_call_arguments.done", ItemID: it.ID,
			OutputIndex: b.index, Arguments: text, Name: b.name})
	case customToolCallItem:
		s.emit("response.custom_tool_call_input.delta", &argsDeltaEvent{Type: "response.custom_tool_call_input.delta", ItemID: it.ID,
			OutputIndex: b.index, Delta: it.Input})
		s.emit("response.custom_tool_call_input.done", &inputDoneEvent{Type: "response.custom_tool_call_input.done", ItemID: it.ID,
			OutputIndex: b.index, Input: it.Input})
	}
	s.emit("response.output_item.done", &itemEvent{Type: "response.output_item.done", OutputIndex: b.index, Item: item})
	s.items = append(s.items, item)
	return nil
}

// The events' data, openai-node's Response*Event types. Every event carries sequence_number.

type sequenced interface{ setSequence(int) }

var noLogprobs = json.RawMessage("[]")

type seqNum struct {
	SequenceNumber int `json:"sequence_number"`
}

func (n *seqNum) setSequence(i int) { n.SequenceNumber = i }

type itemEvent struct {
	Type        string `json:"type"`
	OutputIndex int    `json:"output_index"`
	Item        any    `json:"item"`
	seqNum
}

type partEvent struct {
	Type         string `json:"type"`
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Part         any    `json:"part"`
	seqNum
}

// The reasoning summary's events (openai-node's ResponseReasoningSummary*Event): svc's one summary
// part (summary_index 0) is the reasoning text.
type summaryPartEvent struct {
	Type         string        `json:"type"`
	ItemID       string        `json:"item_id"`
	OutputIndex  int           `json:"output_index"`
	SummaryIndex int           `json:"summary_index"`
	Part         reasoningText `json:"part"`
	seqNum
}

type summaryDeltaEvent struct {
	Type         string `json:"type"`
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	SummaryIndex int    `json:"summary_index"`
	Delta        string `json:"delta"`
	seqNum
}

type summaryDoneEvent struct {
	Type         string `json:"type"`
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	SummaryIndex int    `json:"summary_index"`
	Text         string `json:"text"`
	seqNum
}

type textDeltaEvent struct {
	Type         string          `json:"type"`
	ItemID       string          `json:"item_id"`
	OutputIndex  int             `json:"output_index"`
	ContentIndex int             `json:"content_index"`
	Delta        string          `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"` // [] on output_text events, absent on reasoning_text ones
	seqNum
}

type textDoneEvent struct {
	Type         string          `json:"type"`
	ItemID       string          `json:"item_id"`
	OutputIndex  int             `json:"output_index"`
	ContentIndex int             `json:"content_index"`
	Text         string          `json:"text"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	seqNum
}

type argsDeltaEvent struct {
	Type        string `json:"type"`
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
	seqNum
}

type argsDoneEvent struct {
	Type        string `json:"type"`
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Arguments   string `json:"arguments"`
	Name        string `json:"name"`
	seqNum
}

type inputDoneEvent struct {
	Type        string `json:"type"`
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Input       string `json:"input"`
	seqNum
}
