package dataset

import (
	"errors"
	"strings"
	"testing"
)

// convCase is one conversion case: a run as stored, and the line it must give or why it is refused.
type convCase struct {
	name     string
	status   string // "" for "ok"
	req, res string
	opt      Options
	want     string // the line, or "" when refused
	why      Reason
}

func runCase(t *testing.T, c convCase) {
	t.Helper()
	status := c.status
	if status == "" {
		status = "ok"
	}
	line, err := ChatLine(Run{ID: "run_1", Status: status, Request: []byte(c.req), Response: []byte(c.res)}, c.opt)
	if c.why != "" {
		if ReasonOf(err) != c.why {
			t.Fatalf("refusal = %v (line %s), want %s", err, line, c.why)
		}
		var r *Refused
		if !errors.As(err, &r) {
			t.Fatalf("error %T is not a *Refused", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("ChatLine: %v", err)
	}
	if string(line) != c.want {
		t.Fatalf("line\n got %s\nwant %s", line, c.want)
	}
	if err := ValidateChatLine(line); err != nil {
		t.Fatalf("the line fails the validator: %v\n%s", err, line)
	}
}

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`

var chatCases = []convCase{
	{name: "plain",
		req:  `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <there> & you"}],"stream":true}`,
		res:  `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
		want: `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <there> & you"},{"role":"assistant","content":"Hello!"}]}`},
	{name: "tools in place",
		req: `{"model":"m","tools":[` + weatherTool + `],"messages":[{"role":"developer","content":[{"type":"text","text":"Use tools."}]},{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"18C"}]}]}`,
		res: `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"It is 18C."},"finish_reason":"stop"}]}`,
		want: `{"messages":[{"role":"system","content":"Use tools."},{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","content":"18C","tool_call_id":"call_1"},{"role":"assistant","content":"It is 18C."}],"tools":[` + weatherTool + `]}`},
	{name: "answer is a tool call",
		req:  `{"model":"m","tools":[` + weatherTool + `],"messages":[{"role":"user","content":"Weather in Oslo?"}]}`,
		res:  `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}]}`,
		want: `{"messages":[{"role":"user","content":"Weather in Oslo?"},{"role":"assistant","tool_calls":[{"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}],"tools":[` + weatherTool + `]}`},
	{name: "multi-turn, reasoning left out",
		req:  `{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4","reasoning_content":"add"},{"role":"user","content":"times 3?"}]}`,
		res:  `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"12","reasoning_content":"4*3"}}]}`,
		want: `{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4"},{"role":"user","content":"times 3?"},{"role":"assistant","content":"12"}]}`},
	{name: "reasoning included",
		opt:  Options{Reasoning: true},
		req:  `{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4","reasoning_content":"add"},{"role":"user","content":"times 3?"}]}`,
		res:  `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"12","reasoning_content":"4*3"}}]}`,
		want: `{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4","reasoning_content":"add"},{"role":"user","content":"times 3?"},{"role":"assistant","content":"12","reasoning_content":"4*3"}]}`},
	{name: "image kept as a part",
		req:  `{"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"low"}}]}]}`,
		res:  `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"A cat."}}]}`,
		want: `{"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"low"}}]},{"role":"assistant","content":"A cat."}]}`},
	{name: "audio refused",
		req: `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}}]}]}`,
		res: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hm."}}]}`,
		why: ReasonUnsupported},
	{name: "reasoning only answer is empty",
		req: `{"messages":[{"role":"user","content":"?"}]}`,
		res: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"hmm"}}]}`,
		why: ReasonEmpty},
	{name: "tool call without its result",
		req: `{"messages":[{"role":"user","content":"?"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"go on"}]}`,
		res: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}`,
		why: ReasonUnparseable},
}

