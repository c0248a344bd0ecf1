package translate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/svcdev/svc/internal/bytememo"
)

// messagesTranslated is what a Messages translation gives, as the edge reads it.
type messagesTranslated struct {
	chat *Chat
	info *RequestInfo
	err  *Error
}

func translateMessages(body []byte, opts Options) messagesTranslated {
	chat, info, err := MessagesToChatWith(body, opts)
	return messagesTranslated{chat, info, err}
}

// translateMessagesFresh is translateMessages with no messages kept.
func translateMessagesFresh(body []byte, opts Options) messagesTranslated {
	saved := messagesInputs
	messagesInputs = bytememo.NewPrefixed[*messagesRead](memoInputs, memoInputBytes, memoPerHead)
	defer func() { messagesInputs = saved }()
	return translateMessages(body, opts)
}

// withMessages is body with its messages array made of entries.
func withMessages(t *testing.T, body []byte, entries ...json.RawMessage) []byte {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	top["messages"], _ = json.Marshal(entries)
	b, _ := json.Marshal(top)
	return b
}

// TestMessagesMemoReadsAsTheEntries: a request whose messages begin with a kept request's entries
// (Claude Code's next turn, or the same request again) translates exactly as it does with nothing
// kept, for every Messages request of testdata grown entry by entry, and for each of them going on
// with an entry that is refused or leaves the conversation refused; and a kept state taken up by two
// requests that go on differently is left as it was (the third reads as the first).
func TestMessagesMemoReadsAsTheEntries(t *testing.T) {
	files, _ := filepath.Glob("testdata/request/*.messages.json")
	if len(files) < 10 {
		t.Fatalf("%d request files", len(files))
	}
	opts := Options{Secret: []byte("s")}
	// Entries that a kept conversation may go on with: a role no message has, a user turn that
	// answers no tool_use (refused after an assistant's tool_use), an assistant turn (refused after
	// one), a system entry (deferred after one).
	next := []json.RawMessage{
		json.RawMessage(`{"role":"tool","content":"x"}`),
		json.RawMessage(`{"role":"user","content":"and then?"}`),
		json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"so","cache_control":{"type":"ephemeral"}}]}`),
		json.RawMessage(`{"role":"system","content":[{"type":"text","text":"be brief"}]}`),
	}
	for _, f := range files {
		body := agentBody(t, f)
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		var entries []json.RawMessage
		if err := json.Unmarshal(top["messages"], &entries); err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			saved := messagesInputs
			messagesInputs = bytememo.NewPrefixed[*messagesRead](memoInputs, memoInputBytes, memoPerHead)
			defer func() { messagesInputs = saved }()
			check := func(b []byte, what string) {
				t.Helper()
				want := translateMessagesFresh(b, opts)
				for pass := 0; pass < 2; pass++ { // taken up from the entries before, then from all
					if got := translateMessages(b, opts); !reflect.DeepEqual(got, want) {
						t.Fatalf("%s, pass %d: with the memo\n%+v %+v %+v\nwithout\n%+v %+v %+v",
							what, pass, got.chat, got.info, got.err, want.chat, want.info, want.err)
					}
				}
			}
			for k := 1; k <= len(entries); k++ {
				check(withMessages(t, body, entries[:k]...), fmt.Sprintf("%d entries", k))
				for j, e := range next {
					grown := append(append([]json.RawMessage(nil), entries[:k]...), e)
					check(withMessages(t, body, grown...), fmt.Sprintf("%d entries and next[%d]", k, j))
				}
			}
			// Two requests that go on from the same kept entries differently, then the first again.
			first := withMessages(t, body, entries...)
			want := translateMessagesFresh(first, opts)
			last := len(entries) - 1
			translateMessages(withMessages(t, body, append(append([]json.RawMessage(nil), entries[:last]...),
				json.RawMessage(`{"role":"user","content":"something else"}`), next[3], next[2])...), opts)
			translateMessages(withMessages(t, body, append(append([]json.RawMessage(nil), entries[:last]...), next[3], next[1])...), opts)
			if got := translateMessages(first, opts); !reflect.DeepEqual(got, want) {
				t.Fatalf("after other requests went on from the same entries: %+v %+v %+v, want %+v %+v %+v",
					got.chat, got.info, got.err, want.chat, want.info, want.err)
			}
		})
	}
}

// TestMessagesMemoKeepsToItsSecret: thinking blocks svc signed are kept only under the secret that
// checked them, so a translation with another secret reads them again (and leaves them out).
func TestMessagesMemoKeepsToItsSecret(t *testing.T) {
	text := "I should list the files."
	body := []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"` + text + `","signature":"` + signThinking([]byte("a"), text) + `"},` +
		`{"type":"text","text":"ok"}]},{"role":"user","content":"go on"}]}`)
	for _, secret := range []string{"a", "b", "a"} {
		opts := Options{Secret: []byte(secret)}
		got := translateMessages(body, opts)
		if got.err != nil {
			t.Fatal(got.err.Message)
		}
		if want := translateMessagesFresh(body, opts); !reflect.DeepEqual(got, want) {
			t.Fatalf("secret %s: %+v %+v, want %+v %+v", secret, got.chat.Conversation.Messages, got.info, want.chat.Conversation.Messages, want.info)
		}
		if kept := got.chat.Conversation.Messages[1].ReasoningContent != ""; kept != (secret == "a") {
			t.Fatalf("secret %s: thinking kept %v", secret, kept)
		}
	}
}

