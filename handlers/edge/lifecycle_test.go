package edge_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/mockupstream"
)

// runRequestIDs returns the request ids stored on a deployment's runs in the order they were written
// (runs of the same millisecond have no order by time).
func (e *env) runRequestIDs(deploymentID string, n int) []string {
	e.t.Helper()
	e.runs(deploymentID, n) // waits for the recorder
	rows, err := e.db.Query(`SELECT request_id, upstream_request_id FROM runs WHERE deployment_id = ? ORDER BY rowid`, deploymentID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, up string
		if err := rows.Scan(&id, &up); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, id+"|"+up)
	}
	return out
}

func TestRequestIDs(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("rid-ep", base("up"), cloudapi.AuthNone, "", 0)

	// The caller's id is kept, answered, sent upstream (the mock echoes it as its own) and stored.
	r := e.doHeaders("POST", "rid-ep", "/v1/chat/completions", chatBody("hi"), map[string]string{"X-Request-Id": "trace-abc-123"})
	if r.status != 200 || r.header.Get("X-Request-Id") != "trace-abc-123" {
		t.Fatalf("caller's request id not answered: %d %q", r.status, r.header.Get("X-Request-Id"))
	}
	if got := r.header.Get("X-Upstream-Request-Id"); got != "trace-abc-123" {
		t.Errorf("upstream request id %q: the upstream did not get svc's id, or its answer was not relayed", got)
	}
	// An id that is not sane (control characters, too long) is replaced by a new one.
	for _, bad := range []string{"has space", strings.Repeat("x", 129)} {
		r = e.doHeaders("POST", "rid-ep", "/v1/chat/completions", chatBody("hi"), map[string]string{"X-Request-Id": bad})
		if id := r.header.Get("X-Request-Id"); id == bad || !strings.HasPrefix(id, "req_") {
			t.Errorf("request id %q answered for %q", id, bad)
		}
	}
	// Errors carry it too, even before the deployment is known.
	r = e.do("POST", "no-such-ep", "/v1/chat/completions", "", chatBody("hi"))
	if r.status != 404 || r.header.Get("X-Request-Id") == "" {
		t.Errorf("404 without a request id: %d", r.status)
	}
	ids := e.runRequestIDs(d.ID, 3)
	if len(ids) != 3 || ids[0] != "trace-abc-123|trace-abc-123" {
		t.Fatalf("stored request ids %q", ids)
	}
}

