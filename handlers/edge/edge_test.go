package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/edge"
)

func base(model string) cloudapi.Target {
	return cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: model}
}

var multi = cloudapi.Target{Kind: cloudapi.TargetMultiModel}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("auth-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	_, otherKey := e.deploy("other-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	body := chatBody("hello")

	r := e.do("POST", "auth-ep", "/v1/chat/completions", "", body)
	wantError(t, r, 401, "invalid_api_key")
	// The answer says how to send a key as a person reads it in a terminal's curl.
	if !strings.Contains(string(r.body), "Authorization: Bearer <API_KEY>") {
		t.Errorf("the 401 does not read as written: %s", r.body)
	}

	wrong := "sk-ep-wrongwrongwrongwrongwrong"
	r = e.do("POST", "auth-ep", "/v1/chat/completions", wrong, body)
	wantError(t, r, 401, "invalid_api_key")
	if strings.Contains(string(r.body), wrong) || strings.Contains(string(r.body), "wrongwrong") {
		t.Fatalf("error echoes the presented key: %s", r.body)
	}
	wantError(t, e.do("POST", "auth-ep", "/v1/chat/completions", otherKey, body), 401, "invalid_api_key")

	if r := e.do("POST", "auth-ep", "/v1/chat/completions", key, body); r.status != 200 {
		t.Fatalf("bearer key: %d %s", r.status, r.body)
	}
	if r := e.doHeaders("POST", "auth-ep", "/v1/chat/completions", body, map[string]string{"x-api-key": key}); r.status != 200 {
		t.Fatalf("x-api-key: %d %s", r.status, r.body)
	}

	// Revocation takes effect at once in this process.
	keys, err := e.srv.Service.ListKeys(context.Background(), e.pr, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Service.RevokeKey(context.Background(), e.pr, d.ID, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do("POST", "auth-ep", "/v1/chat/completions", key, body), 401, "invalid_api_key")

	// none mode: open to anyone, whatever key is sent.
	none := cloudapi.AuthNone
	e.update(d.ID, cloudapi.UpdateDeploymentRequest{AuthMode: &none})
	if r := e.do("POST", "auth-ep", "/v1/chat/completions", "", body); r.status != 200 {
		t.Fatalf("none mode: %d %s", r.status, r.body)
	}

	// Disabled, unknown and deleted endpoints: 404 whatever the auth.
	_, key3 := e.deploy("dis-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	off := false
	d3, _ := e.srv.Service.ListDeployments(context.Background(), e.pr, 0, "")
	for _, x := range d3.Items {
		if x.Slug == "dis-ep" {
			e.update(x.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off})
		}
	}
	wantError(t, e.do("POST", "dis-ep", "/v1/chat/completions", key3, body), 404, "not_found")
	wantError(t, e.do("POST", "dis-ep", "/v1/chat/completions", "", body), 404, "not_found")
	wantError(t, e.do("GET", "dis-ep", "/v1/models", key3, nil), 404, "not_found")
	wantError(t, e.do("POST", "no-such-ep", "/v1/chat/completions", "", body), 404, "not_found")
	if err := e.srv.Service.DeleteDeployment(context.Background(), e.pr, d.ID); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do("POST", "auth-ep", "/v1/chat/completions", "", body), 404, "not_found")

	// Anthropic shape on /v1/messages.
	r = e.doHeaders("POST", "other-ep", "/v1/messages", map[string]any{"max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "hi"}}},
		map[string]string{"x-api-key": "nope"})
	if r.status != 401 || r.json(t)["type"] != "error" || r.json(t)["error"].(map[string]any)["type"] != "authentication_error" {
		t.Fatalf("messages 401: %d %s", r.status, r.body)
	}
	// Claude Code retries a 401 for minutes unless told not to.
	if r.header.Get("x-should-retry") != "false" {
		t.Errorf("messages 401 without x-should-retry: false (%q)", r.header.Get("x-should-retry"))
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t)
	_, key := e.deploy("routes-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	// An SDK given the operation URL as its base URL appends its own route.
	wantError(t, e.do("POST", "routes-ep", "/v1/chat/completions/chat/completions", key, chatBody("x")), 404, "not_found")
	r := e.do("GET", "routes-ep", "/v1/chat/completions", key, nil)
	wantError(t, r, 405, "method_not_allowed")
	if r.header.Get("Allow") != "POST" {
		t.Errorf("Allow = %q", r.header.Get("Allow"))
	}
	r = e.do("POST", "routes-ep", "/v1/models", key, nil)
	wantError(t, r, 405, "method_not_allowed")
	if r.header.Get("Allow") != "GET" {
		t.Errorf("Allow = %q", r.header.Get("Allow"))
	}

	// A POST under an id route is an operation svc does not serve (openai's responses.compact()), not a
	// GET of an id: 404 in the surface's envelope, never 405 "use GET".
	for _, path := range []string{"/v1/responses/compact", "/v1/responses/resp_1/cancel", "/v1/models/sim-echo"} {
		m := wantError(t, e.do("POST", "routes-ep", path, key, map[string]any{"input": "x"}), 404, "not_found")
		if !strings.Contains(m["message"].(string), "no route POST "+path) {
			t.Errorf("POST %s: %v", path, m["message"])
		}
	}
	wantError(t, e.do("GET", "routes-ep", "/v1/responses/compact", key, nil), 404, "")
	r = e.do("DELETE", "routes-ep", "/v1/responses/resp_1", key, nil)
	wantError(t, r, 405, "method_not_allowed")

	// The path form reaches the same handler.
	req, _ := http.NewRequest("POST", e.srv.BaseURL+"/e/routes-ep/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"via path"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("path form: %d", resp.StatusCode)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	e.deploy("bad-ep", base("sim-echo"), cloudapi.AuthNone, "", 0)
	post := func(body any) reply { return e.do("POST", "bad-ep", "/v1/chat/completions", "", body) }

	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", edge.MaxBodyBytes) + `"}]}`
	wantError(t, post(big), 413, "body_too_large")
	m := wantError(t, post(`{"messages": [`), 400, "invalid_request")
	if !strings.Contains(m["message"].(string), "JSON") {
		t.Errorf("malformed JSON message does not name the problem: %v", m["message"])
	}
	wantError(t, post(`[1,2]`), 400, "invalid_request")
	if m := wantError(t, post(`{"model":"x"}`), 400, "invalid_request"); m["param"] != "messages" {
		t.Errorf("param = %v", m["param"])
	}
	wantError(t, post(`{"messages":[]}`), 400, "invalid_request")
	if m := wantError(t, post(`{"messages":[{"content":"x"}]}`), 400, ""); m["param"] != "messages[0].role" {
		t.Errorf("param = %v", m["param"])
	}
	if m := wantError(t, post(`{"messages":[{"role":"user","content":"x"},{"role":"user"}]}`), 400, ""); m["param"] != "messages[1].content" {
		t.Errorf("param = %v", m["param"])
	}
	wantError(t, post(`{"messages":[{"role":"user","content":"x"}],"max_tokens":"many"}`), 400, "")
	// Each shape problem names its field.
	for body, param := range map[string]any{
		`null`: nil,
		`"hi"`: nil,
		`{"model":5,"messages":[{"role":"user","content":"x"}]}`: "model",
		`{"messages":"hi"}`:                                                              "messages",
		`{"messages":[5]}`:                                                               "messages",
		`{"messages":[null]}`:                                                            "messages[0].role",
		`{"messages":[{"role":5,"content":"x"}]}`:                                        "messages",
		`{"messages":[{"role":"","content":"x"}]}`:                                       "messages[0].role",
		`{"messages":[{"role":"user","content":null}]}`:                                  "messages[0].content",
		`{"messages":[{"role":"user","content":5}]}`:                                     "messages[0].content",
		`{"messages":[{"role":"user","content":"x"}],"stream":"yes"}`:                    "stream",
		`{"messages":[{"role":"user","content":"x"}],"stream_options":[]}`:               "stream_options",
		`{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0}`:         "max_completion_tokens",
		`{"messages":[{"role":"user","content":"x"}],"stream":1}`:                        "stream",
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":1.5}`:                  "max_tokens",
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":1e3}`:                  "max_tokens",
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":-2}`:                   "max_tokens",
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":99999999999999999999}`: "max_tokens",
	} {
		if m := wantError(t, post(body), 400, "invalid_request"); m["param"] != param {
			t.Errorf("%s: param %v, want %v (%v)", body, m["param"], param, m["message"])
		}
	}
	// What is valid is read as JSON reads it: escapes decoded, text parts joined, a tool-calling
	// assistant turn without content, unknown fields. (A repeated name is refused: TestDuplicateKeys.)
	for body, want := range map[string]string{
		`{"messages":[{"role":"user","content":"a \"q\" \u00e9"}]}`:                                            `a "q" é`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]}`: "one two",
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"},{"role":"user","content":"after"}]}`: "after",
		`{"messages":[{"role":"user","content":"last","name":"n"}],"extra":{"a":[1]}}`: "last",
	} {
		r := post(body)
		if r.status != 200 {
			t.Errorf("%s: %d %s", body, r.status, r.body)
			continue
		}
		var c struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if json.Unmarshal(r.body, &c) != nil || len(c.Choices) != 1 || !strings.Contains(c.Choices[0].Message.Content, want) {
			t.Errorf("%s: answered %s, want the echo of %q", body, r.body, want)
		}
	}
}

