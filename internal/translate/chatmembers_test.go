package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/conv"
)

// chatJSON is the chat request of c as one JSON object, its members in name order (as the runtime
// writes the upstream's body, model aside).
func chatJSON(c *Chat) []byte {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.Members))
	for k := range c.Members {
		names = append(names, k)
	}
	sort.Strings(names)
	out := []byte{'{'}
	for i, k := range names {
		if i > 0 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(append(append(out, kb...), ':'), c.Members[k]...)
	}
	return append(out, '}')
}

// messagesJSON is MessagesToChatWith (default Options when none are given) with the chat request as
// one JSON body.
func messagesJSON(body []byte, opts ...Options) ([]byte, *RequestInfo, *Error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c, info, e := MessagesToChatWith(body, o)
	return chatJSON(c), info, e
}

// responsesJSON is ResponsesToChat with the chat request as one JSON body.
func responsesJSON(body []byte, opts Options) ([]byte, *ResponsesInfo, *Error) {
	c, info, e := ResponsesToChat(body, opts)
	return chatJSON(c), info, e
}

// marshalledMembers is what the edge read before translations handed back members: the chat request
// marshalled whole, split into its top-level members.
func marshalledMembers(t *testing.T, r *chatRequest) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestChatMembersAreTheMarshalledBody: every field of a chat request, set and unset, is encoded by
// chatRequest.chat to the bytes json.Marshal writes for it inside the whole request, and left out
// where json.Marshal leaves it out. A field added to chatRequest but not to chat fails here.
func TestChatMembersAreTheMarshalledBody(t *testing.T) {
	var full chatRequest
	v := reflect.ValueOf(&full).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int:
			f.SetInt(7)
		case reflect.String:
			f.SetString("x<&>\u2028é")
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
			f.SetMapIndex(reflect.ValueOf("enable_thinking"), reflect.ValueOf(true))
		case reflect.Interface:
			f.Set(reflect.ValueOf(map[string]any{"type": "json_schema", "b": "<b>"}))
		case reflect.Slice:
			if f.Type() == reflect.TypeOf(json.RawMessage(nil)) {
				f.SetBytes([]byte(` { "a" : "<x>" , "b" : [ 1 , 2 ] } `))
				continue
			}
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	text := "a<b>"
	full.Messages = []conv.Message{{Role: "user", Content: []conv.Part{{Type: "text", Text: &text}}}, {Role: "assistant", Content: nil,
		ToolCalls: []conv.ToolCall{{ID: "c", Type: "function"}}}}
	strict := true
	full.Tools = []conv.Tool{{Type: "function", Function: conv.ToolFunc{Name: "get_weather", Description: "the <b>weather</b> & more\u2028é\n",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","description":"a \"city\" <x> — ` + "\u2028\u2029&" + `"}}}`), Strict: &strict}},
		{Type: "function", Function: conv.ToolFunc{Name: "t"}}}
	*full.AddGenerationPrompt = false
	// The forms the translations set besides: a tool_choice string, a model with white space and
	// characters json.Marshal escapes.
	alt := chatRequest{ToolChoice: "required", Model: json.RawMessage(` "m<&>\u2028" `)}
	for _, r := range []*chatRequest{&full, {}, {Messages: []conv.Message{}}, &alt} {
		c, err := r.chat()
		if err != nil {
			t.Fatal(err)
		}
		want := marshalledMembers(t, r)
		if !reflect.DeepEqual(c.Members, want) {
			t.Errorf("members\n%s\nwant (json.Marshal of the whole request)\n%s", chatJSON(c), chatJSON(&Chat{Members: want}))
		}
	}
	if len(marshalledMembers(t, &full)) != v.NumField() {
		t.Errorf("the full request sets %d members of %d fields", len(marshalledMembers(t, &full)), v.NumField())
	}
}

// TestChatTurns: the turns of a translated request are what the chat surface reads from its messages
// (role, the text of string content or text parts joined by newlines, null content, tool calls), for
// every request of the translation corpus.
func TestChatTurns(t *testing.T) {
	files, _ := filepath.Glob("testdata/request/*.messages.json")
	rfiles, _ := filepath.Glob("testdata/responses/request/*.request.json")
	for _, name := range append(files, rfiles...) {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var c *Chat
		var e *Error
		if strings.HasSuffix(name, ".messages.json") {
			c, _, e = MessagesToChatWith(body, Options{})
		} else {
			c, _, e = ResponsesToChat(body, Options{})
		}
		if e != nil {
			t.Fatalf("%s: %v", name, e)
		}
		var msgs []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		}
		if err := json.Unmarshal(c.Members["messages"], &msgs); err != nil {
			t.Fatal(err)
		}
		if len(msgs) != len(c.Turns) || len(msgs) == 0 {
			t.Fatalf("%s: %d turns for %d messages", name, len(c.Turns), len(msgs))
		}
		for i, m := range msgs {
			want := conv.Turn{Role: m.Role, HasContent: len(m.Content) > 0 && string(m.Content) != "null", ToolCalls: len(m.ToolCalls) > 0}
			var s string
			var parts []struct{ Type, Text string }
			switch {
			case json.Unmarshal(m.Content, &s) == nil:
				want.Text = s
			case json.Unmarshal(m.Content, &parts) == nil:
				var texts []string
				for _, p := range parts {
					if p.Type == "text" {
						texts = append(texts, p.Text)
					}
				}
				want.Text = strings.Join(texts, "\n")
			}
			if c.Turns[i] != want {
				t.Errorf("%s: turn %d is %+v, the message says %+v", name, i, c.Turns[i], want)
			}
		}
	}
}

// TestAppendMessagesAsMarshal: appendMessages writes a request's messages byte for byte as json.Marshal
// does, for every kind of turn, part and text (escapes, HTML, invalid UTF-8, U+2028).
func TestAppendMessagesAsMarshal(t *testing.T) {
	texts := []string{"", "plain", `a "quoted" \ path`, "<b>&amp;</b>", "é ☃ 😀", "line\u2028sep", "bad \xff utf-8", "ctl \x01\n\t"}
	for _, s := range texts {
		s := s
		lists := [][]conv.Message{nil, {}, {
			{Role: "system", Content: s},
			{Role: "user", Content: []conv.Part{{Type: "text", Text: &s}, {Type: "image_url", ImageURL: &conv.ImageURL{URL: "data:image/png;base64," + s}},
				{Type: "image_url", ImageURL: &conv.ImageURL{URL: s, Detail: "high"}}, {Type: "text"}}},
			{Role: "user", Content: []conv.Part{}},
			{Role: "user", Content: []conv.Part(nil)},
			{Role: "assistant", Content: nil, ReasoningContent: s, ToolCalls: []conv.ToolCall{{ID: "call_" + s, Type: "function", Function: conv.Function{Name: s, Arguments: `{"a":"` + s + `"}`}},
				{ID: "c2", Type: "function", Function: conv.Function{Name: "f"}}}},
			{Role: "tool", Content: s, ToolCallID: s},
			{Role: "assistant", Content: s, ToolCalls: []conv.ToolCall{}},
		}}
		for _, msgs := range lists {
			want, err := json.Marshal(msgs)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendMessages([]byte("p:"), msgs); string(got) != "p:"+string(want) {
				t.Errorf("text %q:\n got %s\nwant %s", s, got[2:], want)
			}
		}
	}
}
