package translate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChatToMessage(t *testing.T) {
	info := &RequestInfo{StopSequences: []string{"###"}, MaxTokens: 100, PromptChars: 40}
	files, _ := filepath.Glob("testdata/response/*.completion.json")
	if len(files) == 0 {
		t.Fatal("no samples")
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".completion.json")
		t.Run(name, func(t *testing.T) {
			body, _ := os.ReadFile(in)
			want, err := os.ReadFile(strings.TrimSuffix(in, ".completion.json") + ".message.json")
			if err != nil {
				t.Fatal(err)
			}
			got, u, err := ChatToMessage(body, "llama-3.1-8b", info)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, want) {
				t.Errorf("message:\n got %s\nwant %s", got, want)
			}
			if name == "no_usage" {
				if u != (Usage{InputTokens: 10, OutputTokens: 4}) {
					t.Errorf("usage = %+v, want the estimate {10 4}", u)
				}
			} else if u != (Usage{InputTokens: 25, OutputTokens: 15}) {
				t.Errorf("usage = %+v, want the upstream's {25 15}", u)
			}
		})
	}
}

func TestChatToMessageErrors(t *testing.T) {
	const head = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":`
	cases := []struct {
		name, body  string
		invalidArgs bool
		says        string
	}{
		{"arguments not JSON", head + `"{\"a\": "}}]},"finish_reason":"tool_calls"}]}`, true, "not a JSON object"},
		{"arguments an array", head + `"[1,2]"}}]},"finish_reason":"tool_calls"}]}`, true, "not a JSON object"},
		{"arguments cut by max_tokens", head + `"{\"a\": \"lo"}}]},"finish_reason":"length"}]}`, true, "max_tokens"},
		{"no choices", `{"id":"x","choices":[]}`, false, "no choice"},
		{"not JSON", `<html>`, false, "not a chat completion"},
		{"error object", `{"error":{"message":"CUDA out of memory","type":"server_error"}}`, false, "CUDA out of memory"},
		{"tool without name", `{"choices":[{"index":0,"message":{"tool_calls":[{"id":"c","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, false, "without naming"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := ChatToMessage([]byte(c.body), "m", &RequestInfo{})
			if err == nil {
				t.Fatalf("translated to %s, want an error", out)
			}
			if errors.Is(err, ErrInvalidToolArguments) != c.invalidArgs {
				t.Errorf("errors.Is(%v, ErrInvalidToolArguments) = %v", err, !c.invalidArgs)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not say %q", err, c.says)
			}
		})
	}
}

func TestChatToMessageArgumentsAsObject(t *testing.T) {
	// Some servers put the arguments object itself where OpenAI puts a JSON string.
	body := `{"id":"chatcmpl-o","choices":[{"index":0,"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":{"x": 1}}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`
	got, _, err := ChatToMessage([]byte(body), "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"msg_o","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"c1","name":"f","input":{"x":1}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":2}}`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestChatToMessageOnlyChoiceZero(t *testing.T) {
	body := `{"id":"chatcmpl-z","choices":[{"index":1,"message":{"content":"second"},"finish_reason":"stop"},{"index":0,"message":{"content":"first"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	got, _, err := ChatToMessage([]byte(body), "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"text":"first"`) || strings.Contains(string(got), "second") {
		t.Errorf("got %s, want choice 0 only", got)
	}
}

func TestChatToMessageThinking(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		body := []byte(`{"id":"chatcmpl-t","choices":[{"index":0,"message":{"role":"assistant","` + field + `":"Two plus two.","content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`)
		secret := []byte("s")
		cases := []struct {
			info RequestInfo
			want string
		}{
			{RequestInfo{Thinking: true, secret: secret}, `[{"type":"thinking","thinking":"Two plus two.","signature":"` + signThinking(secret, "Two plus two.") + `"},{"type":"text","text":"4"}]`},
			{RequestInfo{Thinking: true, ThinkingOmitted: true, secret: secret}, `[{"type":"thinking","thinking":"","signature":"` + signThinking(secret, "") + `"},{"type":"text","text":"4"}]`},
			{RequestInfo{}, `[{"type":"text","text":"4"}]`},
		}
		for _, c := range cases {
			out, u, err := ChatToMessage(body, "m", &c.info)
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Content json.RawMessage `json:"content"`
			}
			json.Unmarshal(out, &m)
			if !jsonEqual(t, m.Content, []byte(c.want)) {
				t.Errorf("%s, thinking %v omitted %v: content %s, want %s", field, c.info.Thinking, c.info.ThinkingOmitted, m.Content, c.want)
			}
			if u.OutputTokens != 7 {
				t.Errorf("usage %+v", u)
			}
		}
	}
}

// The prompt tokens an upstream read from its prefix cache reach a Messages client as Anthropic counts
// them: cache_read_input_tokens, and input_tokens for the rest; without cached tokens the usage is as
// before. Streams say the same in message_delta.
func TestCachedTokensAreCacheReads(t *testing.T) {
	body := []byte(`{"id":"chatcmpl-c","choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":960}}}`)
	out, u, err := ChatToMessage(body, "m", &RequestInfo{})
	if err != nil || u.CachedTokens != 960 || u.InputTokens != 1000 {
		t.Fatalf("usage %+v, %v", u, err)
	}
	var m struct{ Usage json.RawMessage }
	json.Unmarshal(out, &m)
	if want := `{"input_tokens":40,"output_tokens":7,"cache_read_input_tokens":960}`; string(m.Usage) != want {
		t.Fatalf("usage %s, want %s", m.Usage, want)
	}
	plain := []byte(`{"id":"chatcmpl-c","choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":7}}`)
	out, _, _ = ChatToMessage(plain, "m", &RequestInfo{})
	json.Unmarshal(out, &m)
	if want := `{"input_tokens":10,"output_tokens":7}`; string(m.Usage) != want {
		t.Fatalf("usage without a cache %s, want %s", m.Usage, want)
	}

	s := NewStream("m", &RequestInfo{}, 1000)
	s.Add(&StreamChunk{ID: "c", Choices: []StreamChoice{{Content: "4"}}})
	s.Add(&StreamChunk{ID: "c", Choices: []StreamChoice{{FinishReason: "stop"}}})
	s.Add(&StreamChunk{ID: "c", Usage: &Usage{InputTokens: 1000, OutputTokens: 1, CachedTokens: 960}})
	ev, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var delta string
	for _, e := range ev {
		if e.Name == "message_delta" {
			delta = string(e.Data)
		}
	}
	if !strings.Contains(delta, `"usage":{"input_tokens":40,"output_tokens":1,"cache_read_input_tokens":960}`) {
		t.Fatalf("message_delta %s", delta)
	}
}