// TestMessagesMemoConcurrent: translations taking up the same kept entries at once, each going on with
// entries of its own, share nothing they change (run with -race): the kept messages, the system
// messages deferred after a tool_use and the ignored names all have room to spare when not clipped
// (nine messages in a slice append grew to sixteen, three of the others in slices of four), and each
// request goes on from them with entries of its own.
func TestMessagesMemoConcurrent(t *testing.T) {
	saved := messagesInputs
	messagesInputs = bytememo.NewPrefixed[*messagesRead](memoInputs, memoInputBytes, memoPerHead)
	defer func() { messagesInputs = saved }()
	prefix := `{"role":"system","content":"rules"},{"role":"user","content":"list files","cache_control":{"type":"ephemeral"}},` +
		`{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"},{"type":"text","text":"which?"}]},` +
		`{"role":"user","content":"all"},{"role":"assistant","content":"sure"},{"role":"user","content":"go"},{"role":"assistant","content":"ok"},` +
		`{"role":"user","content":"now"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]},` +
		`{"role":"system","content":"one"},{"role":"system","content":"two"},` +
		`{"role":"system","content":[{"type":"text","text":"three","cache_control":{"type":"ephemeral"}}]}`
	first := []byte(`{"model":"m","max_tokens":100,"messages":[` + prefix + `]}`)
	for range 2 { // refused (no tool_result), but its entries are kept: the second time its head comes
		if _, _, err := MessagesToChatWith(first, Options{}); err == nil {
			t.Fatal("a tool_use without its tool_result was taken")
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ { // 200 requests in all: the memo forgets none of them
				id := fmt.Sprintf("%d-%d", g, i)
				body := []byte(`{"model":"m","max_tokens":100,"messages":[` + prefix + `,{"role":"system","content":"` + id + `"},` +
					`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"` + id + `"}]},` +
					`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"unsigned"},{"type":"text","text":"` + id + `"}]}]}`)
				chat, info, err := MessagesToChatWith(body, Options{})
				if err != nil {
					t.Error(err.Message)
					return
				}
				msgs := chat.Conversation.Messages
				if len(msgs) != 15 || msgs[9].Content != id || msgs[10].Content != "one" || msgs[12].Content != "three" ||
					msgs[13].Content != id || msgs[14].Content != id {
					t.Errorf("request %s: messages %+v", id, msgs)
					return
				}
				if len(info.Ignored) != 4 || info.Ignored[3] != "messages[].content[]:thinking" {
					t.Errorf("request %s: ignored %v", id, info.Ignored)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}