var messagesCases = []convCase{
	{name: "plain",
		req:  `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":"Hi"}]}`,
		res:  `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hello"},{"type":"text","text":" there."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`,
		want: `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello there."}]}`},
	{name: "tools in place",
		req: `{"model":"claude","max_tokens":100,"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],` +
			`"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Paris"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"18C"}]},{"type":"text","text":"And tomorrow?"}]}]}`,
		res: `{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{}}],"stop_reason":"tool_use"}`,
		want: `{"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","content":"18C","tool_call_id":"toolu_1"},{"role":"user","content":"And tomorrow?"},` +
			`{"role":"assistant","tool_calls":[{"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}],"tools":[` + weatherTool + `]}`},
	{name: "thinking left out",
		req:  `{"max_tokens":100,"messages":[{"role":"user","content":"2+2?"}]}`,
		res:  `{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"add them","signature":"sig"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"4"}]}`,
		want: `{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}]}`},
	{name: "thinking included",
		opt:  Options{Reasoning: true},
		req:  `{"max_tokens":100,"messages":[{"role":"user","content":"2+2?"}]}`,
		res:  `{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"add them","signature":"sig"},{"type":"text","text":"4"}]}`,
		want: `{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4","reasoning_content":"add them"}]}`},
	{name: "image as a data URL",
		req:  `{"max_tokens":100,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},{"type":"text","text":"What?"}]}]}`,
		res:  `{"type":"message","role":"assistant","content":[{"type":"text","text":"A dot."}]}`,
		want: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}},{"type":"text","text":"What?"}]},{"role":"assistant","content":"A dot."}]}`},
	// A text document is text to the model, as the edge's translation gives it.
	{name: "text document as the model read it",
		req:  `{"max_tokens":100,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]}]}`,
		res:  `{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}]}`,
		want: `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"ok"}]}`},
	// A server tool is never the model's: the line leaves it out, as the edge did, and keeps the run.
	{name: "server tool left out",
		req:  `{"max_tokens":100,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"news?"}]}`,
		res:  `{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}]}`,
		want: `{"messages":[{"role":"user","content":"news?"},{"role":"assistant","content":"ok"}]}`},
}

var responsesCases = []convCase{
	{name: "plain",
		req:  `{"model":"m","instructions":"Be brief.","input":"Hi"}`,
		res:  `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hello!","annotations":[]}]}]}`,
		want: `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]}`},
	{name: "tools in place",
		req: `{"model":"m","tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":false}],` +
			`"input":[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]},{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"need a tool"}]},` +
			`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"18C"}]}`,
		res: `{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"It is 18C."}]}]}`,
		want: `{"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","content":"18C","tool_call_id":"call_1"},{"role":"assistant","content":"It is 18C."}],"tools":[` + weatherTool + `]}`},
	{name: "reasoning included",
		opt:  Options{Reasoning: true},
		req:  `{"input":"2+2?"}`,
		res:  `{"object":"response","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"add"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"4"}]}]}`,
		want: `{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4","reasoning_content":"add"}]}`},
	{name: "answer is a function call",
		req:  `{"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}}}],"input":"call f"}`,
		res:  `{"object":"response","output":[{"type":"function_call","call_id":"call_2","name":"f","arguments":"{}"}]}`,
		want: `{"messages":[{"role":"user","content":"call f"},{"role":"assistant","tool_calls":[{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]}`},
	{name: "image kept",
		req:  `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png","detail":"auto"},{"type":"input_text","text":"What?"}]}]}`,
		res:  `{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A cat."}]}]}`,
		want: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"text","text":"What?"}]},{"role":"assistant","content":"A cat."}]}`},
	{name: "file refused",
		req: `{"input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]}`,
		res: `{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`,
		why: ReasonUnsupported},
	{name: "previous response not stored",
		req: `{"input":"and then?","previous_response_id":"resp_gone"}`,
		res: `{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`,
		why: ReasonNoPrevious},
}

func TestChatRuns(t *testing.T)      { runCases(t, chatCases) }
func TestMessagesRuns(t *testing.T)  { runCases(t, messagesCases) }
func TestResponsesRuns(t *testing.T) { runCases(t, responsesCases) }

func runCases(t *testing.T, cases []convCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runCase(t, c) })
	}
}