// A name written twice in one object is a 400 naming it, on every surface (strictjson.Duplicate): svc
// and the upstream could otherwise each read a different one ({"max_tokens":5,"max_tokens":999999}).
func TestDuplicateKeys(t *testing.T) {
	e := newEnv(t)
	e.deploy("dup-sim", base("sim-echo"), cloudapi.AuthNone, "", 0)
	e.deploy("dup-native", base("up-native"), cloudapi.AuthNone, "", 0)
	msg := `"messages":[{"role":"user","content":"x"}]`
	for body, param := range map[string]string{
		`{"max_tokens":5,"max_tokens":999999,` + msg + `}`:                                                                   "max_tokens",
		`{` + msg + `,"stream":false,"STREAM":true}`:                                                                         "STREAM",
		`{"messages":[{"role":"user","content":"x"}],"messages":[{"role":"user","content":"y"}]}`:                            "messages",
		`{"messages":[{"role":"user","role":"system","content":"x"}]}`:                                                       "messages[0].role",
		`{` + msg + `,"stream_options":{"include_usage":false,"include_usage":true}}`:                                        "stream_options.include_usage",
		`{` + msg + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","type":"string"}}}]}`: "tools[0].function.parameters.type",
	} {
		m := wantError(t, e.do("POST", "dup-sim", "/v1/chat/completions", "", body), 400, "invalid_request")
		if m["param"] != param || !strings.Contains(m["message"].(string), `"`+param+`" appears more than once`) {
			t.Errorf("%s: param %v, message %v; want %s named", body, m["param"], m["message"], param)
		}
	}
	// The Messages API, translated or passed through (the upstream never sees the body).
	for _, slug := range []string{"dup-sim", "dup-native"} {
		n := len(e.mock.Requests())
		r := e.do("POST", slug, "/v1/messages", "", `{"max_tokens":5,"max_tokens":999999,`+msg+`}`)
		var env struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if r.status != 400 || json.Unmarshal(r.body, &env) != nil || env.Type != "error" || env.Error.Type != "invalid_request_error" ||
			!strings.Contains(env.Error.Message, "max_tokens") {
			t.Errorf("%s: %d %s", slug, r.status, r.body)
		}
		if len(e.mock.Requests()) != n {
			t.Errorf("%s: a body with a duplicate key reached the upstream", slug)
		}
	}
	// The Responses API, at the top and deep inside (the translation trusts the edge's check).
	for body, param := range map[string]string{
		`{"input":"a","input":"b"}`: "input",
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"a","text":"b"}]}]}`: "input[0].content[0].text",
		`{"input":"x","text":{"format":{"type":"text","type":"json_object"}}}`:                "text.format.type",
	} {
		m := wantError(t, e.do("POST", "dup-sim", "/v1/responses", "", body), 400, "invalid_request")
		if m["param"] != param || !strings.Contains(m["message"].(string), `"`+param+`" appears more than once`) {
			t.Errorf("%s: param %v, message %v; want %s named", body, m["param"], m["message"], param)
		}
	}
	// A translated body nested deeper than a translation reads (translate.MaxDepth) is refused, naming
	// where, though the translation takes the walker's depth for it instead of reading the body again.
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	for path, body := range map[string]string{
		"/v1/responses": `{"input":"x","metadata":` + deep + `}`,
		"/v1/messages":  `{"max_tokens":5,` + msg + `,"metadata":` + deep + `}`,
	} {
		n := len(e.mock.Requests())
		r := e.do("POST", "dup-sim", path, "", body)
		if r.status != 400 || !strings.Contains(string(r.body), "metadata"+strings.Repeat("[0]", 3)) {
			t.Errorf("%s nested 301 deep: %d %.300s", path, r.status, r.body)
		}
		if len(e.mock.Requests()) != n {
			t.Errorf("%s: a body nested too deep reached the upstream", path)
		}
	}
}

func TestTargets(t *testing.T) {
	e := newEnv(t)
	e.deploy("single-ep", base("sim-lorem"), cloudapi.AuthNone, "", 0)
	e.deploy("multi-ep", multi, cloudapi.AuthNone, "", 0)

	// Single target: the request's model is ignored and the answer names the pinned one.
	r := e.do("POST", "single-ep", "/v1/chat/completions", "", chatBody("hi", "model", "gpt-4o"))
	if r.status != 200 || r.json(t)["model"] != "sim-lorem" {
		t.Fatalf("single target: %d %s", r.status, r.body)
	}
	models := e.do("GET", "single-ep", "/v1/models", "", nil).json(t)
	if data := models["data"].([]any); models["object"] != "list" || len(data) != 1 || data[0].(map[string]any)["id"] != "sim-lorem" {
		t.Fatalf("single /v1/models: %v", models)
	}

	// Multi-model: by model, default when omitted, 404 model_not_found otherwise.
	if r := e.do("POST", "multi-ep", "/v1/chat/completions", "", chatBody("hi", "model", "sim-lorem")); r.json(t)["model"] != "sim-lorem" {
		t.Fatalf("multi pick: %s", r.body)
	}
	if r := e.do("POST", "multi-ep", "/v1/chat/completions", "", chatBody("echo me")); r.json(t)["model"] != "sim-echo" {
		t.Fatalf("multi default: %s", r.body)
	}
	wantError(t, e.do("POST", "multi-ep", "/v1/chat/completions", "", chatBody("hi", "model", "nope")), 404, "model_not_found")
	wantError(t, e.do("POST", "multi-ep", "/v1/chat/completions", "", chatBody("hi", "model", "base-private")), 404, "model_not_found")
	var ids []string
	for _, m := range e.do("GET", "multi-ep", "/v1/models", "", nil).json(t)["data"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "sim-echo,sim-lorem,sim-slow,up" {
		t.Fatalf("multi /v1/models = %v", ids)
	}
}

func TestSimulator(t *testing.T) {
	e := newEnv(t)
	e.deploy("sim-ep", base("sim-echo"), cloudapi.AuthNone, "", 0)
	r := e.do("POST", "sim-ep", "/v1/chat/completions", "", chatBody("one two three four"))
	m := r.json(t)
	choice := m["choices"].([]any)[0].(map[string]any)
	if choice["message"].(map[string]any)["content"] != "one two three four" || choice["finish_reason"] != "stop" || m["object"] != "chat.completion" {
		t.Fatalf("echo: %s", r.body)
	}
	if u := m["usage"].(map[string]any); u["completion_tokens"].(float64) != 4 || u["prompt_tokens"].(float64) <= 0 {
		t.Fatalf("usage: %v", u)
	}
	r = e.do("POST", "sim-ep", "/v1/chat/completions", "", chatBody("one two three four", "max_tokens", 2))
	choice = r.json(t)["choices"].([]any)[0].(map[string]any)
	if choice["message"].(map[string]any)["content"] != "one two" || choice["finish_reason"] != "length" {
		t.Fatalf("max_tokens: %s", r.body)
	}

	// Streams: one event per token, usage only when asked, ending with [DONE].
	for _, usage := range []bool{false, true} {
		body := chatBody("alpha beta gamma", "stream", true)
		if usage {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
		r := e.do("POST", "sim-ep", "/v1/chat/completions", "", body)
		if r.header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("content type %q", r.header.Get("Content-Type"))
		}
		data := sseData(r.body)
		if data[len(data)-1] != "[DONE]" {
			t.Fatalf("no [DONE]: %s", r.body)
		}
		var text strings.Builder
		sawUsage := false
		for _, d := range data[:len(data)-1] {
			var c struct {
				Model   string `json:"model"`
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
				Usage *struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(d), &c); err != nil {
				t.Fatal(err)
			}
			if c.Model != "sim-echo" {
				t.Fatalf("chunk model %q", c.Model)
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
			if c.Usage != nil {
				sawUsage = c.Usage.CompletionTokens == 3
			}
		}
		if text.String() != "alpha beta gamma" || sawUsage != usage {
			t.Fatalf("include_usage=%v: text %q, usage seen %v\n%s", usage, text.String(), sawUsage, r.body)
		}
	}
}
