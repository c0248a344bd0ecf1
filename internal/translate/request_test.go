package translate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// jsonEqual compares two JSON texts by value.
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// sampleInfo is a sample's <name>.info.json: the options it is translated with and what the
// translation must report besides the chat request.
type sampleInfo struct {
	Reasoning string   `json:"reasoning"`
	Ignored   []string `json:"ignored"`
	Thinking  bool     `json:"thinking"`
}

func readSampleInfo(t *testing.T, path string) sampleInfo {
	t.Helper()
	var si sampleInfo
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &si); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return si
}

func TestMessagesToChat(t *testing.T) {
	files, _ := filepath.Glob("testdata/request/*.messages.json")
	if len(files) == 0 {
		t.Fatal("no samples")
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".messages.json")
		t.Run(name, func(t *testing.T) {
			body, _ := os.ReadFile(in)
			base := strings.TrimSuffix(in, ".messages.json")
			want, err := os.ReadFile(base + ".chat.json")
			if err != nil {
				t.Fatal(err)
			}
			si := readSampleInfo(t, base+".info.json")
			chat, info, e := messagesJSON(body, Options{Reasoning: si.Reasoning})
			if e != nil {
				t.Fatalf("error %q (param %q)", e.Message, e.Param)
			}
			if !jsonEqual(t, chat, want) {
				t.Errorf("chat request:\n got %s\nwant %s", chat, want)
			}
			if info.PromptChars <= 0 {
				t.Errorf("PromptChars = %d, want the prompt's size", info.PromptChars)
			}
			if !reflect.DeepEqual(info.Ignored, si.Ignored) {
				t.Errorf("Ignored = %q, want %q", info.Ignored, si.Ignored)
			}
			if info.Thinking != si.Thinking {
				t.Errorf("Thinking = %v, want %v", info.Thinking, si.Thinking)
			}
		})
	}
}

func TestMessagesToChatInfo(t *testing.T) {
	body, _ := os.ReadFile("testdata/request/sampling.messages.json")
	_, info, e := messagesJSON(body)
	if e != nil {
		t.Fatal(e)
	}
	want := RequestInfo{Model: "m", Stream: true, StopSequences: []string{"###", "\nUser:"}, MaxTokens: 100, PromptChars: len("Count")}
	if !reflect.DeepEqual(*info, want) {
		t.Errorf("info = %+v, want %+v", *info, want)
	}
	if got := info.InputTokensEstimate(); got != 2 {
		t.Errorf("estimate for 5 bytes = %d, want 2", got)
	}
}

func TestMessagesToChatErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const tools = `"tools":[{"name":"t","input_schema":{"type":"object"}}]`
	cases := []struct {
		name, body, param string
	}{
		{"not json", `{"max_tokens":1,`, ""},
		{"not an object", `[1]`, ""},
		{"trailing data", `{"max_tokens":1,` + msgs + `} {}`, ""},
		{"duplicate top key", `{"max_tokens":1,"max_tokens":2,` + msgs + `}`, "max_tokens"},
		{"duplicate nested key", `{"max_tokens":1,"messages":[{"role":"user","role":"assistant","content":"hi"}]}`, "messages[0].role"},
		{"too deep", `{"max_tokens":1,` + msgs + `,"metadata":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, "metadata" + strings.Repeat("[0]", MaxDepth-1)},
		{"thinking type", `{"max_tokens":1,"thinking":{"type":"sometimes"},` + msgs + `}`, "thinking.type"},
		{"thinking not object", `{"max_tokens":1,"thinking":true,` + msgs + `}`, "thinking"},
		{"thinking budget over max_tokens", `{"max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},` + msgs + `}`, "thinking.budget_tokens"},
		{"thinking budget too small", `{"max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":100},` + msgs + `}`, "thinking.budget_tokens"},
		{"thinking budget missing", `{"max_tokens":4000,"thinking":{"type":"enabled"},` + msgs + `}`, "thinking.budget_tokens"},
		{"thinking display", `{"max_tokens":1,"thinking":{"type":"adaptive","display":3},` + msgs + `}`, "thinking.display"},
		{"thinking disabled extra", `{"max_tokens":1,"thinking":{"type":"disabled","budget_tokens":2000},` + msgs + `}`, "thinking.budget_tokens"},
		{"output_config effort", `{"max_tokens":1,"output_config":{"effort":"extreme"},` + msgs + `}`, "output_config.effort"},
		{"output_config format type", `{"max_tokens":1,"output_config":{"format":{"type":"xml","schema":{}}},` + msgs + `}`, "output_config.format.type"},
		{"output_config format schema", `{"max_tokens":1,"output_config":{"format":{"type":"json_schema"}},` + msgs + `}`, "output_config.format.schema"},
		{"output_config extra", `{"max_tokens":1,"output_config":{"verbosity":"low"},` + msgs + `}`, "output_config.verbosity"},
		{"container", `{"max_tokens":1,"container":"c1",` + msgs + `}`, "container"},
		{"mcp_servers", `{"max_tokens":1,"mcp_servers":[],` + msgs + `}`, "mcp_servers"},
		{"thread", `{"max_tokens":1,"thread":{"type":"create"},` + msgs + `}`, "thread"},
		{"unknown top-level", `{"max_tokens":1,"speed":"fast",` + msgs + `}`, "speed"},
		{"model not string", `{"model":3,"max_tokens":1,` + msgs + `}`, "model"},
		{"max_tokens missing", `{` + msgs + `}`, "max_tokens"},
		{"max_tokens zero", `{"max_tokens":0,` + msgs + `}`, "max_tokens"},
		{"max_tokens fraction", `{"max_tokens":1.5,` + msgs + `}`, "max_tokens"},
		{"max_tokens string", `{"max_tokens":"5",` + msgs + `}`, "max_tokens"},
		{"messages missing", `{"max_tokens":1}`, "messages"},
		{"messages empty", `{"max_tokens":1,"messages":[]}`, "messages"},
		{"bad role", `{"max_tokens":1,"messages":[{"role":"tool","content":"hi"}]}`, "messages[0].role"},
		{"only system entries", `{"max_tokens":1,"messages":[{"role":"system","content":"hi"}]}`, "messages"},
		{"system entry image", `{"max_tokens":1,"messages":[{"role":"system","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]},{"role":"user","content":"a"}]}`, "messages[0].content[0].type"},
		{"system entry number", `{"max_tokens":1,"messages":[{"role":"system","content":5},{"role":"user","content":"a"}]}`, "messages[0].content"},
		{"message extra key", `{"max_tokens":1,"messages":[{"role":"user","content":"hi","name":"bob"}]}`, "messages[0].name"},
		{"content missing", `{"max_tokens":1,"messages":[{"role":"user"}]}`, "messages[0].content"},
		{"stream not bool", `{"max_tokens":1,"stream":"yes",` + msgs + `}`, "stream"},
		{"temperature too high", `{"max_tokens":1,"temperature":1.5,` + msgs + `}`, "temperature"},
		{"top_p string", `{"max_tokens":1,"top_p":"0.5",` + msgs + `}`, "top_p"},
		{"top_k negative", `{"max_tokens":1,"top_k":-1,` + msgs + `}`, "top_k"},
		{"stop not strings", `{"max_tokens":1,"stop_sequences":["a",2],` + msgs + `}`, "stop_sequences[1]"},
		{"stop empty", `{"max_tokens":1,"stop_sequences":[""],` + msgs + `}`, "stop_sequences[0]"},
		{"metadata extra", `{"max_tokens":1,"metadata":{"user_id":"u","team":"x"},` + msgs + `}`, "metadata.team"},
		{"system image", `{"max_tokens":1,"system":[{"type":"image","source":{"type":"url","url":"https://x"}}],` + msgs + `}`, "system[0].type"},
		{"system number", `{"max_tokens":1,"system":5,` + msgs + `}`, "system"},
		{"document pdf", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`, "messages[0].content[1].source.type"},
		{"document pdf url", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, "messages[0].content[0].source.type"},
		{"document file", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"file","file_id":"f"}}]}]}`, "messages[0].content[0].source.type"},
		{"document citations", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"},"citations":{"enabled":true}}]}]}`, "messages[0].content[0].citations"},
		{"document text media type", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/html","data":"x"}}]}]}`, "messages[0].content[0].source.media_type"},
		{"document in assistant", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}`, "messages[1].content[0].type"},
		{"search_result block", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"search_result"}]}]}`, "messages[0].content[0].type"},
		{"thinking block without signature", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm"}]},{"role":"user","content":"b"}]}`, "messages[1].content[0].signature"},
		{"thinking block in user", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"thinking","thinking":"hm","signature":"s"}]}]}`, "messages[0].content[0].type"},
		{"server_tool_use block", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]},{"role":"user","content":"b"}]}`, "messages[1].content[0].type"},
		{"block without type", `{"max_tokens":1,"messages":[{"role":"user","content":[{"text":"a"}]}]}`, "messages[0].content[0].type"},
		{"text block extra key", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a","source":"x"}]}]}`, "messages[0].content[0].source"},
		{"citations", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a","citations":[{"type":"char_location"}]}]}]}`, "messages[0].content[0].citations"},
		{"image file source", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages[0].content[0].source.type"},
		{"image media type", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AA=="}}]}]}`, "messages[0].content[0].source.media_type"},
		{"image no data", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}]}`, "messages[0].content[0].source.data"},
		{"image bad url", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]}]}`, "messages[0].content[0].source.url"},
		{"image in assistant", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}`, "messages[1].content[0].type"},
		{"tool_use in user", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"t","input":{}}]}]}`, "messages[0].content[0].type"},
		{"tool_use input not object", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"t","input":"x"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "messages[1].content[0].input"},
		{"tool_use without result", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"t","input":{}}]},{"role":"user","content":"b"}]}`, "messages[2]"},
		{"tool_use last", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"t","input":{}}]}]}`, "messages[1]"},
		{"tool_result unknown id", `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope","content":"x"}]}]}`, "messages[0].content[0].tool_use_id"},
		{"tool_result search_result", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"search_result","source":"x","title":"t","content":[]}]}]}]}`, "messages[2].content[0].content[0].type"},
		{"tool_result bad image", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"url","url":"ftp://x"}}]}]}]}`, "messages[2].content[0].content[0].source.url"},
		{"tool_result in assistant", `{"max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "messages[1].content[0].type"},
		{"tools not array", `{"max_tokens":1,"tools":{},` + msgs + `}`, "tools"},
		{"unknown tool type", `{"max_tokens":1,"tools":[{"name":"ok","input_schema":{"type":"object"}},{"type":"telepathy_20990101","name":"mind"}],` + msgs + `}`, "tools[1].type"},
		{"tool_choice names a server tool", `{"max_tokens":1,"tools":[{"name":"ok","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"},` + msgs + `}`, "tool_choice.name"},
		{"tool strict not bool", `{"max_tokens":1,"tools":[{"name":"t","input_schema":{},"strict":"yes"}],` + msgs + `}`, "tools[0].strict"},
		{"tool without schema", `{"max_tokens":1,"tools":[{"name":"t"}],` + msgs + `}`, "tools[0].input_schema"},
		{"tool bad name", `{"max_tokens":1,"tools":[{"name":"a b","input_schema":{}}],` + msgs + `}`, "tools[0].name"},
		{"tool duplicate name", `{"max_tokens":1,"tools":[{"name":"t","input_schema":{}},{"name":"t","input_schema":{}}],` + msgs + `}`, "tools[1].name"},
		{"tool extra key", `{"max_tokens":1,"tools":[{"name":"t","input_schema":{},"cache_ttl":true}],` + msgs + `}`, "tools[0].cache_ttl"},
		{"tool defer_loading", `{"max_tokens":1,"tools":[{"name":"t","input_schema":{},"defer_loading":"yes"}],` + msgs + `}`, "tools[0].defer_loading"},
		{"tool_choice bad type", `{"max_tokens":1,` + tools + `,"tool_choice":{"type":"maybe"},` + msgs + `}`, "tool_choice.type"},
		{"tool_choice unknown tool", `{"max_tokens":1,` + tools + `,"tool_choice":{"type":"tool","name":"x"},` + msgs + `}`, "tool_choice.name"},
		{"tool_choice any without tools", `{"max_tokens":1,"tool_choice":{"type":"any"},` + msgs + `}`, "tool_choice"},
		{"tool_choice extra key", `{"max_tokens":1,` + tools + `,"tool_choice":{"type":"auto","name":"t"},` + msgs + `}`, "tool_choice.name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chat, _, e := messagesJSON([]byte(c.body))
			if e == nil {
				t.Fatalf("translated to %s, want an error naming %q", chat, c.param)
			}
			if e.Param != c.param {
				t.Errorf("param = %q, want %q (message %q)", e.Param, c.param, e.Message)
			}
			if c.param != "" && !strings.HasPrefix(e.Message, c.param+": ") {
				t.Errorf("message %q does not name %q", e.Message, c.param)
			}
			if last := c.param[strings.LastIndexAny(c.param, ".]")+1:]; last != "" && strings.HasPrefix(e.Message, c.param+": "+last+" ") {
				t.Errorf("message %q names %q twice", e.Message, last)
			}
		})
	}
}

func TestMessagesToChatMessagesSayWhatIsAllowed(t *testing.T) {
	_, _, e := messagesJSON([]byte(`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"search_result","source":"s","title":"t","content":[]}]}]}`))
	if e == nil || !strings.Contains(e.Message, "text, image, document and tool_result") {
		t.Errorf("error %v does not list the block types a user message may hold", e)
	}
	_, _, e = messagesJSON([]byte(`{"max_tokens":1,"speed":"fast","messages":[{"role":"user","content":"a"}]}`))
	if e == nil || !strings.Contains(e.Message, "stop_sequences") {
		t.Errorf("error %v does not list the fields that translate", e)
	}
}

// Refusals of what svc cannot honour are worded as Anthropic words them, for clients that look for
// the wording (Claude Code falls back on "Unexpected role"), and say "not supported".
func TestMessagesToChatRefusalWording(t *testing.T) {
	for body, want := range map[string]string{
		`{"max_tokens":1,"messages":[{"role":"tool","content":"a"}]}`:                                                                                               `Unexpected role "tool"`,
		`{"max_tokens":1,"container":"c","messages":[{"role":"user","content":"a"}]}`:                                                                               "not supported",
		`{"max_tokens":1,"mcp_servers":[{"type":"url","url":"https://m","name":"m"}],"messages":[{"role":"user","content":"a"}]}`:                                   "not supported",
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}]}`: "not supported",
	} {
		_, _, e := messagesJSON([]byte(body))
		if e == nil || !strings.Contains(e.Message, want) {
			t.Errorf("%s: error %v does not say %q", body, e, want)
		}
	}
}

