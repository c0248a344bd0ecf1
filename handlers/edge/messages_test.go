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