// A Responses chain: each turn continues the one before through previous_response_id; the line holds
// every turn in order, only the last turn's instructions, and the tools an earlier turn declared when
// the last sent none (its conversation calls them).
func TestResponsesChain(t *testing.T) {
	stored := map[string]Run{
		"resp_a": {Status: "ok", Request: []byte(`{"instructions":"old","input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`),
			Response: []byte(`{"object":"response","output":[{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}]}`)},
		"resp_b": {Status: "ok", Request: []byte(`{"previous_response_id":"resp_a","input":[{"type":"function_call_output","call_id":"call_1","output":"18C"}]}`),
			Response: []byte(`{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"18C in Paris."}]}]}`)},
	}
	resolve := func(id string) (Run, bool) { r, ok := stored[id]; return r, ok }
	run := Run{Status: "ok", Request: []byte(`{"instructions":"Be brief.","previous_response_id":"resp_b","input":"And Oslo?"}`),
		Response: []byte(`{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"9C."}]}]}`)}
	line, err := ChatLine(run, Options{Previous: resolve})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","content":"18C","tool_call_id":"call_1"},{"role":"assistant","content":"18C in Paris."},{"role":"user","content":"And Oslo?"},{"role":"assistant","content":"9C."}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`
	if string(line) != want {
		t.Fatalf("line\n got %s\nwant %s", line, want)
	}
	if err := ValidateChatLine(line); err != nil {
		t.Fatal(err)
	}
	if _, err := ChatLine(run, Options{}); ReasonOf(err) != ReasonNoPrevious {
		t.Fatalf("without a resolver: %v, want no_previous", err)
	}
	stored["resp_a"] = Run{Status: "ok", Request: []byte(`{"previous_response_id":"resp_b","input":"loop"}`), Response: stored["resp_a"].Response}
	if _, err := ChatLine(run, Options{Previous: resolve}); ReasonOf(err) != ReasonNoPrevious {
		t.Fatalf("a looping chain: %v, want no_previous", err)
	}
}

const cutChat = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Half an ans"},"finish_reason":null}],"error":{"message":"upstream went away","type":"api_error"}}`

func TestCheck(t *testing.T) {
	req := []byte(`{"messages":[{"role":"user","content":"Hi"}]}`)
	for _, c := range []struct {
		name string
		run  Run
		opt  Options
		want Reason
	}{
		{"answered", Run{Status: "ok", Request: req, Response: []byte(`{"object":"chat.completion","choices":[]}`)}, Options{}, ""},
		{"no transcript", Run{Status: "ok"}, Options{}, ReasonNoTranscript},
		{"failed", Run{Status: "error", Request: req, Response: []byte(`{"error":{"message":"rate limited","type":"rate_limit_exceeded"}}`)}, Options{}, ReasonFailed},
		{"cut", Run{Status: "error", Request: req, Response: []byte(cutChat)}, Options{}, ReasonCut},
		{"cut, asked for", Run{Status: "error", Request: req, Response: []byte(cutChat)}, Options{Cut: true}, ""},
		{"text completion", Run{Status: "ok", Request: []byte(`{"prompt":"x"}`), Response: []byte(`{"object":"text_completion","choices":[]}`)}, Options{}, ReasonUnsupported},
		{"not JSON", Run{Status: "ok", Request: req, Response: []byte(`{"object":`)}, Options{}, ReasonUnparseable},
	} {
		if got := Check(c.run, c.opt); got != c.want {
			t.Errorf("%s: Check = %q, want %q", c.name, got, c.want)
		}
	}
	line, err := ChatLine(Run{Status: "error", Request: req, Response: []byte(cutChat)}, Options{Cut: true})
	if err != nil || !strings.Contains(string(line), `{"role":"assistant","content":"Half an ans"}`) {
		t.Fatalf("a cut run asked for: %s, %v", line, err)
	}
	if _, err := ChatLine(Run{Status: "error", Request: req, Response: []byte(cutChat)}, Options{}); ReasonOf(err) != ReasonCut {
		t.Fatalf("a cut run: %v, want cut", err)
	}
}

