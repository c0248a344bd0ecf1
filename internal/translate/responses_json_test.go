package translate

import (
	"encoding/json"
	"testing"
)

// The hand-written events and items write exactly what encoding/json writes of them, whatever their
// strings hold (quotes, backslashes, HTML characters, non-ASCII, U+2028, invalid UTF-8, control
// characters) and whatever their lists are (nil, empty, full).
func TestAppendersWriteAsMarshal(t *testing.T) {
	texts := []string{"", "plain text", `a "quoted" \ path`, "<b>&amp;</b>", "é ☃ 😀", "line\u2028sep", "bad \xff utf-8", "ctl \x01\n\t"}
	var values []appender
	for _, s := range texts {
		text := newOutputText(s)
		values = append(values,
			text,
			outputText{Type: "output_text", Text: s},
			outputText{Type: "output_text", Text: s, Annotations: []any{map[string]any{"type": "url_citation", "url": s}}, Logprobs: []any{1.5, s}},
			outputMessage{ID: "msg_" + s, Type: "message", Status: "completed", Role: "assistant", Content: []outputText{text, text}},
			outputMessage{ID: s, Type: "message", Status: "in_progress", Role: "assistant"},
			outputMessage{ID: s, Type: "message", Status: "in_progress", Role: "assistant", Content: []outputText{}},
			&itemEvent{Type: "response.output_item.done", OutputIndex: 3, Item: outputMessage{ID: s, Content: []outputText{text}}, seqNum: seqNum{SequenceNumber: 7}},
			&itemEvent{Type: "response.output_item.added", Item: reasoningItem{ID: s, Type: "reasoning", Summary: []any{}, Content: []reasoningText{{Type: "reasoning_text", Text: s}}}},
			&itemEvent{Type: s},
			&partEvent{Type: "response.content_part.added", ItemID: s, OutputIndex: 1, ContentIndex: 2, Part: text, seqNum: seqNum{SequenceNumber: 12}},
			&partEvent{Type: "response.content_part.done", ItemID: s, Part: reasoningText{Type: "reasoning_text", Text: s}},
			&textDoneEvent{Type: "response.output_text.done", ItemID: s, Text: s, Logprobs: noLogprobs, seqNum: seqNum{SequenceNumber: 1 << 20}},
			&textDoneEvent{Type: "response.reasoning_text.done", ItemID: s, Text: s},
			&textDoneEvent{Type: "response.output_text.done", Text: s, Logprobs: json.RawMessage(`[ {"token": "<a>"} ]`)},
			&responseError{Code: "server_error", Message: s},
			&incompleteDetails{Reason: s},
		)
	}
	usage := newResponseUsage(Usage{InputTokens: 1234, OutputTokens: 56, CachedTokens: 1000, ReasoningTokens: 7})
	values = append(values, (*responseError)(nil), (*incompleteDetails)(nil), usage, (*responseUsage)(nil), &responseUsage{})
	for i, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("prefix:")
		got := v.appendJSON(prefix)
		if string(got[:len(prefix)]) != "prefix:" || string(got[len(prefix):]) != string(want) {
			t.Errorf("value %d (%T):\n got %s\nwant %s", i, v, got, want)
		}
	}
}
