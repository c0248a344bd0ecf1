package edge_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// What agent clients call (docs/API.md, "Responses API", "Messages API", "Edge"): the Responses API
// translated and passed through, previous_response_id and stored responses from runs, Claude Code's
// requests and thinking through the Messages translation, count_tokens, one model, the extra routes,
// and 404s that say what they saw.

// namedEvents splits an event stream into (name, data) pairs.
func namedEvents(body []byte) (names []string, data []map[string]any) {
	for _, block := range strings.Split(string(body), "\n\n") {
		var name, d string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				d = v
			}
		}
		if d == "" {
			continue
		}
		var m map[string]any
		json.Unmarshal([]byte(d), &m)
		names, data = append(names, name), append(data, m)
	}
	return names, data
}

func TestResponsesTranslated(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("resp-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	body := map[string]any{"model": "ignored", "instructions": "Be brief.", "input": "hello agents", "store": false,
		"tools": []any{map[string]any{"type": "web_search"}}}
	r := e.do("POST", "resp-ep", "/v1/responses", key, body)
	resp := r.json(t)
	if r.status != 200 || resp["object"] != "response" || resp["status"] != "completed" || resp["model"] != "sim-echo" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	out := resp["output"].([]any)
	text := out[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	if text != "hello agents" {
		t.Errorf("output %v", out)
	}
	if got := r.header.Get("Svc-Ignored-Fields"); got != "store, tools[]:web_search" {
		t.Errorf("svc-ignored-fields %q", got)
	}
	// The run is the stored response: same id, the answer as sent, counted.
	id := resp["id"].(string)
	runs := e.runs(d.ID, 1)
	if len(runs) != 1 || "resp_"+strings.TrimPrefix(runs[0]["id"].(string), "run_") != id || runs[0]["promptTokens"].(int64) == 0 {
		t.Fatalf("runs %v, response %s", runs, id)
	}
	g := e.do("GET", "resp-ep", "/v1/responses/"+id, key, nil)
	if g.status != 200 || !jsonSame(t, g.body, r.body) {
		t.Errorf("GET: %d %s\nwant %s", g.status, g.body, r.body)
	}
	wantError(t, e.do("GET", "resp-ep", "/v1/responses/resp_nope", key, nil), 404, "not_found")

	// Streamed: the full event sequence, numbered, and the run keeps the final response.
	body["stream"] = true
	r = e.do("POST", "resp-ep", "/v1/responses", key, body)
	names, data := namedEvents(r.body)
	if r.status != 200 || names[0] != "response.created" || names[1] != "response.in_progress" || names[len(names)-1] != "response.completed" {
		t.Fatalf("%d %v", r.status, names)
	}
	deltas := ""
	for i, d := range data {
		if int(d["sequence_number"].(float64)) != i || d["type"] != names[i] {
			t.Fatalf("event %d: %v", i, d)
		}
		if names[i] == "response.output_text.delta" {
			deltas += d["delta"].(string)
		}
	}
	final := data[len(data)-1]["response"].(map[string]any)
	if deltas != "hello agents" || final["usage"].(map[string]any)["output_tokens"].(float64) == 0 {
		t.Errorf("deltas %q, final %v", deltas, final)
	}
	runs = e.runs(d.ID, 2)
	var recorded map[string]any
	json.Unmarshal([]byte(runs[1]["response"].(string)), &recorded)
	if recorded["id"] != final["id"] || recorded["status"] != "completed" {
		t.Errorf("recorded %v", recorded)
	}

	// Bad input: 400 in OpenAI's shape naming the field.
	er := wantError(t, e.do("POST", "resp-ep", "/v1/responses", key, map[string]any{"input": "x", "truncation": "auto"}), 400, "invalid_request")
	if er["param"] != "truncation" {
		t.Errorf("param %v", er["param"])
	}
}

func jsonSame(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// previous_response_id continues from the stored runs: the upstream sees the earlier turns.
func TestResponsesPrevious(t *testing.T) {
	e := newEnv(t)
	e.deploy("prev-ep", base("up"), cloudapi.AuthNone, "", 0)
	first := e.do("POST", "prev-ep", "/v1/responses", "", map[string]any{"input": "my name is Ada", "instructions": "old"}).json(t)
	second := e.do("POST", "prev-ep", "/v1/responses", "", map[string]any{"input": "what is my name?", "previous_response_id": first["id"]})
	if second.status != 200 || second.json(t)["previous_response_id"] != first["id"] {
		t.Fatalf("%d %s", second.status, second.body)
	}
	third := e.do("POST", "prev-ep", "/v1/responses", "", map[string]any{"input": "and again?", "previous_response_id": second.json(t)["id"]})
	if third.status != 200 {
		t.Fatalf("%d %s", third.status, third.body)
	}
	msgs := e.mock.LastRequest().Body["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if strings.Join(roles, " ") != "user assistant user assistant user" || msgs[0].(map[string]any)["content"] != "my name is Ada" {
		t.Errorf("the upstream got %v", msgs)
	}
	er := wantError(t, e.do("POST", "prev-ep", "/v1/responses", "", map[string]any{"input": "x", "previous_response_id": "resp_unknown"}), 400, "previous_response_not_found")
	if !strings.Contains(er["message"].(string), "resp_unknown") {
		t.Errorf("message %v", er["message"])
	}
	// Retention none keeps no runs: it says so.
	e.deploy("prev-none", base("up"), cloudapi.AuthNone, "none", 0)
	er = wantError(t, e.do("POST", "prev-none", "/v1/responses", "", map[string]any{"input": "x", "previous_response_id": first["id"]}), 400, "previous_response_not_found")
	if !strings.Contains(er["message"].(string), "retention is none") {
		t.Errorf("message %v", er["message"])
	}

	// Item references name items of stored responses: they are read back in place.
	out := first["output"].([]any)
	ref := out[len(out)-1].(map[string]any)["id"].(string)
	input := []any{map[string]any{"role": "user", "content": "my name is Ada"}, map[string]any{"type": "item_reference", "id": ref},
		map[string]any{"role": "user", "content": "and now?"}}
	if r := e.do("POST", "prev-ep", "/v1/responses", "", map[string]any{"input": input}); r.status != 200 {
		t.Fatalf("item reference: %d %s", r.status, r.body)
	}
	msgs = e.mock.LastRequest().Body["messages"].([]any)
	if len(msgs) != 3 || msgs[1].(map[string]any)["role"] != "assistant" || msgs[1].(map[string]any)["content"] == "" {
		t.Errorf("the upstream got %v", msgs)
	}
	// Where no run is kept, or the id is none of svc's, a 400 naming the item in OpenAI's words.
	for _, slug := range []string{"prev-none", "prev-ep"} {
		id := ref
		if slug == "prev-ep" {
			id = "msg_nothing"
		}
		bad := []any{map[string]any{"role": "user", "content": "x"}, map[string]any{"type": "item_reference", "id": id}}
		er = wantError(t, e.do("POST", slug, "/v1/responses", "", map[string]any{"input": bad}), 400, "invalid_request")
		if er["param"] != "input[1]" || !strings.Contains(er["message"].(string), "Item with id '"+id+"' not found") {
			t.Errorf("%s: %v", slug, er)
		}
	}
}

// A model whose upstream serves /v1/responses gets the request as sent, its model renamed, and the
// answer renamed back; streams are relayed event by event and counted.
func TestResponsesPassthrough(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("resp-pass", base("up-responses"), cloudapi.AuthNone, "", 0)
	r := e.do("POST", "resp-pass", "/v1/responses", "", map[string]any{"model": "x", "input": "hello", "include": []string{"reasoning.encrypted_content"}})
	if r.status != 200 || r.json(t)["model"] != "up-responses" || r.header.Get("Svc-Ignored-Fields") != "" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	last := e.mock.LastRequest()
	if last.Path != "/v1/responses" || last.Body["model"] != "mock-model" || last.Body["include"] == nil {
		t.Errorf("upstream got %s %v", last.Path, last.Body)
	}
	r = e.do("POST", "resp-pass", "/v1/responses", "", map[string]any{"input": "hello", "stream": true})
	names, data := namedEvents(r.body)
	if names[len(names)-1] != "response.completed" || data[0]["response"].(map[string]any)["model"] != "up-responses" {
		t.Fatalf("%v %s", names, r.body)
	}
	runs := e.runs(d.ID, 2)
	if len(runs) != 2 || runs[1]["completionTokens"].(int64) != 8 || !strings.Contains(runs[1]["response"].(string), `"status":"completed"`) {
		t.Errorf("runs %v", runs)
	}
}

// Claude Code's recorded default request translates; a reasoning model's answer carries a signed
// thinking block, which goes back in the next turn.
func TestClaudeCodeThroughTranslation(t *testing.T) {
	e := newEnv(t)
	e.deploy("cc-ep", base("sim-think"), cloudapi.AuthNone, "", 0)
	cc, err := os.ReadFile("../../internal/translate/testdata/request/claude_code.messages.json")
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219,context-management-2025-06-27"}
	r := e.doHeaders("POST", "cc-ep", "/v1/messages?beta=true", cc, headers)
	names, data := namedEvents(r.body)
	if r.status != 200 || names[0] != "message_start" || names[len(names)-1] != "message_stop" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := r.header.Get("Svc-Ignored-Fields"); got != "context_management, system[].cache_control, messages[].content[].cache_control, anthropic-beta" {
		t.Errorf("svc-ignored-fields %q", got)
	}
	var thinking, signature, text string
	for _, d := range data {
		if delta, ok := d["delta"].(map[string]any); ok {
			switch delta["type"] {
			case "thinking_delta":
				thinking += delta["thinking"].(string)
			case "signature_delta":
				signature = delta["signature"].(string)
			case "text_delta":
				text += delta["text"].(string)
			}
		}
	}
	if thinking == "" || signature == "" || text == "" {
		t.Fatalf("thinking %q signature %q text %q", thinking, signature, text)
	}
	// The next turn carries the thinking block back; svc verifies it and the answer comes.
	next := map[string]any{"max_tokens": 100, "thinking": map[string]any{"type": "adaptive"}, "messages": []any{
		map[string]any{"role": "user", "content": "run echo hi"},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": thinking, "signature": signature},
			map[string]any{"type": "text", "text": text}}},
		map[string]any{"role": "user", "content": "thanks"}}}
	r = e.doHeaders("POST", "cc-ep", "/v1/messages", next, headers)
	m := r.json(t)
	content := m["content"].([]any)
	if r.status != 200 || content[0].(map[string]any)["type"] != "thinking" || content[1].(map[string]any)["text"] != "thanks" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if strings.Contains(r.header.Get("Svc-Ignored-Fields"), ":thinking") {
		t.Errorf("the block svc signed was not verified: %s", r.header.Get("Svc-Ignored-Fields"))
	}
	// PDF documents are refused as Anthropic words it.
	pdf := map[string]any{"max_tokens": 10, "messages": []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}}}}}
	r = e.doHeaders("POST", "cc-ep", "/v1/messages", pdf, headers)
	if r.status != 400 || r.json(t)["type"] != "error" || !strings.Contains(string(r.body), "not supported") {
		t.Errorf("%d %s", r.status, r.body)
	}
}

