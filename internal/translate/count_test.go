package translate

import (
	"encoding/json"
	"os"
	"testing"
)

func TestCountTokens(t *testing.T) {
	body := `{"model":"m","system":"You are terse.","messages":[{"role":"user","content":"What is the capital of France?"}],
		"tools":[{"name":"lookup","description":"Look up a fact","input_schema":{"type":"object"}}],"thinking":{"type":"adaptive"}}`
	tok, estimate, e := CountTokens([]byte(body), Options{Reasoning: ReasoningChatTemplate})
	if e != nil {
		t.Fatal(e)
	}
	chars := len("You are terse.") + len("What is the capital of France?") + len("lookup") + len("Look up a fact") + len(`{"type":"object"}`)
	if estimate != (chars+3)/4 {
		t.Errorf("estimate %d, want %d (four characters a token over %d)", estimate, (chars+3)/4, chars)
	}
	want := `{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is the capital of France?"}],
		"tools":[{"type":"function","function":{"name":"lookup","description":"Look up a fact","parameters":{"type":"object"}}}],
		"add_generation_prompt":true,"chat_template_kwargs":{"enable_thinking":true}}`
	if !jsonEqual(t, tok, []byte(want)) {
		t.Errorf("tokenize body %s\nwant %s", tok, want)
	}
	// Claude Code's recorded request counts the same, whether it carries max_tokens or not.
	cc, _ := os.ReadFile("testdata/request/claude_code.messages.json")
	var m map[string]json.RawMessage
	json.Unmarshal(cc, &m)
	_, full, e := CountTokens(cc, Options{})
	delete(m, "max_tokens")
	delete(m, "stream")
	bare, _ := json.Marshal(m)
	if _, n, e2 := CountTokens(bare, Options{}); e != nil || e2 != nil || n < 500 || n != full {
		t.Errorf("Claude Code's request: %d and %d tokens, %v %v", full, n, e, e2)
	}
	for body, param := range map[string]string{
		`{"model":"m","max_tokens":"5","messages":[{"role":"user","content":"a"}]}`: "max_tokens",
		`{"model":"m","temperature":7,"messages":[{"role":"user","content":"a"}]}`:  "temperature",
		`{"model":"m","messages":[]}`: "messages",
		`{"model":"m","container":"c","messages":[{"role":"user","content":"a"}]}`:                                 "container",
		`{"model":"m","thinking":{"type":"enabled","budget_tokens":5},"messages":[{"role":"user","content":"a"}]}`: "thinking.budget_tokens",
	} {
		if _, _, e := CountTokens([]byte(body), Options{}); e == nil || e.Param != param {
			t.Errorf("%s: error %v, want one naming %s", body, e, param)
		}
	}
}

func TestTokenizeCount(t *testing.T) {
	if n, ok := TokenizeCount([]byte(`{"count":17,"tokens":[1,2],"max_model_len":8192}`)); !ok || n != 17 {
		t.Errorf("count %d %v", n, ok)
	}
	for _, bad := range []string{`{"tokens":[]}`, `nope`, `{"count":-1}`, `{"count":"3"}`} {
		if _, ok := TokenizeCount([]byte(bad)); ok {
			t.Errorf("%s: ok", bad)
		}
	}
}
