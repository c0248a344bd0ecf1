package translate

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/svcdev/svc/internal/bytememo"
	"github.com/svcdev/svc/internal/jsonx"
)

// translated is what a Responses translation gives, as the edge reads it.
type translated struct {
	chat *Chat
	info *ResponsesInfo
	err  *Error
}

func translateFresh(t *testing.T, body []byte, opts Options) translated {
	t.Helper()
	saved := responsesInputs
	responsesInputs = bytememo.NewPrefixed[*inputRead](memoInputs, memoInputBytes, memoPerHead)
	defer func() { responsesInputs = saved }()
	chat, info, err := ResponsesToChat(body, opts)
	return translated{chat, info, err}
}

// withInput is body with its input items cut to items.
func withInput(t testing.TB, body []byte, items []json.RawMessage) []byte {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	top["input"], _ = json.Marshal(items)
	b, _ := json.Marshal(top)
	return b
}

// TestInputMemoReadsAsTheItems: a request whose input begins with a kept request's items (an agent's
// next turn, or the same request again) translates exactly as it does with nothing kept, for every
// Responses request of testdata grown item by item, refused ones included; and a kept state taken up
// by two requests that go on differently is left as it was (the third reads as the first).
func TestInputMemoReadsAsTheItems(t *testing.T) {
	files, _ := filepath.Glob("testdata/responses/request/*.request.json")
	if len(files) < 5 {
		t.Fatalf("%d request files", len(files))
	}
	opts := Options{Secret: []byte("s")}
	for _, f := range files {
		body := agentBody(t, f)
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		var items []json.RawMessage
		if json.Unmarshal(top["input"], &items) != nil || len(items) < 2 {
			continue // a string input: nothing to keep
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			saved := responsesInputs
			responsesInputs = bytememo.NewPrefixed[*inputRead](memoInputs, memoInputBytes, memoPerHead)
			defer func() { responsesInputs = saved }()
			for k := 1; k <= len(items); k++ {
				b := withInput(t, body, items[:k])
				want := translateFresh(t, b, opts)
				for pass := 0; pass < 2; pass++ { // taken up from k-1 items, then from all k
					chat, info, err := ResponsesToChat(b, opts)
					if got := (translated{chat, info, err}); !reflect.DeepEqual(got, want) {
						t.Fatalf("%d items, pass %d: with the memo\n%+v\nwithout\n%+v", k, pass, got, want)
					}
				}
				// A request read whole is kept, for the next.
				if in := json.RawMessage(jsonx.Field(b, "input")); want.err == nil && len(in) >= bytememo.HeadLen {
					if _, n, _ := responsesInputs.Longest(in, func(*inputRead) bool { return true }); n != k {
						t.Fatalf("%d items read, %d kept", k, n)
					}
				}
			}
			// Two requests that go on from the same kept items differently (one ends early), then
			// the first again.
			first := withInput(t, body, items)
			want := translateFresh(t, first, opts)
			other := withInput(t, body, append(append([]json.RawMessage(nil), items[:len(items)-1]...),
				json.RawMessage(`{"type":"message","role":"user","content":"something else"}`)))
			if _, _, err := ResponsesToChat(other, opts); err != nil && !strings.Contains(err.Message, "No tool output") {
				t.Logf("the other request: %s", err.Message)
			}
			chat, info, err := ResponsesToChat(first, opts)
			if got := (translated{chat, info, err}); !reflect.DeepEqual(got, want) {
				t.Fatalf("after another request went on from the same items: %+v, want %+v", got, want)
			}
		})
	}
}

