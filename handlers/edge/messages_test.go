package edge_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

func messagesBody(text string, extra ...any) map[string]any {
	m := map[string]any{"max_tokens": 64, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}}}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// events returns the (event, data) pairs of an Anthropic stream.
func events(body []byte) [][2]string {
	var out [][2]string
	var name string
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, [2]string{name, v})
		}
	}
	return out
}

func TestMessages(t *testing.T) {
	e := newEnv(t)
	e.deploy("msg-sim", base("sim-echo"), cloudapi.AuthNone, "", 0)
	e.deploy("msg-up", base("up"), cloudapi.AuthNone, "", 0)
	e.deploy("msg-native", base("up-native"), cloudapi.AuthNone, "", 0)
	e.deploy("msg-none", base("sim-lorem"), cloudapi.AuthNone, "", 0)

	for _, slug := range []string{"msg-sim", "msg-up", "msg-native"} {
		r := e.do("POST", slug, "/v1/messages", "", messagesBody("hello there"))
		m := r.json(t)
		if r.status != 200 || m["type"] != "message" || m["role"] != "assistant" || m["stop_reason"] == nil {
			t.Fatalf("%s: %d %s", slug, r.status, r.body)
		}
		if m["model"] != strings.TrimPrefix(map[string]string{"msg-sim": "sim-echo", "msg-up": "up", "msg-native": "up-native"}[slug], "") {
			t.Errorf("%s: model %v", slug, m["model"])
		}
		text := m["content"].([]any)[0].(map[string]any)["text"].(string)
		if slug == "msg-sim" && text != "hello there" {
			t.Errorf("echo through messages: %q", text)
		}
		if u := m["usage"].(map[string]any); u["output_tokens"].(float64) <= 0 {
			t.Errorf("%s usage %v", slug, u)
		}

		r = e.do("POST", slug, "/v1/messages", "", messagesBody("hello there", "stream", true))
		evs := events(r.body)
		if len(evs) < 5 || evs[0][0] != "message_start" || evs[len(evs)-1][0] != "message_stop" {
			t.Fatalf("%s stream:\n%s", slug, r.body)
		}
		var streamed strings.Builder
		for _, ev := range evs {
			var d struct {
				Type  string `json:"type"`
				Delta struct {
					Text string `json:"text"`
				} `json:"delta"`
				Message struct {
					Model string `json:"model"`
				} `json:"message"`
			}
			json.Unmarshal([]byte(ev[1]), &d)
			if d.Type != ev[0] {
				t.Errorf("%s: event %q carries type %q", slug, ev[0], d.Type)
			}
			if d.Type == "message_start" && d.Message.Model == "mock-model" {
				t.Errorf("%s: message_start names the upstream model", slug)
			}
			streamed.WriteString(d.Delta.Text)
		}
		if streamed.String() != text {
			t.Errorf("%s: streamed %q, plain %q", slug, streamed.String(), text)
		}
	}
	if p := e.mock.LastRequest().Path; p != "/v1/messages" {
		t.Errorf("native upstream not passed through: last path %s", p)
	}

	// Errors in the Anthropic shape.
	r := e.do("POST", "msg-none", "/v1/messages", "", messagesBody("x"))
	if m := r.json(t); r.status != 404 || m["type"] != "error" || m["error"].(map[string]any)["type"] != "not_found_error" {
		t.Fatalf("model without messages: %d %s", r.status, r.body)
	}
	r = e.do("POST", "msg-sim", "/v1/messages", "", `{"messages":[{"role":"user","content":"x"}]}`)
	if m := r.json(t); r.status != 400 || m["error"].(map[string]any)["type"] != "invalid_request_error" {
		t.Fatalf("missing max_tokens: %d %s", r.status, r.body)
	}
}

// A model whose upstream counts usage in every chunk (continuousUsage, vLLM's continuous_usage_stats)
// announces the prompt's exact count in message_start; relayed chat streams never ask for it, so their
// clients get the chunks OpenAI sends.
func TestMessageStartCountsThePrompt(t *testing.T) {
	e := newEnv(t)
	e.deploy("count-est", base("up"), cloudapi.AuthNone, "", 0)
	e.deploy("count-exact", base("up-counted"), cloudapi.AuthNone, "", 0)
	text := "a prompt long enough that an estimate at four characters a token is off by several tokens"
	plain := e.do("POST", "count-exact", "/v1/messages", "", messagesBody(text))
	want := plain.json(t)["usage"].(map[string]any)["input_tokens"].(float64)
	start := func(slug string) float64 {
		r := e.do("POST", slug, "/v1/messages", "", messagesBody(text, "stream", true))
		for _, ev := range events(r.body) {
			if ev[0] == "message_start" {
				var m struct {
					Message struct {
						Usage struct {
							InputTokens float64 `json:"input_tokens"`
						} `json:"usage"`
					} `json:"message"`
				}
				json.Unmarshal([]byte(ev[1]), &m)
				return m.Message.Usage.InputTokens
			}
		}
		t.Fatalf("%s: no message_start in %s", slug, r.body)
		return 0
	}
	if got := start("count-exact"); got != want {
		t.Errorf("message_start says %v input tokens, the answer %v", got, want)
	}
	if so := e.mock.LastRequest().Body["stream_options"].(map[string]any); so["continuous_usage_stats"] != true || so["include_usage"] != true {
		t.Errorf("the upstream was asked %v", so)
	}
	if got := start("count-est"); got == want {
		t.Errorf("without continuousUsage message_start is the estimate, yet it says %v", got)
	}
	e.do("POST", "count-exact", "/v1/chat/completions", "", map[string]any{"stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if so := e.mock.LastRequest().Body["stream_options"].(map[string]any); so["continuous_usage_stats"] != nil {
		t.Errorf("a relayed chat stream asked for continuous usage: %v", so)
	}
}
