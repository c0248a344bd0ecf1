package mockupstream

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postTo(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads a stream's server-sent events: names and data.
func events(t *testing.T, resp *http.Response) (names []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, n)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event data %s: %v", d, err)
			}
			data = append(data, m)
		}
	}
	return names, data
}

func TestReasoning(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		_, srv := start(t, Config{Tokens: 3, Reasoning: field})
		resp := post(t, srv.URL, `{"model":"mock-model","messages":[{"role":"user","content":"why is the sky blue"}]}`, nil)
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		reasoning, _ := msg[field].(string)
		if !strings.Contains(reasoning, "why is the sky blue") || msg["content"] != "The quick brown" {
			t.Fatalf("%s: message %v", field, msg)
		}
		usage := out["usage"].(map[string]any)
		if int(usage["completion_tokens"].(float64)) != 3+len(tokenize(reasoning)) {
			t.Errorf("usage %v does not count the reasoning", usage)
		}
		// Streamed: the reasoning deltas first, under the same name.
		resp = post(t, srv.URL, `{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"why is the sky blue"}]}`, nil)
		_, chunks := events(t, resp)
		streamedReasoning, content, sawContent := "", "", false
		for _, c := range chunks {
			for _, ch := range c["choices"].([]any) {
				d := ch.(map[string]any)["delta"].(map[string]any)
				if r, ok := d[field].(string); ok {
					if sawContent {
						t.Fatalf("reasoning after content: %v", chunks)
					}
					streamedReasoning += r
				}
				if s, _ := d["content"].(string); s != "" {
					sawContent = true
					content += s
				}
			}
		}
		if streamedReasoning != reasoning || content != "The quick brown" {
			t.Errorf("%s streamed: %q %q", field, streamedReasoning, content)
		}
	}
	// Qwen3's switch turns it off.
	_, srv := start(t, Config{Tokens: 2, Reasoning: "reasoning_content"})
	resp := post(t, srv.URL, `{"model":"mock-model","chat_template_kwargs":{"enable_thinking":false},"messages":[{"role":"user","content":"hi"}]}`, nil)
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), "reasoning_content") {
		t.Errorf("reasoning with enable_thinking false: %s", b)
	}
}

func TestResponses(t *testing.T) {
	m, srv := start(t, Config{Tokens: 4, ServeResponses: true})
	resp := postTo(t, srv.URL+"/v1/responses", `{"model":"mock-model","input":"hello there","instructions":"Be brief."}`)
	var r map[string]any
	json.NewDecoder(resp.Body).Decode(&r)
	out := r["output"].([]any)
	if r["object"] != "response" || r["status"] != "completed" || len(out) != 1 || m.ChatCount() != 0 {
		t.Fatalf("response %v", r)
	}
	msg := out[0].(map[string]any)
	if msg["type"] != "message" || msg["content"].([]any)[0].(map[string]any)["text"] != "The quick brown fox" {
		t.Errorf("message %v", msg)
	}
	if u := r["usage"].(map[string]any); u["output_tokens"].(float64) != 4 || u["total_tokens"].(float64) <= 4 {
		t.Errorf("usage %v", u)
	}
	// A function tool named in the input is called; streamed, every event numbered in sequence.
	body := `{"model":"mock-model","stream":true,"input":[{"role":"user","content":"use get_weather"}],
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`
	names, data := events(t, postTo(t, srv.URL+"/v1/responses", body))
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v", names)
	}
	args := ""
	for i, d := range data {
		if d["type"] != names[i] || int(d["sequence_number"].(float64)) != i {
			t.Fatalf("event %d: %v", i, d)
		}
		if s, ok := d["delta"].(string); ok {
			args += s
		}
	}
	done := data[len(data)-1]["response"].(map[string]any)["output"].([]any)[0].(map[string]any)
	if args != `{"city":"use get_weather"}` || done["arguments"] != args || done["name"] != "get_weather" {
		t.Errorf("arguments %q, item %v", args, done)
	}
	// The function's output comes back: the answer reports it. max_output_tokens cuts: incomplete.
	body = `{"model":"mock-model","max_output_tokens":2,"input":[{"role":"user","content":"use get_weather"},
		{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"sunny and warm"}]}`
	json.NewDecoder(postTo(t, srv.URL+"/v1/responses", body).Body).Decode(&r)
	text := r["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	if r["status"] != "incomplete" || text != "tool result:" || r["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Errorf("response %v", r)
	}
	// Without ServeResponses: vLLM's 404.
	_, plain := start(t, Config{})
	if resp := postTo(t, plain.URL+"/v1/responses", `{"input":"x"}`); resp.StatusCode != 404 {
		t.Errorf("status %d", resp.StatusCode)
	}
}

func TestTokenize(t *testing.T) {
	m, srv := start(t, Config{ServeTokenize: true, MaxModelLen: 4096})
	var r struct {
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
		Tokens      []int `json:"tokens"`
	}
	json.NewDecoder(postTo(t, srv.URL+"/tokenize", `{"model":"mock-model","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"what is two plus two"}],"add_generation_prompt":true}`).Body).Decode(&r)
	if r.Count != 7 || len(r.Tokens) != 7 || r.MaxModelLen != 4096 {
		t.Errorf("chat form: %+v", r)
	}
	json.NewDecoder(postTo(t, srv.URL+"/tokenize", `{"model":"mock-model","prompt":"one two three"}`).Body).Decode(&r)
	if r.Count != 3 {
		t.Errorf("prompt form: %+v", r)
	}
	if last := m.LastRequest(); last == nil || last.Path != "/tokenize" {
		t.Errorf("not recorded: %+v", last)
	}
	_, plain := start(t, Config{})
	if resp := postTo(t, plain.URL+"/tokenize", `{"prompt":"x"}`); resp.StatusCode != 404 {
		t.Errorf("status %d", resp.StatusCode)
	}
}