func TestUpstreamErrorFidelity(t *testing.T) {
	e := newEnv(t)
	e.deploy("fid-ep", base("up"), cloudapi.AuthNone, "", 0)
	rateLimited := mockupstream.Config{APIKey: upstreamKey, FailStatus: 429,
		FailBody:    `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		FailHeaders: map[string]string{"Retry-After": "7", "X-Request-Id": "up-req-42"}}
	e.mock.Configure(rateLimited)
	for _, stream := range []bool{false, true} {
		r := e.do("POST", "fid-ep", "/v1/chat/completions", "", chatBody("hi", "stream", stream))
		m := wantError(t, r, 429, "rate_limit_exceeded")
		if m["type"] != "rate_limit_error" || m["message"] != "Rate limit reached for requests" {
			t.Errorf("stream=%v: relayed 429 %s", stream, r.body)
		}
		if r.header.Get("Retry-After") != "7" || r.header.Get("X-Upstream-Request-Id") != "up-req-42" {
			t.Errorf("stream=%v: Retry-After %q, upstream id %q", stream, r.header.Get("Retry-After"), r.header.Get("X-Upstream-Request-Id"))
		}
	}
	// The Messages surface names Anthropic's types.
	msg := map[string]any{"max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	for _, tc := range []struct {
		cfg    mockupstream.Config
		status int
		typ    string
	}{
		{rateLimited, 429, "rate_limit_error"},
		{mockupstream.Config{APIKey: upstreamKey, FailStatus: 503, FailBody: `{"error":{"message":"busy","type":"server_error"}}`}, 503, "overloaded_error"},
		{mockupstream.Config{APIKey: upstreamKey, FailStatus: 529, FailBody: `{"error":{"message":"busy","type":"server_error"}}`}, 529, "overloaded_error"},
	} {
		e.mock.Configure(tc.cfg)
		r := e.do("POST", "fid-ep", "/v1/messages", "", msg)
		var env struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if r.status != tc.status || json.Unmarshal(r.body, &env) != nil || env.Type != "error" || env.Error.Type != tc.typ {
			t.Errorf("messages %d: got %d %s, want type %s", tc.status, r.status, r.body, tc.typ)
		}
	}
	// The operator's upstream key is wrong: a 502 naming the model, not a 401 that blames the caller.
	e.mock.Configure(mockupstream.Config{APIKey: "another-key"})
	r := e.do("POST", "fid-ep", "/v1/chat/completions", "", chatBody("hi"))
	m := wantError(t, r, 502, "upstream_auth_failed")
	if !strings.Contains(m["message"].(string), `"up"`) || strings.Contains(string(r.body), upstreamKey) {
		t.Errorf("upstream auth failure message: %s", r.body)
	}
	// Each failed upstream call is counted by catalog model and kind.
	resp, err := http.Get(e.srv.BaseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`svc_upstream_errors_total{kind="rate_limit_exceeded",model="up"} 3`,
		`svc_upstream_errors_total{kind="upstream_auth_failed",model="up"} 1`,
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestModelsCreated(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("created-ep", base("sim-echo"), cloudapi.AuthNone, "", 0)
	e.deploy("created-multi", multi, cloudapi.AuthNone, "", 0)
	for _, slug := range []string{"created-ep", "created-multi"} {
		var list struct {
			Data []struct {
				ID      string
				Created int64
			}
		}
		r := e.do("GET", slug, "/v1/models", "", nil)
		if err := json.Unmarshal(r.body, &list); err != nil || len(list.Data) == 0 {
			t.Fatalf("%s: %s", slug, r.body)
		}
		for _, m := range list.Data {
			if m.Created < 1_600_000_000 {
				t.Errorf("%s: model %s created %d", slug, m.ID, m.Created)
			}
		}
		if slug == "created-ep" && list.Data[0].Created != d.CreatedAt.Unix() {
			t.Errorf("pinned model created %d, want the deployment's %d", list.Data[0].Created, d.CreatedAt.Unix())
		}
	}
}

// Every authorised inference request is recorded exactly once, whatever its path.
func TestRunsRecordedOnce(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("once-ep", base("up"), cloudapi.AuthNone, "", 0)
	var ids []string
	call := func(path string, body any) {
		r := e.do("POST", "once-ep", path, "", body)
		ids = append(ids, r.header.Get("X-Request-Id"))
	}
	msg := func(extra ...any) map[string]any {
		m := map[string]any{"max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi there"}}}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	call("/v1/chat/completions", chatBody("plain"))
	call("/v1/chat/completions", chatBody("streamed", "stream", true))
	call("/v1/chat/completions", `{"messages": "not an array"}`)
	call("/v1/messages", msg())
	call("/v1/messages", msg("stream", true))
	call("/v1/messages", msg("thinking", map[string]any{"type": "enabled", "budget_tokens": 1024}))
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 10, CutAfter: 3})
	call("/v1/chat/completions", chatBody("cut", "stream", true))
	call("/v1/messages", msg("stream", true))
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, FailStatus: 500, FailBody: `{"error":{"message":"boom"}}`})
	call("/v1/chat/completions", chatBody("failed"))
	e.do("GET", "once-ep", "/v1/models", "", nil) // a listing, not a run

	stored := e.runRequestIDs(d.ID, len(ids)+1)
	if len(stored) != len(ids) {
		t.Fatalf("%d runs for %d requests", len(stored), len(ids))
	}
	seen := map[string]int{}
	for _, s := range stored {
		id, _, _ := strings.Cut(s, "|")
		seen[id]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("request %s recorded %d times", id, seen[id])
		}
	}
}

// A stream cut midway is recorded with what it delivered, counted when the upstream sent no usage.
func TestCutStreamKeepsUsage(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("cutuse-ep", base("up"), cloudapi.AuthNone, "", 0)
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 10, CutAfter: 4})
	e.do("POST", "cutuse-ep", "/v1/chat/completions", "", chatBody("count these prompt words please", "stream", true))
	r := e.do("POST", "cutuse-ep", "/v1/messages", "", map[string]any{"max_tokens": 32, "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "count these prompt words please"}}})
	// The client learns of the cut from a last event in the Anthropic format, not a broken connection.
	if r.status != 200 || !strings.Contains(string(r.body), "event: error\ndata: {\"type\":\"error\"") {
		t.Errorf("cut Messages stream without an error event:\n%s", r.body)
	}
	runs := e.runs(d.ID, 2)
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	for _, run := range runs {
		if run["status"] != "error" || run["completionTokens"] != int64(4) || run["promptTokens"].(int64) < 1 {
			t.Errorf("cut run: status %v, tokens %v/%v, want error with 4 completion tokens and a prompt count",
				run["status"], run["promptTokens"], run["completionTokens"])
		}
		if !strings.Contains(run["response"].(string), "ended the stream early") {
			t.Errorf("cut run's response lacks the error: %s", run["response"])
		}
	}
}

// An upstream that reports no usage (some OpenAI-compatible servers never do) does not make its calls
// free: svc counts them, streamed or not, on both surfaces (Messages translated here, passed through in
// TestUnreportedUsageIsCountedOnPassthrough).
func TestUnreportedUsageIsCounted(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("nouse-ep", base("up"), cloudapi.AuthNone, "", 0)
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 8, NoUsage: true})
	prompt := "count these prompt words please"
	for _, stream := range []bool{false, true} {
		if r := e.do("POST", "nouse-ep", "/v1/chat/completions", "", chatBody(prompt, "stream", stream)); r.status != 200 {
			t.Fatalf("chat (stream %v): %d %s", stream, r.status, r.body)
		}
		if r := e.do("POST", "nouse-ep", "/v1/messages", "", map[string]any{"max_tokens": 32, "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": prompt}}}); r.status != 200 {
			t.Fatalf("messages (stream %v): %d %s", stream, r.status, r.body)
		}
	}
	runs := e.runs(d.ID, 4)
	if len(runs) != 4 {
		t.Fatalf("%d runs", len(runs))
	}
	for _, run := range runs {
		// 31 characters of prompt at four a token; 8 words of answer, a token each when streamed and
		// about 40 characters of text otherwise.
		if run["status"] != "ok" || run["promptTokens"] != int64(8) || run["completionTokens"].(int64) < 8 {
			t.Errorf("run %s: status %v, tokens %v/%v, want ok with 8 prompt tokens and at least 8 completion tokens",
				run["request"], run["status"], run["promptTokens"], run["completionTokens"])
		}
	}
}

// A Messages call passed through to an upstream that serves the API itself, and reports no usage, is
// counted by svc too, plain and streamed: recorded with estimated tokens, and charged to a tokens limit.
func TestUnreportedUsageIsCountedOnPassthrough(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("nouse-native", base("up-native"), cloudapi.AuthFixedAPIKey, "", 0)
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 8, NoUsage: true, ServeMessages: true})
	prompt := "count these prompt words please"
	for _, stream := range []bool{false, true} {
		r := e.do("POST", "nouse-native", "/v1/messages", key, map[string]any{"max_tokens": 32, "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": prompt}}})
		if r.status != 200 || strings.Contains(string(r.body), "input_tokens") {
			t.Fatalf("messages (stream %v): %d, want 200 and no usage from the upstream: %s", stream, r.status, r.body)
		}
	}
	if p := e.mock.LastRequest().Path; p != "/v1/messages" {
		t.Fatalf("not passed through: the upstream was asked %s", p)
	}
	runs := e.runs(d.ID, 2)
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	var spent int64
	for _, run := range runs {
		// 31 characters of prompt at four a token; 8 words of answer, a token per streamed delta, and
		// about 40 characters of text when not streamed.
		if run["status"] != "ok" || run["promptTokens"] != int64(8) || run["completionTokens"].(int64) < 8 {
			t.Errorf("run %s: status %v, tokens %v/%v, want ok with 8 prompt tokens and at least 8 completion tokens",
				run["request"], run["status"], run["promptTokens"], run["completionTokens"])
		}
		spent += run["promptTokens"].(int64) + run["completionTokens"].(int64)
	}

	// The counted tokens are charged to the tokens limit: a limit smaller than one call is spent by it.
	e.limitKey(d.ID, core.RateLimitsChange{TokensPerMinute: limit(int(spent / 2))})
	body := map[string]any{"max_tokens": 32, "messages": []any{map[string]any{"role": "user", "content": prompt}}}
	if r := e.do("POST", "nouse-native", "/v1/messages", key, body); r.status != 200 {
		t.Fatalf("first call under the limit: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "nouse-native", "/v1/messages", key, body); r.status != 429 {
		t.Fatalf("second call: %d %s, want 429: the first one's counted tokens were not charged", r.status, r.body)
	}
}

// Runs keep the tool calls of streamed answers, on both surfaces.
func TestRunsKeepStreamedToolCalls(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("tools-ep", base("up"), cloudapi.AuthNone, "", 0)
	schema := map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}, "required": []string{"location"}}
	r := e.do("POST", "tools-ep", "/v1/chat/completions", "", chatBody("Lima", "stream", true, "tool_choice", "required",
		"tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": schema}}}))
	if r.status != 200 {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	r = e.do("POST", "tools-ep", "/v1/messages", "", map[string]any{"max_tokens": 64, "stream": true, "tool_choice": map[string]any{"type": "any"},
		"tools":    []any{map[string]any{"name": "get_weather", "input_schema": schema}},
		"messages": []any{map[string]any{"role": "user", "content": "Lima"}}})
	if r.status != 200 || !strings.Contains(string(r.body), "input_json_delta") {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
	runs := e.runs(d.ID, 2)
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	// Both runs may share a millisecond, and then their order is their random ids': tell them apart by
	// what they answered.
	if !strings.Contains(runs[0]["response"].(string), `"chat.completion"`) {
		runs[0], runs[1] = runs[1], runs[0]
	}
	var chat struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal([]byte(runs[0]["response"].(string)), &chat); err != nil || len(chat.Choices) != 1 ||
		len(chat.Choices[0].Message.ToolCalls) != 1 || chat.Choices[0].Message.ToolCalls[0].Function.Name != "get_weather" ||
		chat.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"location":"Lima"}` || chat.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("chat run lost its tool call: %s", runs[0]["response"])
	}
	var msg struct {
		Content []struct {
			Type, Name string
			Input      map[string]any
		}
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(runs[1]["response"].(string)), &msg); err != nil || msg.StopReason != "tool_use" ||
		len(msg.Content) == 0 || msg.Content[len(msg.Content)-1].Type != "tool_use" || msg.Content[len(msg.Content)-1].Input["location"] != "Lima" {
		t.Errorf("messages run lost its tool use: %s", runs[1]["response"])
	}
	for _, run := range runs {
		if run["completionTokens"].(int64) < 1 {
			t.Errorf("run without completion tokens: %v", run)
		}
	}
}

