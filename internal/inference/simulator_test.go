package inference

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sim returns a simulator runtime of the given configuration, with no latency.
func sim(t *testing.T, m ModelConfig) *simulator {
	t.Helper()
	m.Public = true
	if m.Simulator == nil {
		m.Simulator = &SimulatorConfig{}
	}
	r, err := NewRegistry([]ModelConfig{m})
	if err != nil {
		t.Fatal(err)
	}
	return r.Runtime(m.Name).(*simulator)
}

func chatCall(user string, body map[string]string) *Call {
	b := map[string]json.RawMessage{}
	for k, v := range body {
		b[k] = json.RawMessage(v)
	}
	return &Call{Model: "s", Served: "s", Body: b, Messages: []Message{{Role: "user", Content: user}}}
}

// streamed reads a simulated stream to its end and returns each choice's content, reasoning and
// finish, and the final usage.
func streamed(t *testing.T, st Stream) (content, reasoning, finish map[int]string, usage *Usage, chunks [][]byte) {
	t.Helper()
	content, reasoning, finish = map[int]string{}, map[int]string{}, map[int]string{}
	for {
		ch, err := st.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, bytes.Clone(ch.JSON))
		for _, c := range ch.Choices {
			content[c.Index] += c.Content
			reasoning[c.Index] += c.Reasoning
			if c.FinishReason != "" {
				finish[c.Index] = c.FinishReason
			}
		}
		if ch.Usage != nil {
			u := *ch.Usage
			usage = &u
		}
	}
}

type completionJSON struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
		Logprobs *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				Bytes       []int   `json:"bytes"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage Usage `json:"usage"`
}

func simComplete(t *testing.T, s *simulator, c *Call) (*Completion, completionJSON) {
	t.Helper()
	comp, err := s.Complete(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var out completionJSON
	if err := json.Unmarshal(comp.JSON, &out); err != nil {
		t.Fatal(err)
	}
	return comp, out
}

// The schemas the structured-output helpers send: openai's zodResponseFormat (strict, every property
// required, $defs and $ref for reused types, nullable unions), Pydantic's model_json_schema (titles,
// $defs, anyOf with null, enums, bounds), Vercel's and LangChain's (formats, arrays with bounds).
var schemas = map[string]string{
	"flat": `{"type":"object","properties":{"name":{"type":"string"},"date":{"type":"string"},"participants":{"type":"array","items":{"type":"string"}}},"required":["name","date","participants"],"additionalProperties":false}`,
	"zod with refs": `{"type":"object","properties":{"steps":{"type":"array","items":{"$ref":"#/$defs/step"}},"final_answer":{"type":"string"},"confidence":{"anyOf":[{"type":"number","minimum":0,"maximum":1},{"type":"null"}]}},
		"required":["steps","final_answer","confidence"],"additionalProperties":false,"$defs":{"step":{"type":"object","properties":{"explanation":{"type":"string"},"output":{"type":"string"}},"required":["explanation","output"],"additionalProperties":false}},"$schema":"http://json-schema.org/draft-07/schema#"}`,
	"pydantic": `{"$defs":{"Color":{"enum":["red","green","blue"],"title":"Color","type":"string"},"Address":{"properties":{"street":{"title":"Street","type":"string"},"zip":{"title":"Zip","type":"string","minLength":5,"maxLength":5}},"required":["street","zip"],"title":"Address","type":"object"}},
		"properties":{"age":{"exclusiveMinimum":17,"maximum":130,"title":"Age","type":"integer"},"favorite":{"$ref":"#/$defs/Color"},"address":{"anyOf":[{"$ref":"#/$defs/Address"},{"type":"null"}]},"score":{"type":"number","multipleOf":0.25,"minimum":2.1},"tags":{"items":{"type":"string"},"minItems":2,"maxItems":3,"uniqueItems":true,"type":"array","title":"Tags"}},
		"required":["age","favorite","address","score","tags"],"title":"Person","type":"object"}`,
	"formats and types": `{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"mail":{"type":"string","format":"email"},"site":{"type":"string","format":"uri"},"id":{"type":"string","format":"uuid"},"ok":{"type":"boolean"},"nothing":{"type":"null"},"kind":{"const":"event"},"maybe":{"type":["string","null"]},"pair":{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"minItems":2}},"required":["when","mail","site","id","ok","nothing","kind","maybe","pair"]}`,
	"allOf":             `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string","enum":["x","y"]}},"required":["b"]}]}`,
	"recursive":         `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"},"maxItems":1}},"required":["name","children"]}`,
	"array at the top":  `{"type":"array","items":{"type":"object","properties":{"x":{"type":"integer","minimum":10}},"required":["x"]},"minItems":3}`,
}