func TestPreferenceLine(t *testing.T) {
	req := []byte(`{"model":"m","messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"How cold is it?"}]}`)
	good := Run{Status: "ok", Request: req, Response: []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"About 10C."}}]}`)}
	bad := Run{Status: "ok", Request: req, Response: []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Cold."}}]}`)}
	line, err := PreferenceLine(good, bad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"input":{"messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"How cold is it?"}]},` +
		`"preferred_output":[{"role":"assistant","content":"About 10C."}],"non_preferred_output":[{"role":"assistant","content":"Cold."}]}`
	if string(line) != want {
		t.Fatalf("line\n got %s\nwant %s", line, want)
	}
	if err := ValidatePreferenceLine(line); err != nil {
		t.Fatal(err)
	}
	other := Run{Status: "ok", Request: []byte(`{"messages":[{"role":"user","content":"Something else"}]}`), Response: bad.Response}
	if _, err := PreferenceLine(good, other, Options{}); ReasonOf(err) != ReasonMismatch {
		t.Fatalf("different inputs: %v, want mismatch", err)
	}
	call := Run{Status: "ok", Request: req, Response: []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`)}
	if _, err := PreferenceLine(good, call, Options{}); ReasonOf(err) != ReasonUnsupported {
		t.Fatalf("a tool call output: %v, want unsupported", err)
	}
	// A Messages primary and its shadow answered through the same surface.
	mreq := []byte(`{"max_tokens":50,"system":"Be kind.","messages":[{"role":"user","content":"How cold is it?"}]}`)
	m1 := Run{Status: "ok", Request: mreq, Response: []byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"About 10C."}]}`)}
	m2 := Run{Status: "ok", Request: mreq, Response: []byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"Cold."}]}`)}
	mline, err := PreferenceLine(m1, m2, Options{})
	if err != nil || string(mline) != want {
		t.Fatalf("Messages pair: %s, %v", mline, err)
	}
}

// An eval's judged pair is written on the source run's conversation (a Messages run here), with the
// candidate's chat answer on the side the verdict says.
func TestEvalPreferenceLine(t *testing.T) {
	mreq := []byte(`{"max_tokens":50,"system":"Be kind.","messages":[{"role":"user","content":"How cold is it?"}]}`)
	source := Run{Status: "ok", Request: mreq, Response: []byte(`{"type":"message","role":"assistant","content":[{"type":"text","text":"Cold."}]}`)}
	candidate := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"About 10C.","reasoning_content":"think"},"finish_reason":"stop"}]}`)
	input := `{"input":{"messages":[{"role":"system","content":"Be kind."},{"role":"user","content":"How cold is it?"}]},`
	for _, c := range []struct {
		candidatePreferred bool
		want               string
	}{
		{true, input + `"preferred_output":[{"role":"assistant","content":"About 10C."}],"non_preferred_output":[{"role":"assistant","content":"Cold."}]}`},
		{false, input + `"preferred_output":[{"role":"assistant","content":"Cold."}],"non_preferred_output":[{"role":"assistant","content":"About 10C."}]}`},
	} {
		line, err := EvalPreferenceLine(source, candidate, c.candidatePreferred, Options{})
		if err != nil || string(line) != c.want {
			t.Fatalf("candidate preferred %v:\n got %s (%v)\nwant %s", c.candidatePreferred, line, err, c.want)
		}
		if err := ValidatePreferenceLine(line); err != nil {
			t.Fatal(err)
		}
	}
	same := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Cold."},"finish_reason":"stop"}]}`)
	if _, err := EvalPreferenceLine(source, same, true, Options{}); ReasonOf(err) != ReasonIdentical {
		t.Fatalf("the same answer: %v, want identical", err)
	}
	call := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
	if _, err := EvalPreferenceLine(source, call, false, Options{}); ReasonOf(err) != ReasonUnsupported {
		t.Fatalf("a tool call: %v, want unsupported", err)
	}
	if _, err := EvalPreferenceLine(source, []byte(`{"choices":[]}`), true, Options{}); ReasonOf(err) != ReasonEmpty {
		t.Fatalf("no choices: %v, want empty", err)
	}
}

