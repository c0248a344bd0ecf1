package edge

import (
	"encoding/json"
	"testing"

	"github.com/svcdev/svc/internal/conv"

	"github.com/svcdev/svc/internal/translate"
)

// TestTranslatedCall: the call of a translated request takes the translation's members as its body,
// unchanged, and judges its messages by the chat surface's rule, with the chat surface's errors.
func TestTranslatedCall(t *testing.T) {
	members := map[string]json.RawMessage{"messages": json.RawMessage(`[]`), "stream": json.RawMessage("true")}
	call, e := translatedCall(&translate.Chat{Members: members, Stream: true, IncludeUsage: true, MaxTokens: 9, Turns: []conv.Turn{
		{Role: "system", Text: "be brief", HasContent: true},
		{Role: "assistant", ToolCalls: true},
		{Role: "user", Text: "", HasContent: true}}})
	if e != nil {
		t.Fatal(e.message)
	}
	if len(call.Body) != 2 || string(call.Body["stream"]) != "true" || !call.Stream || !call.IncludeUsage || call.MaxTokens != 9 ||
		len(call.Messages) != 3 || call.Messages[0].Content != "be brief" || call.Messages[1].Role != "assistant" {
		t.Errorf("call %+v", call)
	}
	for _, c := range []struct {
		turns []conv.Turn
		param string
	}{
		{nil, "messages"},
		{[]conv.Turn{}, "messages"},
		{[]conv.Turn{{Role: "user", HasContent: true}, {Text: "x", HasContent: true}}, "messages[1].role"},
		{[]conv.Turn{{Role: "user", ToolCalls: true}}, "messages[0].content"},
	} {
		if _, e := translatedCall(&translate.Chat{Members: members, Turns: c.turns}); e == nil || e.param != c.param || e.status != 400 {
			t.Errorf("turns %+v: error %+v, want a 400 naming %s", c.turns, e, c.param)
		}
	}
}