func TestSimulatorStructuredOutput(t *testing.T) {
	s := sim(t, ModelConfig{Name: "s", Simulator: &SimulatorConfig{Mode: ModeEcho}})
	for name, schema := range schemas {
		t.Run(name, func(t *testing.T) {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			c.AssertFormat()
			if err := c.AddResource("schema.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("schema.json")
			if err != nil {
				t.Fatal(err)
			}
			rf := `{"type":"json_schema","json_schema":{"name":"out","strict":true,"schema":` + schema + `}}`
			check := func(text string) {
				t.Helper()
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if err != nil {
					t.Fatalf("answer %q is not JSON: %v", text, err)
				}
				if err := sch.Validate(v); err != nil {
					t.Fatalf("answer %s is not valid against the schema: %v", text, err)
				}
			}
			comp, out := simComplete(t, s, chatCall("Extract the event: lunch on Friday", map[string]string{"response_format": rf}))
			check(*out.Choices[0].Message.Content)
			if comp.Usage.CompletionTokens < 3 {
				t.Errorf("usage %+v", comp.Usage)
			}
			st, err := s.Stream(context.Background(), chatCall("Extract the event: lunch on Friday", map[string]string{"response_format": rf}))
			if err != nil {
				t.Fatal(err)
			}
			content, _, _, usage, chunks := streamed(t, st)
			if content[0] != comp.Content || len(chunks) < 5 || usage.CompletionTokens != comp.Usage.CompletionTokens {
				t.Errorf("stream %q in %d chunks (usage %+v), answer %q (usage %+v)", content[0], len(chunks), usage, comp.Content, comp.Usage)
			}
		})
	}
	_, out := simComplete(t, s, chatCall("say it as JSON", map[string]string{"response_format": `{"type":"json_object"}`}))
	var obj map[string]any
	if err := json.Unmarshal([]byte(*out.Choices[0].Message.Content), &obj); err != nil || obj["answer"] != "say it as JSON" {
		t.Errorf("json_object answer %q: %v", *out.Choices[0].Message.Content, err)
	}
	_, out = simComplete(t, s, chatCall("plain", map[string]string{"response_format": `{"type":"text"}`}))
	if *out.Choices[0].Message.Content != "plain" {
		t.Errorf("text format: %q", *out.Choices[0].Message.Content)
	}
}

func TestSimulatorChoicesAndLogprobs(t *testing.T) {
	s := sim(t, ModelConfig{Name: "s", Simulator: &SimulatorConfig{Mode: ModeLorem, LoremTokens: 6}})
	c := chatCall("hi", map[string]string{"n": "3", "logprobs": "true", "top_logprobs": "2"})
	comp, out := simComplete(t, s, c)
	if len(out.Choices) != 3 {
		t.Fatalf("%d choices: %s", len(out.Choices), comp.JSON)
	}
	texts := map[string]bool{}
	for i, ch := range out.Choices {
		if ch.Index != i || ch.FinishReason != "stop" || ch.Logprobs == nil || len(ch.Logprobs.Content) != 6 {
			t.Fatalf("choice %d: %s", i, comp.JSON)
		}
		text := ""
		for _, lp := range ch.Logprobs.Content {
			text += lp.Token
			if lp.Logprob > 0 || len(lp.TopLogprobs) != 2 || lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[1].Logprob >= lp.Logprob || len(lp.Bytes) != len(lp.Token) {
				t.Fatalf("logprob entry %+v", lp)
			}
		}
		if text != *ch.Message.Content {
			t.Errorf("logprob tokens make %q, content is %q", text, *ch.Message.Content)
		}
		texts[text] = true
	}
	if len(texts) != 3 {
		t.Errorf("the choices are not different samples: %v", texts)
	}
	if out.Usage.CompletionTokens != 18 {
		t.Errorf("usage %+v counts every choice", out.Usage)
	}
	// Streamed: every choice, with a logprob per token chunk.
	st, err := s.Stream(context.Background(), chatCall("hi", map[string]string{"n": "3", "logprobs": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	content, _, finish, usage, chunks := streamed(t, st)
	for i, ch := range out.Choices {
		if content[i] != *ch.Message.Content || finish[i] != "stop" {
			t.Errorf("streamed choice %d: %q %q", i, content[i], finish[i])
		}
	}
	if usage.CompletionTokens != 18 {
		t.Errorf("stream usage %+v", usage)
	}
	withLogprobs := 0
	for _, ch := range chunks {
		if bytes.Contains(ch, []byte(`"logprobs":{"content":[{"token"`)) {
			withLogprobs++
		}
	}
	if withLogprobs != 18 {
		t.Errorf("%d chunks carry logprobs, want 18", withLogprobs)
	}
	for body, param := range map[string]string{`{"n":0}`: "n", `{"n":200}`: "n", `{"logprobs":"yes"}`: "logprobs",
		`{"top_logprobs":3}`: "top_logprobs", `{"logprobs":true,"top_logprobs":21}`: "top_logprobs",
		`{"response_format":{"type":"xml"}}`: "response_format.type", `{"response_format":{"type":"json_schema"}}`: "response_format.json_schema.schema",
		`{"stop":5}`: "stop", `{"reasoning_effort":"max"}`: "reasoning_effort"} {
		var m map[string]string
		var raw map[string]json.RawMessage
		json.Unmarshal([]byte(body), &raw)
		m = map[string]string{}
		for k, v := range raw {
			m[k] = string(v)
		}
		_, err := s.Complete(context.Background(), chatCall("hi", m))
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Param != param {
			t.Errorf("%s: %v, want a 400 naming %s", body, err, param)
		}
	}
}

func TestSimulatorStopAndMaxTokens(t *testing.T) {
	s := sim(t, ModelConfig{Name: "s", Simulator: &SimulatorConfig{Mode: ModeEcho}})
	_, out := simComplete(t, s, chatCall("one two three four", map[string]string{"stop": `["three"]`}))
	if *out.Choices[0].Message.Content != "one two " || out.Choices[0].FinishReason != "stop" {
		t.Errorf("stop: %q %s", *out.Choices[0].Message.Content, out.Choices[0].FinishReason)
	}
	c := chatCall("one two three four", nil)
	c.MaxTokens = 2
	_, out = simComplete(t, s, c)
	if *out.Choices[0].Message.Content != "one two" || out.Choices[0].FinishReason != "length" {
		t.Errorf("max_tokens: %q %s", *out.Choices[0].Message.Content, out.Choices[0].FinishReason)
	}
}

func TestSimulatorReasoning(t *testing.T) {
	s := sim(t, ModelConfig{Name: "s", Reasoning: ReasoningChatTemplate, Simulator: &SimulatorConfig{Mode: ModeEcho}})
	_, out := simComplete(t, s, chatCall("Why is the sky blue?", nil))
	msg := out.Choices[0].Message
	if msg.ReasoningContent == nil || !strings.Contains(*msg.ReasoningContent, "Why is the sky blue?") || *msg.Content != "Why is the sky blue?" {
		t.Fatalf("reasoning %v, content %v", msg.ReasoningContent, msg.Content)
	}
	reasoningWords := len(strings.Fields(*msg.ReasoningContent))
	if out.Usage.CompletionTokens != reasoningWords+5 {
		t.Errorf("usage %+v does not count the reasoning (%d words)", out.Usage, reasoningWords)
	}
	// The reasoning share is said as OpenAI says it, plain and streamed.
	var details struct {
		Usage struct {
			CompletionTokensDetails struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		} `json:"usage"`
	}
	comp, _ := simComplete(t, s, chatCall("Why is the sky blue?", nil))
	if json.Unmarshal(comp.JSON, &details); details.Usage.CompletionTokensDetails.ReasoningTokens != reasoningWords || comp.Usage.ReasoningTokens != reasoningWords {
		t.Errorf("reasoning tokens %d on the wire, %d counted; want %d", details.Usage.CompletionTokensDetails.ReasoningTokens, comp.Usage.ReasoningTokens, reasoningWords)
	}
	st, _ := s.Stream(context.Background(), chatCall("Why is the sky blue?", nil))
	content, reasoning, _, usage, chunks := streamed(t, st)
	if reasoning[0] != *msg.ReasoningContent || content[0] != *msg.Content {
		t.Errorf("stream: reasoning %q content %q", reasoning[0], content[0])
	}
	if usage == nil || usage.ReasoningTokens != reasoningWords || !bytes.Contains(chunks[len(chunks)-1], []byte(`"completion_tokens_details":{"reasoning_tokens":`+strconv.Itoa(reasoningWords)+`}`)) {
		t.Errorf("stream usage %+v, last chunk %s; want %d reasoning tokens", usage, chunks[len(chunks)-1], reasoningWords)
	}
	// Reasoning comes first, as reasoning_content deltas, vLLM's wire.
	first := -1
	for i, ch := range chunks {
		if bytes.Contains(ch, []byte(`"reasoning_content"`)) && first < 0 {
			first = i
		}
		if bytes.Contains(ch, []byte(`"content":"Why"`)) && (first < 0 || first > i) {
			t.Fatalf("content before reasoning: %s", chunks)
		}
	}
	// Thinking turned off by the template's switch: no reasoning.
	_, out = simComplete(t, s, chatCall("Why?", map[string]string{"chat_template_kwargs": `{"enable_thinking":false}`}))
	if out.Choices[0].Message.ReasoningContent != nil {
		t.Errorf("reasoning with enable_thinking false: %q", *out.Choices[0].Message.ReasoningContent)
	}
	// A reasoning_effort model thinks longer for a higher effort.
	e := sim(t, ModelConfig{Name: "e", Reasoning: ReasoningEffort, Simulator: &SimulatorConfig{Mode: ModeEcho}})
	_, low := simComplete(t, e, chatCall("Why?", map[string]string{"reasoning_effort": `"low"`}))
	_, high := simComplete(t, e, chatCall("Why?", map[string]string{"reasoning_effort": `"high"`}))
	if len(*low.Choices[0].Message.ReasoningContent) >= len(*high.Choices[0].Message.ReasoningContent) {
		t.Errorf("low %q, high %q", *low.Choices[0].Message.ReasoningContent, *high.Choices[0].Message.ReasoningContent)
	}
	// A model without reasoning never reasons.
	_, out = simComplete(t, sim(t, ModelConfig{Name: "n", Simulator: &SimulatorConfig{}}), chatCall("Why?", nil))
	if out.Choices[0].Message.ReasoningContent != nil {
		t.Error("a model without reasoning reasons")
	}
}

func TestSimulatorEmbeddings(t *testing.T) {
	s := sim(t, ModelConfig{Name: "s", Simulator: &SimulatorConfig{EmbeddingDim: 64}})
	type answer struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string          `json:"object"`
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Model string `json:"model"`
		Usage Usage  `json:"usage"`
	}
	embed := func(body string) (answer, error) {
		comp, err := s.Embeddings(context.Background(), "served", []byte(body))
		if err != nil {
			return answer{}, err
		}
		var a answer
		if err := json.Unmarshal(comp.JSON, &a); err != nil {
			t.Fatal(err)
		}
		if a.Usage.PromptTokens != comp.Usage.PromptTokens || comp.Usage.PromptTokens == 0 {
			t.Errorf("usage %+v, answer %+v", comp.Usage, a.Usage)
		}
		return a, nil
	}
	vec := func(raw json.RawMessage) []float64 {
		var v []float64
		if json.Unmarshal(raw, &v) != nil {
			var b64 string
			json.Unmarshal(raw, &b64)
			b, _ := base64.StdEncoding.DecodeString(b64)
			for i := 0; i+4 <= len(b); i += 4 {
				v = append(v, float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))))
			}
		}
		return v
	}
	norm := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x * x
		}
		return math.Sqrt(s)
	}
	a, err := embed(`{"model":"m","input":["the cat","the dog","the cat"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Object != "list" || a.Model != "served" || len(a.Data) != 3 || a.Data[2].Index != 2 || a.Data[0].Object != "embedding" {
		t.Fatalf("answer %+v", a)
	}
	v0, v1, v2 := vec(a.Data[0].Embedding), vec(a.Data[1].Embedding), vec(a.Data[2].Embedding)
	if len(v0) != 64 || math.Abs(norm(v0)-1) > 1e-5 {
		t.Errorf("dimension %d, norm %f", len(v0), norm(v0))
	}
	if !equalFloats(v0, v2) || equalFloats(v0, v1) {
		t.Error("same text, same vector; other text, other vector")
	}
	b, _ := embed(`{"input":"the cat","dimensions":16,"encoding_format":"base64"}`)
	short := vec(b.Data[0].Embedding)
	if len(short) != 16 || math.Abs(norm(short)-1) > 1e-5 {
		t.Errorf("dimensions 16 in base64: %d values, norm %f", len(short), norm(short))
	}
	if tok, _ := embed(`{"input":[[1,2,3],[4]]}`); len(tok.Data) != 2 {
		t.Errorf("token inputs: %+v", tok)
	}
	for body, param := range map[string]string{`{}`: "input", `{"input":[]}`: "input", `{"input":""}`: "input", `{"input":5}`: "input",
		`{"input":"a","dimensions":65}`: "dimensions", `{"input":"a","encoding_format":"hex"}`: "encoding_format"} {
		_, err := embed(body)
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Param != param {
			t.Errorf("%s: %v, want a 400 naming %s", body, err, param)
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSimulatorTextCompletions(t *testing.T) {
	s := sim(t, ModelConfig{Name: "s", Simulator: &SimulatorConfig{Mode: ModeEcho}})
	comp, err := s.TextCompletion(context.Background(), "served", []byte(`{"model":"m","prompt":"Once upon a time","max_tokens":3,"logprobs":2,"echo":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
			Logprobs     struct {
				Tokens      []string             `json:"tokens"`
				TopLogprobs []map[string]float64 `json:"top_logprobs"`
				TextOffset  []int                `json:"text_offset"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage Usage `json:"usage"`
	}
	json.Unmarshal(comp.JSON, &a)
	if a.Object != "text_completion" || a.Model != "served" || len(a.Choices) != 1 {
		t.Fatalf("answer %s", comp.JSON)
	}
	ch := a.Choices[0]
	if ch.Text != "Once upon a time Once upon a" || ch.FinishReason != "length" || len(ch.Logprobs.Tokens) != 3 ||
		len(ch.Logprobs.TopLogprobs[0]) != 2 || ch.Logprobs.TextOffset[0] != len("Once upon a time") {
		t.Errorf("choice %+v", ch)
	}
	if a.Usage.PromptTokens != 4 || a.Usage.CompletionTokens != 3 {
		t.Errorf("usage %+v", a.Usage)
	}
	// Several prompts, n each, streamed: choices indexed prompt by prompt.
	st, err := s.TextCompletionStream(context.Background(), "served", []byte(`{"prompt":["a b c","d e"],"n":2,"stop":"c","stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	content, _, finish, usage, chunks := streamed(t, st)
	if content[0] != " a b " || content[1] != " a b " || content[2] != " d e" || content[3] != " d e" || finish[0] != "stop" || len(finish) != 4 {
		t.Errorf("choices %v %v", content, finish)
	}
	if usage == nil || usage.PromptTokens != 5 || usage.CompletionTokens != 10 {
		t.Errorf("usage %+v", usage)
	}
	if !bytes.Contains(chunks[0], []byte(`"object":"text_completion"`)) || !bytes.Contains(chunks[0], []byte(`"usage":null`)) {
		t.Errorf("first chunk %s", chunks[0])
	}
	for body, param := range map[string]string{`{}`: "prompt", `{"prompt":"a","n":0}`: "n", `{"prompt":"a","max_tokens":-1}`: "max_tokens",
		`{"prompt":"a","logprobs":9}`: "logprobs", `{"prompt":"a","stop":[1]}`: "stop"} {
		_, err := s.TextCompletion(context.Background(), "m", []byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Param != param {
			t.Errorf("%s: %v, want a 400 naming %s", body, err, param)
		}
	}
}

func TestCatalogFields(t *testing.T) {
	for yaml, says := range map[string]string{
		"models:\n  - name: a\n    reasoning: sometimes\n":                                               `reasoning "sometimes"`,
		"models:\n  - name: a\n    routes: [embeddings, images]\n":                                       `routes: "images"`,
		"models:\n  - name: a\n    routes: [completions, completions]\n":                                 "listed twice",
		"models:\n  - name: a\n    supportsResponses: true\n":                                            "supportsResponses is only for runtime",
		"models:\n  - name: a\n    simulator: {embeddingDim: -1}\n":                                      "must not be negative",
		"models:\n  - name: a\n    runtime: openai\n    upstreamUrl: http://x/v1\n    routes: [audio]\n": `routes: "audio"`,
	} {
		if _, err := ParseModels("models.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: error %v, want one saying %q", yaml, err, says)
		}
	}
	ms, err := ParseModels("models.yaml", []byte("models:\n  - name: up\n    runtime: openai\n    upstreamUrl: http://x/v1\n    supportsResponses: true\n    reasoning: chat_template_kwargs\n    routes: [embeddings, completions]\n"))
	if err != nil || !ms[0].SupportsResponses || ms[0].Reasoning != ReasoningChatTemplate || len(ms[0].Routes) != 2 {
		t.Fatalf("%+v %v", ms, err)
	}
	r, _ := Load("")
	cfg, ok := r.Config("sim-qwen3-8b")
	if !ok || cfg.Reasoning != ReasoningChatTemplate {
		t.Fatalf("the builtin catalog has no reasoning model: %+v", cfg)
	}
	def, _ := r.Default()
	if cfg, _ := r.Config(def.ID); len(cfg.Routes) != 2 || cfg.Simulator.EmbeddingDim != 256 {
		t.Errorf("default model %+v", cfg)
	}
}