func TestCountTokens(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("count-sim", base("sim-echo"), cloudapi.AuthNone, "", 0)
	e.deploy("count-up", base("up"), cloudapi.AuthNone, "", 0)
	body := map[string]any{"model": "x", "system": "be brief", "messages": []any{map[string]any{"role": "user", "content": "what is two plus two"}}}
	// The simulator counts as its answers count (3 + 4 a message + its words), not by svc's estimate.
	r := e.do("POST", "count-sim", "/v1/messages/count_tokens?beta=true", "", body)
	if r.status != 200 || r.json(t)["input_tokens"].(float64) != 3+(4+2)+(4+5) {
		t.Errorf("%d %s", r.status, r.body)
	}
	answered := map[string]any{"max_tokens": 8}
	for k, v := range body {
		answered[k] = v
	}
	e.deploy("count-sim-answer", base("sim-echo"), cloudapi.AuthNone, "", 0)
	if a := e.do("POST", "count-sim-answer", "/v1/messages", "", answered); a.json(t)["usage"].(map[string]any)["input_tokens"] != r.json(t)["input_tokens"] {
		t.Errorf("count %s, answer %s", r.body, a.body)
	}
	// vLLM's /tokenize counts where the upstream has one (the mock counts words).
	r = e.do("POST", "count-up", "/v1/messages/count_tokens", "", body)
	if r.status != 200 || r.json(t)["input_tokens"].(float64) != 7 || e.mock.LastRequest().Path != "/tokenize" {
		t.Errorf("%d %s (upstream saw %s)", r.status, r.body, e.mock.LastRequest().Path)
	}
	// A count is a run that generated nothing.
	runs := e.runs(d.ID, 1)
	if len(runs) != 1 || runs[0]["promptTokens"].(int64) != 0 || runs[0]["completionTokens"].(int64) != 0 {
		t.Errorf("runs %v", runs)
	}
	r = e.do("POST", "count-sim", "/v1/messages/count_tokens", "", map[string]any{"messages": "nope"})
	if r.status != 400 || r.json(t)["type"] != "error" {
		t.Errorf("%d %s", r.status, r.body)
	}
}

