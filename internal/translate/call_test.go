package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/jsonx"
)

// sameChat holds a Chat to the whole-request encoding it replaces: its members are the members of
// json.Marshal's body, byte for byte (so the upstream receives the body it received before), and what
// it says of them is what reading that body says: the messages' roles and texts, stream, usage, the
// output cap.
func sameChat(t *testing.T, c *Chat, whole []byte) {
	t.Helper()
	want := jsonx.Object(whole)
	if len(want) != len(c.Fields) {
		t.Fatalf("members %v, want %v", keys(c.Fields), keys(want))
	}
	for k, v := range want {
		if string(c.Fields[k]) != string(v) {
			t.Fatalf("member %s = %s, want %s", k, c.Fields[k], v)
		}
	}
	var r struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Stream        bool `json:"stream"`
		MaxTokens     int  `json:"max_tokens"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(whole, &r); err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	for _, m := range r.Messages {
		text := ""
		var parts []struct{ Type, Text string }
		if json.Unmarshal(m.Content, &text) != nil && json.Unmarshal(m.Content, &parts) == nil {
			var lines []string
			for _, p := range parts {
				if p.Type == "text" {
					lines = append(lines, p.Text)
				}
			}
			text = strings.Join(lines, "\n")
		}
		msgs = append(msgs, Message{Role: m.Role, Text: text})
	}
	if !reflect.DeepEqual(c.Messages, msgs) || c.Stream != r.Stream || c.MaxTokens != r.MaxTokens ||
		c.IncludeUsage != (r.StreamOptions != nil && r.StreamOptions.IncludeUsage) {
		t.Fatalf("chat says messages %+v stream %v usage %v max %d; the body says %+v %v %v %d", c.Messages, c.Stream, c.IncludeUsage,
			c.MaxTokens, msgs, r.Stream, r.StreamOptions, r.MaxTokens)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Every request of the translation corpus gives the same chat request member by member as it did
// encoded whole.
func TestChatIsTheWholeRequestMemberByMember(t *testing.T) {
	for _, pattern := range []string{"testdata/request/*.messages.json", "testdata/responses/request/*.request.json"} {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			t.Fatalf("no corpus at %s", pattern)
		}
		for _, name := range files {
			body, _ := os.ReadFile(name)
			t.Run(filepath.Base(name), func(t *testing.T) { checkBothWays(t, body, strings.Contains(pattern, "responses")) })
		}
	}
}

// checkBothWays translates body with the whole encoding and member by member and compares them.
func checkBothWays(t *testing.T, body []byte, responses bool) {
	t.Helper()
	var c *Chat
	var whole []byte
	var e1, e2 *Error
	if responses {
		c, _, e1 = ResponsesRequest(body, Options{Reasoning: ReasoningChatTemplate})
		whole, _, e2 = ResponsesToChat(body, Options{Reasoning: ReasoningChatTemplate})
	} else {
		c, _, e1 = MessagesRequest(body, Options{})
		whole, _, e2 = MessagesToChatWith(body, Options{})
	}
	if (e1 == nil) != (e2 == nil) {
		t.Fatalf("errors differ: %v / %v", e1, e2)
	}
	if e1 == nil {
		sameChat(t, c, whole)
	}
}