// Passed-through Messages calls get the same error rules as translated ones.
func TestPassthroughErrorFidelity(t *testing.T) {
	e := newEnv(t)
	e.deploy("native-ep", base("up-native"), cloudapi.AuthNone, "", 0)
	msg := map[string]any{"max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	type envelope struct {
		Type  string
		Error struct{ Type, Message string }
	}
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, ServeMessages: true, FailStatus: 429,
		FailBody:    `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
		FailHeaders: map[string]string{"Retry-After": "9"}})
	r := e.do("POST", "native-ep", "/v1/messages", "", msg)
	var env envelope
	if r.status != 429 || json.Unmarshal(r.body, &env) != nil || env.Error.Type != "rate_limit_error" ||
		!strings.Contains(env.Error.Message, "per-minute") || r.header.Get("Retry-After") != "9" {
		t.Errorf("passed-through 429: %d %s %v", r.status, r.body, r.header)
	}
	e.mock.Configure(mockupstream.Config{APIKey: "another-key", ServeMessages: true})
	r = e.do("POST", "native-ep", "/v1/messages", "", msg)
	env = envelope{}
	if r.status != 502 || json.Unmarshal(r.body, &env) != nil || env.Error.Type != "api_error" ||
		!strings.Contains(env.Error.Message, `"up-native"`) || strings.Contains(string(r.body), upstreamKey) {
		t.Errorf("passed-through upstream auth failure: %d %s", r.status, r.body)
	}
}
