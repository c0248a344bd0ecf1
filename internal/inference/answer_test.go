package inference

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A streamed chat answer with n = 3 (chunks of the three choices interleaved, the first naming only
// choice 0) and a choice calling two tools whose deltas arrive interleaved by index assembles into the
// chat.completion the plain call answers. Growing the lists once copied a strings.Builder in use,
// which panicked ("strings: illegal use of non-zero Builder copied by value").
func TestAnswerChoicesAndInterleavedToolCalls(t *testing.T) {
	a := NewAnswer(SurfaceChat, "served")
	add := func(choices ...ChunkChoice) { a.Add(&Chunk{ID: "chatcmpl-1", Created: 7, Choices: choices}) }
	add(ChunkChoice{Index: 0, Role: "assistant"})
	for _, word := range []string{"one ", "two ", "three"} {
		for i := 2; i >= 0; i-- {
			add(ChunkChoice{Index: i, Content: fmt.Sprintf("%d:%s", i, word)})
		}
	}
	add(ChunkChoice{Index: 1, ToolCalls: []ToolCallDelta{{Index: 1, ID: "call_b", Name: "b", Arguments: `{"y":`}}})
	add(ChunkChoice{Index: 1, ToolCalls: []ToolCallDelta{{Index: 0, ID: "call_a", Name: "a", Arguments: `{"x":`}}})
	add(ChunkChoice{Index: 1, ToolCalls: []ToolCallDelta{{Index: 1, Arguments: `2}`}, {Index: 0, Arguments: `1}`}}})
	for i := 0; i < 3; i++ {
		add(ChunkChoice{Index: i, FinishReason: []string{"stop", "tool_calls", "length"}[i]})
	}
	var got struct {
		ID        string `json:"id"`
		Model     string `json:"model"`
		Truncated bool   `json:"truncated"`
		Choices   []struct {
			Index   int `json:"index"`
			Message struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(a.JSON(Usage{}, nil), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "chatcmpl-1" || got.Model != "served" || got.Truncated || len(got.Choices) != 3 {
		t.Fatalf("answer %+v", got)
	}
	for i, c := range got.Choices {
		want := fmt.Sprintf("%d:one %d:two %d:three", i, i, i)
		if c.Index != i || c.Message.Role != "assistant" || c.Message.Content == nil || *c.Message.Content != want ||
			c.FinishReason != []string{"stop", "tool_calls", "length"}[i] {
			t.Errorf("choice %d: %+v, want content %q", i, c, want)
		}
	}
	calls := got.Choices[1].Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "call_a" || calls[0].Function.Name != "a" || calls[0].Function.Arguments != `{"x":1}` ||
		calls[1].ID != "call_b" || calls[1].Function.Arguments != `{"y":2}` {
		t.Fatalf("tool calls %+v", calls)
	}
}

// A streamed answer longer than MaxAnswerBytes is recorded up to it, marked "truncated", whatever the
// surface; a short one is not marked.
func TestAnswerTruncated(t *testing.T) {
	piece := strings.Repeat("x", 64<<10)
	const pieces = MaxAnswerBytes/(64<<10) + 16 // 1 MiB past the cap
	pieceJSON, _ := json.Marshal(piece)
	for _, tc := range []struct {
		surface Surface
		start   []string
		delta   func() *Chunk
	}{
		{SurfaceChat, nil, func() *Chunk { return &Chunk{ID: "c", Choices: []ChunkChoice{{Index: 1, Content: piece}}} }},
		{SurfaceCompletions, nil, func() *Chunk { return &Chunk{ID: "c", Choices: []ChunkChoice{{Content: piece}}} }},
		{SurfaceMessages, []string{`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[]}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			func() *Chunk {
				return &Chunk{JSON: []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + string(pieceJSON) + `}}`)}
			}},
	} {
		for _, n := range []int{2, pieces} {
			a := NewAnswer(tc.surface, "m")
			for _, s := range tc.start {
				a.Add(&Chunk{JSON: []byte(s)})
			}
			for i := 0; i < n; i++ {
				a.Add(tc.delta())
			}
			out := a.JSON(Usage{}, []byte(`{"error":{"message":"cut"}}`))
			var got struct {
				Truncated bool            `json:"truncated"`
				Error     json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", tc.surface, err)
			}
			if want := n == pieces; got.Truncated != want || got.Error == nil {
				t.Errorf("%s, %d pieces: truncated %v, error %s", tc.surface, n, got.Truncated, got.Error)
			}
			if n == pieces && (len(out) > MaxAnswerBytes+4<<10 || len(out) < MaxAnswerBytes-128<<10) {
				t.Errorf("%s: recorded %d bytes, want about MaxAnswerBytes (%d)", tc.surface, len(out), MaxAnswerBytes)
			}
		}
	}
	// A passed-through Responses stream: the last response object kept, unless it is past the cap.
	for _, size := range []int{10, MaxAnswerBytes + 1} {
		a := NewAnswer(SurfaceResponses, "m")
		a.Add(&Chunk{JSON: []byte(`{"type":"response.completed","response":{"object":"response","output_text":"` + strings.Repeat("r", size) + `"}}`)})
		var got struct {
			Object    string `json:"object"`
			Truncated bool   `json:"truncated"`
		}
		out := a.JSON(Usage{}, nil)
		if err := json.Unmarshal(out, &got); err != nil || got.Object != "response" || got.Truncated != (size > MaxAnswerBytes) || len(out) > MaxAnswerBytes+1024 {
			t.Errorf("responses of %d bytes: %d bytes recorded, %+v %v", size, len(out), got, err)
		}
	}
}