func TestModelByID(t *testing.T) {
	e := newEnv(t)
	e.deploy("one-ep", base("sim-lorem"), cloudapi.AuthNone, "", 0)
	e.deploy("many-ep", multi, cloudapi.AuthNone, "", 0)
	if r := e.do("GET", "one-ep", "/v1/models/sim-lorem", "", nil); r.status != 200 || r.json(t)["id"] != "sim-lorem" || r.json(t)["object"] != "model" {
		t.Errorf("%d %s", r.status, r.body)
	}
	wantError(t, e.do("GET", "one-ep", "/v1/models/sim-echo", "", nil), 404, "model_not_found")
	if r := e.do("GET", "many-ep", "/v1/models/up", "", nil); r.status != 200 || r.json(t)["id"] != "up" {
		t.Errorf("%d %s", r.status, r.body)
	}
	wantError(t, e.do("GET", "many-ep", "/v1/models/base-private", "", nil), 404, "model_not_found")
}

func TestExtraRoutes(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("routes-sim", base("sim-echo"), cloudapi.AuthNone, "", 0)
	e.deploy("routes-lorem", base("sim-lorem"), cloudapi.AuthNone, "", 0)
	e.deploy("routes-up", base("up-responses"), cloudapi.AuthNone, "", 0)
	r := e.do("POST", "routes-sim", "/v1/embeddings", "", map[string]any{"model": "x", "input": []string{"a cat", "a dog"}})
	emb := r.json(t)
	if r.status != 200 || emb["model"] != "sim-echo" || len(emb["data"].([]any)) != 2 || len(emb["data"].([]any)[0].(map[string]any)["embedding"].([]any)) != 32 {
		t.Fatalf("%d %.300s", r.status, r.body)
	}
	r = e.do("POST", "routes-sim", "/v1/completions", "", map[string]any{"prompt": "Once upon", "max_tokens": 2})
	if r.status != 200 || r.json(t)["object"] != "text_completion" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	r = e.do("POST", "routes-sim", "/v1/completions", "", map[string]any{"prompt": "Once upon", "stream": true})
	data := sseData(r.body)
	if r.status != 200 || data[len(data)-1] != "[DONE]" || strings.Contains(string(r.body), `"usage":{`) {
		t.Errorf("%d %s", r.status, r.body)
	}
	// Each call is a run (found by its request: the three may share a millisecond, and runs of one
	// millisecond have no order among them).
	runs := e.runs(d.ID, 3)
	byRequest := map[string]map[string]any{}
	for _, run := range runs {
		req := run["request"].(string)
		switch {
		case strings.Contains(req, `"input"`):
			byRequest["embeddings"] = run
		case strings.Contains(req, `"stream":true`):
			byRequest["streamed"] = run
		default:
			byRequest["completions"] = run
		}
	}
	if emb, st := byRequest["embeddings"], byRequest["streamed"]; len(runs) != 3 || len(byRequest) != 3 || emb["promptTokens"].(int64) != 4 ||
		st["completionTokens"].(int64) == 0 || !strings.Contains(st["response"].(string), `"object":"text_completion"`) {
		t.Errorf("runs %v", runs)
	}
	// A model whose entry does not list the route: 404 naming it.
	er := wantError(t, e.do("POST", "routes-lorem", "/v1/embeddings", "", map[string]any{"input": "x"}), 404, "model_not_found")
	if !strings.Contains(er["message"].(string), `"sim-lorem"`) {
		t.Errorf("message %v", er["message"])
	}
	// An upstream model that lists it: passed through, the model renamed.
	// max_tokens is checked as chat checks it, before any upstream sees it.
	for _, bad := range []any{0, -3, 1.5, "5", true} {
		er := wantError(t, e.do("POST", "routes-up", "/v1/completions", "", map[string]any{"prompt": "hi", "max_tokens": bad}), 400, "invalid_request")
		if er["param"] != "max_tokens" {
			t.Errorf("max_tokens %v: %v", bad, er)
		}
	}
	e.do("POST", "routes-up", "/v1/completions", "", map[string]any{"model": "x", "prompt": "hi"})
	if last := e.mock.LastRequest(); last.Path != "/v1/completions" || last.Body["model"] != "mock-model" {
		t.Errorf("upstream got %s %v", last.Path, last.Body)
	}
	wantError(t, e.do("POST", "routes-up", "/v1/embeddings", "", map[string]any{"input": "x"}), 404, "model_not_found")
}