// TestInputMemoKeepsToItsSecret: reasoning items svc signed are kept only under the secret that
// checked them, so a translation with another secret reads them again (and leaves them out).
func TestInputMemoKeepsToItsSecret(t *testing.T) {
	text := "I should list the files."
	body := []byte(`{"model":"m","input":[{"type":"message","role":"user","content":"hi"},` +
		`{"type":"reasoning","summary":[{"type":"summary_text","text":"` + text + `"}],"encrypted_content":"` + signThinking([]byte("a"), text) + `"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},` +
		`{"type":"message","role":"user","content":"go on"}]}`)
	for _, secret := range []string{"a", "b", "a"} {
		opts := Options{Secret: []byte(secret)}
		chat, _, err := ResponsesToChat(body, opts)
		if err != nil {
			t.Fatal(err.Message)
		}
		want := translateFresh(t, body, opts)
		if !reflect.DeepEqual(chat, want.chat) {
			t.Fatalf("secret %s: %+v, want %+v", secret, chat.Conversation.Messages, want.chat.Conversation.Messages)
		}
		if got := chat.Conversation.Messages[1].ReasoningContent != ""; got != (secret == "a") {
			t.Fatalf("secret %s: reasoning kept %v", secret, got)
		}
	}
}

// TestInputMemoConcurrent: translations taking up the same kept items at once, each going on with
// calls of its own, share nothing they change (run with -race).
func TestInputMemoConcurrent(t *testing.T) {
	// Twelve calls: the assistant message's calls have room for more as it is read (and as append
	// would copy them: 13), none as it is kept.
	prefix := `{"type":"message","role":"user","content":"list files"}`
	outputs := ""
	for i := 1; i <= 12; i++ {
		c := "c" + strconv.Itoa(i)
		prefix += `,{"type":"function_call","call_id":"` + c + `","name":"ls","arguments":"{}"}`
		outputs += `,{"type":"function_call_output","call_id":"` + c + `","output":"x"}`
	}
	first := []byte(`{"model":"m","input":[` + prefix + `]}`)
	for range 2 { // refused (no outputs), but its items are kept: the second time its head comes
		ResponsesToChat(first, Options{})
	}
	if _, n, _ := responsesInputs.Longest(json.RawMessage(jsonx.Field(first, "input")), func(*inputRead) bool { return true }); n != 13 {
		t.Fatalf("%d items kept, want 13", n)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			id := string(rune('a' + g))
			body := []byte(`{"model":"m","input":[` + prefix + `,{"type":"function_call","call_id":"` + id + `","name":"cat","arguments":"{}"},` +
				outputs[1:] + `,{"type":"function_call_output","call_id":"` + id + `","output":"y"}]}`)
			for i := 0; i < 50; i++ {
				chat, _, err := ResponsesToChat(body, Options{})
				if err != nil {
					t.Error(err.Message)
					return
				}
				calls := chat.Conversation.Messages[1].ToolCalls
				if len(calls) != 13 || calls[12].ID != id {
					t.Errorf("goroutine %s: calls %+v", id, calls)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// BenchmarkResponsesNextTurn is an agent's next turn: Codex's tool turn with one new user message each
// time, its items before kept by the turn before (a partial hit: the kept items taken up, the new one
// read, the state kept again), against the same request read with nothing kept.
func BenchmarkResponsesNextTurn(b *testing.B) {
	body := agentBody(b, "testdata/responses/request/codex_tool_turn.request.json")
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		b.Fatal(err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(top["input"], &items); err != nil {
		b.Fatal(err)
	}
	turn := func(i int) []byte {
		next := append(items[:len(items):len(items)], json.RawMessage(`{"type":"message","role":"user","content":"turn `+strconv.Itoa(i)+`"}`))
		return withInput(b, body, next)
	}
	before := withInput(b, body, items) // written as the turns are (json.Marshal escapes < and >)
	bodies := make([][]byte, 1024)
	for i := range bodies {
		bodies[i] = turn(i)
	}
	for _, kept := range []bool{true, false} {
		name := "kept"
		if !kept {
			name = "none-kept"
		}
		b.Run(name, func(b *testing.B) {
			saved := responsesInputs
			defer func() { responsesInputs = saved }()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				responsesInputs = bytememo.NewPrefixed[*inputRead](memoInputs, memoInputBytes, memoPerHead)
				if kept {
					ResponsesToChat(before, Options{}) // the turn before (its head offered,
					ResponsesToChat(before, Options{}) // then its items kept)
				}
				b.StartTimer()
				if _, _, err := ResponsesToChat(bodies[i%len(bodies)], Options{}); err != nil {
					b.Fatal(err.Message)
				}
			}
		})
	}
}
