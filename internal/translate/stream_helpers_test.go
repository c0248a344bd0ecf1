package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Test helpers: in production the edge's runtime reads each chunk and the edge calls Add (fuzzed on
// that path by handlers/edge's FuzzMessagesTranslatedStream), and the edge's writer knows whether its
// stream started; the tests here feed chunks as JSON.

// The parts of a chunk that translate.
type chunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
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

// Chunk translates one chunk: the JSON data of one server-sent event, not "[DONE]". See Add.
func (s *Stream) Chunk(data []byte) ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	c, err := readChunk(data)
	if err != nil {
		return nil, err
	}
	return s.Add(c)
}

// streamChunk is what a translation reads of the chunk.
func (c *chunk) streamChunk() *StreamChunk {
	sc := StreamChunk{ID: c.ID}
	if c.Usage != nil {
		u := c.Usage.usage()
		sc.Usage = &u
	}
	for _, ch := range c.Choices {
		choice := StreamChoice{Index: ch.Index, Content: ch.Delta.Content, Reasoning: ch.Delta.ReasoningContent, FinishReason: ch.FinishReason}
		if choice.Reasoning == "" {
			choice.Reasoning = ch.Delta.Reasoning
		}
		if m := matchedStop(ch.StopReason); m != nil {
			choice.StopReason = *m
		}
		for _, tc := range ch.Delta.ToolCalls {
			choice.ToolCalls = append(choice.ToolCalls, StreamToolCall{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		sc.Choices = append(sc.Choices, choice)
	}
	return &sc
}

// readChunk reads one chunk's JSON; an error chunk is an error.
func readChunk(data []byte) (*StreamChunk, error) {
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("the upstream sent a stream chunk that is not valid: %v", err)
	}
	if !isNull(c.Error) {
		return nil, fmt.Errorf("the upstream failed: %s", upstreamErrorMessage(c.Error))
	}
	return c.streamChunk(), nil
}

// Started reports whether message_start was emitted, i.e. whether the client has been sent a stream
// (an error after that must be an error event, not a status).
func (s *Stream) Started() bool { return s.started }

// Chunk translates one chunk: the JSON data of one server-sent event, not "[DONE]". See Add. The
// events are copied: Add reuses their bytes for the next chunk's (the edge writes them before it adds
// the next), and the tests here gather a whole stream's.
func (s *ResponsesStream) Chunk(data []byte) ([]Event, error) {
	if s.finished {
		return nil, nil
	}
	c, err := readChunk(data)
	if err != nil {
		return nil, err
	}
	evs, err := s.Add(c)
	out := make([]Event, len(evs))
	for i, ev := range evs {
		out[i] = Event{Name: ev.Name, Data: bytes.Clone(ev.Data)}
	}
	return out, err
}

// Started reports whether response.created was sent (an error after that must be response.failed).
func (s *ResponsesStream) Started() bool { return s.started }
