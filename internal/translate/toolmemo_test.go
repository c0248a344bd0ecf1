package translate

import (
	"bytes"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
)

// toolsChanged numbers the changed tools of TestToolsReadOnce.
var toolsChanged atomic.Int64

// TestToolsReadOnce: an agent's request sent again with the same tools (every turn of a session) is
// translated as the first was, member for member, with the same ignored names, prompt size and, on the
// Responses API, the same tools echoed; and its tools are not read again: it allocates at least 20 times
// less than the same request whose tools changed by one byte.
func TestToolsReadOnce(t *testing.T) {
	for _, c := range []struct {
		file      string
		translate func([]byte) (*Chat, any, *Error)
	}{
		{"testdata/request/claude_code.messages.json", func(b []byte) (*Chat, any, *Error) {
			c, info, e := MessagesToChatWith(b, Options{})
			return c, info, e
		}},
		{"testdata/request/hints_and_server_tools.messages.json", func(b []byte) (*Chat, any, *Error) {
			c, info, e := MessagesToChatWith(b, Options{})
			return c, info, e
		}},
		{"testdata/responses/request/codex_tool_turn.request.json", func(b []byte) (*Chat, any, *Error) {
			c, info, e := ResponsesToChat(b, Options{})
			if e != nil {
				return nil, nil, e
			}
			return c, []any{info.RequestInfo, string(NewResponsesStream("resp_1", "m", 1, info, 1).Response())}, nil
		}},
	} {
		body := agentBody(t, c.file)
		// A body of its own, with tools no other test sent: the first translation reads them.
		first := bytes.Replace(body, []byte(`"description":"`), []byte(`"description":"`+t.Name()+` `), 1)
		if bytes.Equal(first, body) {
			t.Fatalf("%s: no tool description to change", c.file)
		}
		chat1, info1, e := c.translate(first)
		if e != nil {
			t.Fatalf("%s: %s", c.file, e.Message)
		}
		again := bytes.Clone(first) // the same bytes, another buffer, as the next request is
		chat2, info2, e := c.translate(again)
		if e != nil {
			t.Fatalf("%s again: %s", c.file, e.Message)
		}
		if !reflect.DeepEqual(chat1.Members, chat2.Members) || !reflect.DeepEqual(chat1.Conversation, chat2.Conversation) {
			t.Errorf("%s: the request sent again translates to other members", c.file)
		}
		if !reflect.DeepEqual(info1, info2) {
			t.Errorf("%s: the request sent again translates with another info:\n%+v\n%+v", c.file, info1, info2)
		}
		// Allocations: the same tools again, against tools changed each time (none kept).
		fresh := testing.AllocsPerRun(20, func() {
			// Tools no run of this test sent before (-count runs it again in one process).
			changed := bytes.Replace(first, []byte(`"description":"`), []byte(`"description":"`+strconv.FormatInt(toolsChanged.Add(1), 36)+" "), 1)
			c.translate(changed)
		})
		kept := testing.AllocsPerRun(20, func() { c.translate(again) })
		if fresh-kept < 20 {
			t.Errorf("%s: %v allocations with the tools kept, %v with new tools: not read once", c.file, kept, fresh)
		}
	}
}