// The signature of a thinking block binds its text to the server's secret: another secret, or
// other text, does not verify.
func TestThinkingSignature(t *testing.T) {
	sig := signThinking([]byte("secret-a"), "I should check the weather.")
	if !verifyThinking([]byte("secret-a"), "I should check the weather.", sig) {
		t.Fatal("svc's own signature does not verify")
	}
	if verifyThinking([]byte("secret-b"), "I should check the weather.", sig) {
		t.Error("a signature verifies under another secret")
	}
	if verifyThinking([]byte("secret-a"), "I should check the weather!", sig) {
		t.Error("a signature verifies for other text")
	}
	body := `{"max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"thinking","thinking":"I should check the weather.","signature":"` + sig + `"},{"type":"text","text":"Sunny."}]},{"role":"user","content":"b"}]}`
	chat, _, e := messagesJSON([]byte(body), Options{Secret: []byte("secret-a")})
	if e != nil || !strings.Contains(string(chat), `"reasoning_content":"I should check the weather."`) {
		t.Errorf("a signed thinking block does not go back as reasoning: %s %v", chat, e)
	}
	// Signed under another secret, or altered: left out and named, never sent as reasoning.
	for _, b := range []string{body, strings.Replace(body, "check the weather.\",\"signature", "check the weather!\",\"signature", 1)} {
		chat, info, e := messagesJSON([]byte(b), Options{Secret: []byte("secret-b")})
		if e != nil || strings.Contains(string(chat), "reasoning_content") || !reflect.DeepEqual(info.Ignored, []string{"messages[].content[]:thinking"}) {
			t.Errorf("an unverified thinking block: %s %v %v", chat, info, e)
		}
	}
}

// Claude Code 2.1.332 opens its sessions with deferred tools and thinking display "updates": both are
// accepted and named in svc-ignored-fields, the tools given to the model as any other.
func TestMessagesToChatTakesClaudeCodesNewFields(t *testing.T) {
	body := `{"model":"m","max_tokens":2048,"thinking":{"type":"adaptive","display":"updates"},
		"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"name":"mcp__x__y","input_schema":{"type":"object"},"defer_loading":true},{"name":"mcp__x__z","input_schema":{"type":"object"},"defer_loading":false}],
		"messages":[{"role":"user","content":"hi"}]}`
	chat, info, err := MessagesToChatWith([]byte(body), Options{})
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if got := info.IgnoredHeader(); got != "thinking.display, tools[].defer_loading" {
		t.Errorf("svc-ignored-fields %q", got)
	}
	if n := len(chat.Conversation.Tools); n != 3 || chat.Conversation.Tools[1].Function.Name != "mcp__x__y" {
		t.Errorf("tools %+v", chat.Conversation.Tools)
	}
	if !info.Thinking {
		t.Error("thinking is off")
	}
}
