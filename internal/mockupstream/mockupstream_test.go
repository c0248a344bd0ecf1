package mockupstream

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func start(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	m := New(cfg, true)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv
}

func post(t *testing.T, url, body string, header http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// completion is the part of a chat.completion the tests read.
type completion struct {
	Choices []struct {
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []toolJSON `json:"tool_calls"`
		} `json:"message"`
		FinishReason string  `json:"finish_reason"`
		StopReason   *string `json:"stop_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

type toolJSON struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      *string `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

func complete(t *testing.T, url, body string) completion {
	t.Helper()
	resp := post(t, url, body, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var c completion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("answer %+v: %v", c, err)
	}
	return c
}

// chunkJSON is the part of a chat.completion.chunk the tests read.
type chunkJSON struct {
	Choices []struct {
		Delta struct {
			Role      string     `json:"role"`
			Content   *string    `json:"content"`
			ToolCalls []toolJSON `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// stream posts a streamed request and returns its chunks, checking that it ends with [DONE].
func stream(t *testing.T, url, body string) []chunkJSON {
	t.Helper()
	resp := post(t, url, body, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []chunkJSON
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var c chunkJSON
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		out = append(out, c)
	}
	if !done {
		t.Fatal("stream did not end with [DONE]")
	}
	return out
}

const weatherTools = `"tools":[
 {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"days":{"type":"integer"},"city":{"type":"string"},"metric":{"type":"boolean"}},"required":["city","days"]}}},
 {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":["string","null"]},"tags":{"type":"array"}}}}},
 {"type":"function","function":{"name":"set_alarm","parameters":{"type":"object","properties":{"when":{"type":"object"},"ratio":{"type":"number"}},"required":["ratio","when"]}}}]`

func user(text string) string {
	b, _ := json.Marshal(text)
	return `"messages":[{"role":"user","content":` + string(b) + `}]`
}

func TestToolCalls(t *testing.T) {
	_, srv := start(t, Config{})
	const both = "Use get_time, then get_weather"
	cases := []struct {
		name, body string
		calls      []string // name and arguments of each call
	}{
		{"auto mentions one", `{` + weatherTools + `,` + user("What does get_weather say?") + `}`,
			[]string{`get_weather {"city":"What does get_weather say?","days":42}`}},
		{"no tool_choice, two mentioned, in tools order", `{` + weatherTools + `,` + user(both) + `}`,
			[]string{`get_weather {"city":"` + both + `","days":42}`, `get_time {"zone":"` + both + `"}`}},
		{"parallel_tool_calls false keeps the first", `{` + weatherTools + `,"parallel_tool_calls":false,` + user(both) + `}`,
			[]string{`get_weather {"city":"` + both + `","days":42}`}},
		{"auto, none mentioned", `{` + weatherTools + `,"tool_choice":"auto",` + user("hello") + `}`, nil},
		{"none", `{` + weatherTools + `,"tool_choice":"none",` + user("get_weather now") + `}`, nil},
		{"required, none mentioned: the first tool", `{` + weatherTools + `,"tool_choice":"required",` + user("hi") + `}`,
			[]string{`get_weather {"city":"hi","days":42}`}},
		{"named", `{` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"set_alarm"}},` + user("get_weather") + `}`,
			[]string{`set_alarm {"ratio":42,"when":{}}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := complete(t, srv.URL, c.body).Choices[0]
			var calls []string
			for _, tc := range got.Message.ToolCalls {
				if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" {
					t.Errorf("call %+v", tc)
				}
				calls = append(calls, *tc.Function.Name+" "+*tc.Function.Arguments)
			}
			if strings.Join(calls, "\n") != strings.Join(c.calls, "\n") {
				t.Errorf("calls:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(c.calls, "\n"))
			}
			if len(c.calls) > 0 && (got.Message.Content != nil || got.FinishReason != "tool_calls") {
				t.Errorf("content %v, finish_reason %q; want null and tool_calls", got.Message.Content, got.FinishReason)
			}
			if len(c.calls) == 0 && (got.Message.Content == nil || *got.Message.Content == "" || got.FinishReason != "stop") {
				t.Errorf("want a text answer, got content %v, finish_reason %q", got.Message.Content, got.FinishReason)
			}
		})
	}
}

func TestToolCallIDsAreUnique(t *testing.T) {
	_, srv := start(t, Config{})
	body := `{` + weatherTools + `,"tool_choice":"required",` + user("get_weather and get_time") + `}`
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		for _, tc := range complete(t, srv.URL, body).Choices[0].Message.ToolCalls {
			if seen[tc.ID] {
				t.Fatalf("id %s handed out twice", tc.ID)
			}
			seen[tc.ID] = true
		}
	}
	if len(seen) != 4 {
		t.Errorf("%d ids, want 4", len(seen))
	}
}

func TestToolCallsStreamed(t *testing.T) {
	_, srv := start(t, Config{})
	body := `{"stream":true,"stream_options":{"include_usage":true},` + weatherTools + `,` + user("get_time and get_weather") + `}`
	chunks := stream(t, srv.URL, body)
	if len(chunks) < 3 || chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Fatalf("chunks %+v", chunks)
	}
	type call struct {
		id, name, args string
		fragments      int
	}
	var calls []*call
	var finish string
	for _, c := range chunks[1:] {
		if len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Index == nil {
				t.Fatalf("tool call delta without index: %+v", tc)
			}
			i := *tc.Index
			if i == len(calls) {
				// The first delta of a call: id, type, name and empty arguments.
				if tc.ID == "" || tc.Type != "function" || tc.Function.Name == nil || tc.Function.Arguments == nil || *tc.Function.Arguments != "" {
					t.Fatalf("first delta of call %d: %+v", i, tc)
				}
				calls = append(calls, &call{id: tc.ID, name: *tc.Function.Name})
				continue
			}
			// Later deltas: only the index and an arguments fragment.
			if i != len(calls)-1 || tc.ID != "" || tc.Type != "" || tc.Function.Name != nil || tc.Function.Arguments == nil {
				t.Fatalf("later delta of call %d: %+v", i, tc)
			}
			calls[i].args += *tc.Function.Arguments
			calls[i].fragments++
		}
	}
	if len(calls) != 2 || calls[0].name != "get_weather" || calls[1].name != "get_time" {
		t.Fatalf("calls %+v", calls)
	}
	if calls[0].args != `{"city":"get_time and get_weather","days":42}` || calls[1].args != `{"zone":"get_time and get_weather"}` {
		t.Errorf("arguments %q, %q", calls[0].args, calls[1].args)
	}
	for _, c := range calls {
		if c.fragments < 3 {
			t.Errorf("call %s: arguments in %d fragments, want at least 3", c.name, c.fragments)
		}
	}
	if finish != "tool_calls" {
		t.Errorf("finish_reason %q", finish)
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens == 0 {
		t.Errorf("last chunk %+v, want the usage chunk", last)
	}
}

func TestToolResultAnswer(t *testing.T) {
	_, srv := start(t, Config{})
	body := `{` + weatherTools + `,"messages":[{"role":"user","content":"get_weather in Paris"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18C and sunny"}]}`
	got := complete(t, srv.URL, body).Choices[0]
	if got.Message.Content == nil || *got.Message.Content != "tool result: 18C and sunny" || got.FinishReason != "stop" {
		t.Errorf("answer %v %q, want the tool result echoed", got.Message.Content, got.FinishReason)
	}
	streamed := ""
	for _, c := range stream(t, srv.URL, `{"stream":true,`+body[1:]) {
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil {
			streamed += *c.Choices[0].Delta.Content
		}
	}
	if streamed != "tool result: 18C and sunny" {
		t.Errorf("streamed %q", streamed)
	}
}

func TestImagesCounted(t *testing.T) {
	_, srv := start(t, Config{})
	body := `{"messages":[{"role":"user","content":[{"type":"text","text":"compare"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]}]}`
	got := complete(t, srv.URL, body).Choices[0]
	if got.Message.Content == nil || !strings.HasPrefix(*got.Message.Content, "[2 image(s)] The quick") {
		t.Errorf("answer %v", got.Message.Content)
	}
	plain := complete(t, srv.URL, `{`+user("compare")+`}`).Choices[0]
	if strings.Contains(*plain.Message.Content, "image") {
		t.Errorf("answer without images %q mentions images", *plain.Message.Content)
	}
}

func TestStopStrings(t *testing.T) {
	_, srv := start(t, Config{Tokens: 8}) // "The quick brown fox jumps over the lazy"
	cases := []struct {
		name, stop, text, finish string
		matched                  string
	}{
		{"string", `"fox"`, "The quick brown ", "stop", "fox"},
		{"array, earliest wins", `["lazy","brown"]`, "The quick ", "stop", "brown"},
		{"absent", `["zebra"]`, "The quick brown fox jumps over the lazy", "stop", ""},
		{"beyond max_tokens", `"lazy"`, "The quick brown", "length", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			max := ""
			if c.finish == "length" {
				max = `"max_tokens":3,`
			}
			body := `{` + max + `"stop":` + c.stop + `,` + user("hi") + `}`
			got := complete(t, srv.URL, body).Choices[0]
			if *got.Message.Content != c.text || got.FinishReason != c.finish {
				t.Errorf("answer %q %q, want %q %q", *got.Message.Content, got.FinishReason, c.text, c.finish)
			}
			if (got.StopReason == nil) != (c.matched == "") || (got.StopReason != nil && *got.StopReason != c.matched) {
				t.Errorf("stop_reason %v, want %q", got.StopReason, c.matched)
			}
			var text, finish string
			var stopReason json.RawMessage
			for _, ch := range stream(t, srv.URL, `{"stream":true,`+body[1:]) {
				if len(ch.Choices) == 0 {
					continue
				}
				if ch.Choices[0].Delta.Content != nil {
					text += *ch.Choices[0].Delta.Content
				}
				if ch.Choices[0].FinishReason != nil {
					finish, stopReason = *ch.Choices[0].FinishReason, ch.Choices[0].StopReason
				}
			}
			want := "null"
			if c.matched != "" {
				want = `"` + c.matched + `"`
			}
			if text != c.text || finish != c.finish || string(stopReason) != want {
				t.Errorf("streamed %q %q %s, want %q %q %s", text, finish, stopReason, c.text, c.finish, want)
			}
		})
	}
}

func TestMaxTokensLength(t *testing.T) {
	_, srv := start(t, Config{Tokens: 8})
	got := complete(t, srv.URL, `{"max_tokens":3,`+user("hi")+`}`)
	if *got.Choices[0].Message.Content != "The quick brown" || got.Choices[0].FinishReason != "length" || got.Usage.CompletionTokens != 3 {
		t.Errorf("answer %+v", got)
	}
}

func TestRequestID(t *testing.T) {
	_, srv := start(t, Config{})
	resp := post(t, srv.URL, `{`+user("hi")+`}`, http.Header{"X-Request-Id": {"req-abc"}})
	if got := resp.Header.Get("x-request-id"); got != "req-abc" {
		t.Errorf("x-request-id %q, want the request's own", got)
	}
	a := post(t, srv.URL, `{`+user("hi")+`}`, nil).Header.Get("x-request-id")
	b := post(t, srv.URL, `not json`, nil).Header.Get("x-request-id")
	if !strings.HasPrefix(a, "mock-") || !strings.HasPrefix(b, "mock-") || a == b {
		t.Errorf("generated ids %q and %q, want distinct mock-<n> (on errors too)", a, b)
	}
}

func TestFailHeaders(t *testing.T) {
	_, srv := start(t, Config{FailStatus: 429, FailBody: `{"error":{"message":"slow down"}}`, FailHeaders: map[string]string{"Retry-After": "7"}})
	resp := post(t, srv.URL, `{`+user("hi")+`}`, nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("x-request-id") == "" {
		t.Errorf("status %d, Retry-After %q, x-request-id %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("x-request-id"))
	}
}