// Each refused line breaks one rule of OpenAI's format; the accepted ones are the guides' own shapes.
func TestValidateChatLine(t *testing.T) {
	for _, c := range []struct {
		name, line string
		ok         bool
	}{
		{"guide example with weight and a final tool call", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"old","weight":0},{"role":"user","content":"u2"},` +
			`{"role":"assistant","tool_calls":[{"id":"call_id","type":"function","function":{"name":"get_current_weather","arguments":"{}"}}],"weight":1}],"tools":[{"type":"function","function":{"name":"get_current_weather","description":"d","parameters":{"type":"object"}}}]}`, true},
		{"not one line", "{\"messages\":\n[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"assistant\",\"content\":\"a\"}]}", false},
		{"unknown top-level member", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a"}],"extra":1}`, false},
		{"no assistant", `{"messages":[{"role":"user","content":"u"}]}`, false},
		{"unknown role", `{"messages":[{"role":"critic","content":"u"},{"role":"assistant","content":"a"}]}`, false},
		{"empty assistant turn", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":""}]}`, false},
		{"weight 2", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a","weight":2}]}`, false},
		{"weight on a user", `{"messages":[{"role":"user","content":"u","weight":1},{"role":"assistant","content":"a"}]}`, false},
		{"unanswered tool call", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"?"},{"role":"assistant","content":"a"}]}`, false},
		{"tool message answering nothing", `{"messages":[{"role":"user","content":"u"},{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"assistant","content":"a"}]}`, false},
		{"tool call id used twice", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, false},
		{"arguments not a string", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]}`, false},
		{"image in an assistant message", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, false},
		{"tool without a function", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a"}],"tools":[{"type":"function"}]}`, false},
		{"tool name with a space", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a"}],"tools":[{"type":"function","function":{"name":"get weather"}}]}`, false},
		{"parameters not an object", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a"}],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, false},
	} {
		err := ValidateChatLine([]byte(c.line))
		if (err == nil) != c.ok {
			t.Errorf("%s: ValidateChatLine = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestValidatePreferenceLine(t *testing.T) {
	for _, c := range []struct {
		name, line string
		ok         bool
	}{
		{"guide example", `{"input":{"messages":[{"role":"user","content":"How cold?"}],"tools":[],"parallel_tool_calls":true},"preferred_output":[{"role":"assistant","content":"10C"}],"non_preferred_output":[{"role":"assistant","content":"Cold"}]}`, true},
		{"two preferred", `{"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}],"non_preferred_output":[{"role":"assistant","content":"c"}]}`, false},
		{"user output", `{"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[{"role":"user","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"c"}]}`, false},
		{"empty output", `{"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[{"role":"assistant","content":""}],"non_preferred_output":[{"role":"assistant","content":"c"}]}`, false},
		{"missing non-preferred", `{"input":{"messages":[{"role":"user","content":"q"}]},"preferred_output":[{"role":"assistant","content":"a"}]}`, false},
		{"image input", `{"input":{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]},"preferred_output":[{"role":"assistant","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"c"}]}`, false},
	} {
		err := ValidatePreferenceLine([]byte(c.line))
		if (err == nil) != c.ok {
			t.Errorf("%s: ValidatePreferenceLine = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// A line, and the conversation it is assembled from, are bounded at conv.MaxBytes (docs/OPERATIONS.md,
// "Bounds"): past it the run is left out as too_long, the chain read no further.
func TestLinesAreBounded(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	run := Run{Status: "ok", Request: []byte(`{"messages":[{"role":"user","content":"` + big + `"}]}`),
		Response: []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + big + `"}}]}`)}
	if _, err := ChatLine(run, Options{}); ReasonOf(err) != ReasonTooLong {
		t.Errorf("a 6 MiB line: %v", err)
	}
	reads := 0
	previous := func(id string) (Run, bool) { // a chain of 2 MiB turns without end
		reads++
		return Run{Status: "ok", Request: []byte(`{"input":"` + big[:1<<20] + `","previous_response_id":"` + id + `a"}`),
			Response: []byte(`{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + big[:1<<20] + `"}]}]}`)}, true
	}
	last := Run{Status: "ok", Request: []byte(`{"input":"go on","previous_response_id":"resp_a"}`),
		Response: []byte(`{"object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`)}
	if _, err := ChatLine(last, Options{Previous: previous}); ReasonOf(err) != ReasonTooLong {
		t.Errorf("a chain past 4 MiB: %v", err)
	}
	if reads > 3 {
		t.Errorf("the chain was read %d turns deep, past the bound", reads)
	}
}

// A pair whose two answers are the same (a canary that answers as its primary does) teaches nothing:
// it is left out as identical, as the line writes the answers (ids and models aside).
func TestPreferenceLineRefusesIdenticalAnswers(t *testing.T) {
	req := []byte(`{"messages":[{"role":"user","content":"hi"}]}`)
	answer := func(id, model string) []byte {
		return []byte(`{"id":"` + id + `","object":"chat.completion","model":"` + model + `","choices":[{"index":0,"message":{"role":"assistant","content":"hello"}}]}`)
	}
	_, err := PreferenceLine(Run{Status: "ok", Request: req, Response: answer("a", "m1")}, Run{Status: "ok", Request: req, Response: answer("b", "m2")}, Options{})
	if ReasonOf(err) != ReasonIdentical {
		t.Fatalf("identical answers: %v", err)
	}
}