// A path that is no route says what it saw, in the shape of the surface it looks like.
func TestNoRouteSaysWhatItSaw(t *testing.T) {
	e := newEnv(t)
	e.deploy("hint-ep", base("sim-echo"), cloudapi.AuthNone, "", 0)
	for path, says := range map[string]string{
		"/v1/chat/completions/chat/completions": "the operation /chat/completions twice",
		"/chat/completions":                     "lacks /v1",
		"/v1/v1/chat/completions":               "/v1 twice",
		"/v1/v1/messages":                       "must not end in /v1",
		"/v1/messages/v1/messages":              "without /v1 or an operation path",
		"/v1/unknown":                           "the routes are",
	} {
		r := e.do("POST", "hint-ep", path, "", map[string]any{})
		if r.status != 404 || !strings.Contains(string(r.body), says) {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
		if strings.Contains(path, "messages") && r.json(t)["type"] != "error" {
			t.Errorf("%s: not Anthropic's shape: %s", path, r.body)
		}
	}
}

// The reasoning model answers thinking through the Messages translation, plain, when asked for it.
func TestThinkingPlain(t *testing.T) {
	e := newEnv(t)
	e.deploy("think-ep", base("sim-think"), cloudapi.AuthNone, "", 0)
	ask := func(thinking any) []any {
		body := map[string]any{"max_tokens": 2000, "messages": []any{map[string]any{"role": "user", "content": "why?"}}}
		if thinking != nil {
			body["thinking"] = thinking
		}
		r := e.do("POST", "think-ep", "/v1/messages", "", body)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return r.json(t)["content"].([]any)
	}
	if c := ask(map[string]any{"type": "enabled", "budget_tokens": 1024}); len(c) != 2 || c[0].(map[string]any)["type"] != "thinking" {
		t.Errorf("enabled: %v", c)
	}
	if c := ask(nil); len(c) != 1 || c[0].(map[string]any)["type"] != "text" {
		t.Errorf("not asked: %v", c)
	}
	_ = mockupstream.Config{}
}

// A reasoning model's Responses answer says how many of its output tokens were reasoning, plain and
// streamed, as OpenAI's do (Codex and the Agents SDK show it).
func TestResponsesReasoningTokens(t *testing.T) {
	e := newEnv(t)
	e.deploy("think-resp", base("sim-think"), cloudapi.AuthNone, "", 0)
	body := map[string]any{"input": "why is the sky blue?", "reasoning": map[string]any{"effort": "low"}}
	check := func(how string, resp map[string]any) {
		t.Helper()
		u := resp["usage"].(map[string]any)
		reasoning := u["output_tokens_details"].(map[string]any)["reasoning_tokens"].(float64)
		var words int
		for _, item := range resp["output"].([]any) {
			if it := item.(map[string]any); it["type"] == "reasoning" {
				words += len(strings.Fields(it["content"].([]any)[0].(map[string]any)["text"].(string)))
			}
		}
		if words == 0 || reasoning != float64(words) || reasoning >= u["output_tokens"].(float64) {
			t.Errorf("%s: reasoning_tokens %v of %v output tokens, for %d words of reasoning", how, reasoning, u["output_tokens"], words)
		}
	}
	r := e.do("POST", "think-resp", "/v1/responses", "", body)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	check("plain", r.json(t))
	body["stream"] = true
	r = e.do("POST", "think-resp", "/v1/responses", "", body)
	_, data := namedEvents(r.body)
	if r.status != 200 || len(data) == 0 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	check("streamed", data[len(data)-1]["response"].(map[string]any))
}

// A conversation assembled from stored turns is bounded as a request body is (docs/OPERATIONS.md, "Bounds"):
// a continuation past conv.MaxBytes is a 400 conversation_too_long naming previous_response_id, read no
// further than the bound, and the chain below it still goes on.
func TestResponsesConversationBounded(t *testing.T) {
	e := newEnv(t)
	e.deploy("long-ep", base("sim-echo"), cloudapi.AuthNone, cloudapi.RetentionDays, 7)
	big := strings.Repeat("lorem ipsum ", (9<<20)/10/12) // about 0.9 MiB, echoed back as the answer
	prev := ""
	for i := 0; i < 2; i++ {
		body := map[string]any{"input": big}
		if prev != "" {
			body["previous_response_id"] = prev
		}
		r := e.do("POST", "long-ep", "/v1/responses", "", body)
		if r.status != 200 {
			t.Fatalf("turn %d: %d %.300s", i+1, r.status, r.body)
		}
		prev = r.json(t)["id"].(string)
	}
	// Two turns of about 1.8 MiB each and 0.9 MiB more: past 4 MiB.
	er := wantError(t, e.do("POST", "long-ep", "/v1/responses", "", map[string]any{"input": big, "previous_response_id": prev}), 400, "conversation_too_long")
	if er["param"] != "previous_response_id" || !strings.Contains(er["message"].(string), "4 MiB") {
		t.Errorf("error %v", er)
	}
	// A short continuation of the same chain fits.
	if r := e.do("POST", "long-ep", "/v1/responses", "", map[string]any{"input": "short", "previous_response_id": prev}); r.status != 200 {
		t.Fatalf("short continuation: %d %.300s", r.status, r.body)
	}
}
