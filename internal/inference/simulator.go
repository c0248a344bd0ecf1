package inference

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/stopseq"
)

// simulator is the embedded stand-in model: deterministic text, real wire format, realistic pacing.
// It honours what clients rely on (docs/API.md, "Models file"): response_format (json_object, and
// json_schema: a JSON value valid against the schema), n choices, logprobs and top_logprobs, stop,
// max_tokens, tool calls (simtools.go), and, for models with `reasoning` set, reasoning_content
// before the answer. It also answers /v1/embeddings and /v1/completions (simroutes.go).
type simulator struct {
	cfg       SimulatorConfig
	reasoning string // the model's reasoning controls; "" for a model that does not reason
	ttft      time.Duration
	itl       time.Duration
}

func newSimulator(m ModelConfig) *simulator {
	return &simulator{cfg: *m.Simulator, reasoning: m.Reasoning, ttft: time.Duration(m.Simulator.TTFTMs) * time.Millisecond,
		itl: time.Duration(m.Simulator.ITLMs) * time.Millisecond}
}

// fingerprint marks every simulated answer, so that nobody mistakes it for a model's output.
const simFingerprint = "svc-simulator"

var loremWords = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor
incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco laboris
nisi ut aliquip ex ea commodo consequat duis aute irure dolor in reprehenderit in voluptate velit esse cillum
dolore eu fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt in culpa qui officia
deserunt mollit anim id est laborum`)

// maxChoices bounds n, as OpenAI does (128).
const maxChoices = 128

// simRequest is what a chat request asks of the simulator beyond its messages, read and checked
// from the body (the edge leaves these fields to the runtime, as an upstream would judge them).
type simRequest struct {
	n        int
	logprobs bool
	top      int    // top_logprobs
	format   string // "", "json_object" or "json_schema"
	schema   json.RawMessage
	stop     []string
	think    bool   // the answer reasons first
	effort   string // reasoning_effort, "" for the default
}

// badRequest is the 400 an OpenAI-compatible server answers to a field it refuses.
func badRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// request reads what c asks of the simulator.
func (s *simulator) request(c *Call) (*simRequest, error) {
	r := &simRequest{n: 1}
	body := c.Body
	if raw, ok := body["n"]; ok && string(raw) != "null" {
		n, err := strconv.Atoi(string(raw))
		if err != nil || n < 1 || n > maxChoices {
			return nil, badRequest("n", "n must be an integer from 1 to %d", maxChoices)
		}
		r.n = n
	}
	if raw, ok := body["logprobs"]; ok && string(raw) != "null" {
		if string(raw) != "true" && string(raw) != "false" {
			return nil, badRequest("logprobs", "logprobs must be true or false")
		}
		r.logprobs = string(raw) == "true"
	}
	if raw, ok := body["top_logprobs"]; ok && string(raw) != "null" {
		n, err := strconv.Atoi(string(raw))
		if err != nil || n < 0 || n > 20 {
			return nil, badRequest("top_logprobs", "top_logprobs must be an integer from 0 to 20")
		}
		if !r.logprobs && n > 0 {
			return nil, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		r.top = n
	}
	if raw, ok := body["response_format"]; ok && string(raw) != "null" {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if json.Unmarshal(raw, &rf) != nil {
			return nil, badRequest("response_format", "response_format must be an object with a type")
		}
		switch rf.Type {
		case "text":
		case "json_object":
			r.format = rf.Type
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || rf.JSONSchema.Schema[0] != '{' {
				return nil, badRequest("response_format.json_schema.schema", "response_format of type json_schema needs json_schema.schema, a JSON Schema object")
			}
			r.format, r.schema = rf.Type, rf.JSONSchema.Schema
		default:
			return nil, badRequest("response_format.type", "response_format.type must be one of text, json_object, json_schema")
		}
	}
	if raw, ok := body["stop"]; ok && string(raw) != "null" {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			r.stop = []string{one}
		} else if json.Unmarshal(raw, &r.stop) != nil || len(r.stop) > 4 {
			return nil, badRequest("stop", "stop must be a string or an array of at most 4 strings")
		}
	}
	if raw, ok := body["reasoning_effort"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &r.effort) != nil || (r.effort != "low" && r.effort != "medium" && r.effort != "high") {
			return nil, badRequest("reasoning_effort", "reasoning_effort must be one of low, medium, high")
		}
	}
	switch s.reasoning {
	case ReasoningEffort:
		r.think = true
	case ReasoningChatTemplate:
		// Qwen3's template thinks unless enable_thinking is false.
		var kw struct {
			EnableThinking *bool `json:"enable_thinking"`
		}
		if raw, ok := body["chat_template_kwargs"]; ok && string(raw) != "null" {
			if json.Unmarshal(raw, &kw) != nil {
				return nil, badRequest("chat_template_kwargs", "chat_template_kwargs must be an object")
			}
		}
		r.think = kw.EnableThinking == nil || *kw.EnableThinking
	}
	return r, nil
}

// simChoice is the plan of one choice of an answer.
type simChoice struct {
	reasoning []string // reasoning tokens, each but the first with its leading space
	toks      []string // content tokens
	calls     []simToolCall
	finish    string
}

// plan decides the answer's choices.
func (s *simulator) plan(c *Call, r *simRequest) []simChoice {
	calls := simToolCalls(c)
	faulty := s.faulty(c)
	if faulty {
		for i := range calls {
			calls[i].Arguments = calls[i].Arguments[:len(calls[i].Arguments)/2]
		}
	}
	out := make([]simChoice, r.n)
	for i := range out {
		ch := &out[i]
		if r.think {
			ch.reasoning = wordTokens(s.reasoningText(c, r.effort))
		}
		if len(calls) > 0 {
			ch.calls = calls
			if i > 0 {
				ch.calls = simToolCalls(c) // every choice calls with ids of its own
			}
			ch.finish = "tool_calls"
			continue
		}
		var toks []string
		switch r.format {
		case "json_object", "json_schema":
			text := strings.Join(s.words(c, i), " ")
			toks = jsonTokens(string(schemaValue(r.schema, text)))
			if faulty {
				toks = toks[:len(toks)/2]
			}
		default:
			toks = wordTokens(strings.Join(s.words(c, i), " "))
		}
		ch.finish = "stop"
		toks, _ = stopseq.Cut(toks, r.stop)
		if c.MaxTokens > 0 {
			if len(ch.reasoning) >= c.MaxTokens {
				ch.reasoning, toks, ch.finish = ch.reasoning[:c.MaxTokens], nil, "length"
			} else if len(ch.reasoning)+len(toks) > c.MaxTokens {
				toks, ch.finish = toks[:c.MaxTokens-len(ch.reasoning)], "length"
			}
		}
		ch.toks = toks
	}
	return out
}

// faulty reports whether the conversation is one of the simulator's faultShare (SimulatorConfig): by a
// hash of its turns, so that the same request is faulty every time.
func (s *simulator) faulty(c *Call) bool {
	if s.cfg.FaultShare <= 0 {
		return false
	}
	h := fnv.New64a()
	for _, m := range c.Messages {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
		h.Write([]byte{0})
	}
	return float64(h.Sum64()%10000) < s.cfg.FaultShare*10000
}

// words returns the words of choice i's text: the last user message (or the tool result after it)
// in echo mode; seeded lorem ipsum, different for each choice, in lorem mode.
func (s *simulator) words(c *Call, choice int) []string {
	if s.cfg.Mode == ModeLorem {
		// Seeded by the conversation and the served model, so the same request gets the same answer.
		h := fnv.New64a()
		h.Write([]byte(c.Served))
		for _, m := range c.Messages {
			h.Write([]byte(m.Role))
			h.Write([]byte{0})
			h.Write([]byte(m.Content))
			h.Write([]byte{0})
		}
		rng := mrand.New(mrand.NewPCG(h.Sum64()+uint64(choice), uint64(s.cfg.Seed)))
		words := make([]string, s.cfg.LoremTokens)
		for i := range words {
			words[i] = loremWords[rng.IntN(len(loremWords))]
		}
		if len(words) > 0 {
			words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
			words[len(words)-1] += "."
		}
		return words
	}
	// Echo the last user message, or the tool result that follows it (an agent's next turn).
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" || c.Messages[i].Role == "tool" {
			return strings.Fields(c.Messages[i].Content)
		}
	}
	return nil
}

// reasoningText is what a reasoning model thinks before answering: one sentence for a low effort,
// two by default, three for a high effort.
func (s *simulator) reasoningText(c *Call, effort string) string {
	asked := ""
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "user" || c.Messages[i].Role == "tool" {
			asked = c.Messages[i].Content
			break
		}
	}
	if w := strings.Fields(asked); len(w) > 12 {
		asked = strings.Join(w[:12], " ") + " …"
	}
	sentences := []string{fmt.Sprintf("The user wrote: %q.", asked), "I will answer as the simulator does.",
		"Nothing more to weigh."}
	switch effort {
	case "low":
		sentences = sentences[:1]
	case "high":
	default:
		sentences = sentences[:2]
	}
	return strings.Join(sentences, " ")
}

// wordTokens splits text into word tokens, each but the first with its leading space.
func wordTokens(text string) []string {
	words := strings.Fields(text)
	for i := 1; i < len(words); i++ {
		words[i] = " " + words[i]
	}
	return words
}

// jsonTokens splits JSON text into tokens as a tokenizer would: runs of letters and digits, runs of
// punctuation, each with the spaces before it.
func jsonTokens(text string) []string {
	var out []string
	start := 0
	class := func(r byte) int {
		switch {
		case r == ' ' || r == '\n' || r == '\t':
			return 0
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r >= 0x80:
			return 1
		}
		return 2
	}
	for i := 1; i <= len(text); i++ {
		if i == len(text) || (class(text[i]) != class(text[i-1]) && class(text[i-1]) != 0) {
			out = append(out, text[start:i])
			start = i
		}
	}
	return out
}

// promptTokens counts words plus a small per-message overhead, like real chat templates add.
// PromptTokens is the simulator's count of c's prompt, the one its answers report (PromptCounter).
func (s *simulator) PromptTokens(c *Call) int { return promptTokens(c.Messages) }

var _ Tokenizer = (*simulator)(nil)

// Tokenize counts a chat-form /tokenize request (the translation of a count_tokens or input_tokens
// call) as the simulator counts a prompt, so that a count and the answer's usage agree.
func (s *simulator) Tokenize(_ context.Context, _ *Call, body []byte) (int, bool) {
	c, err := conv.ReadChat(body)
	if err != nil {
		return 0, false
	}
	msgs := make([]Message, len(c.Messages))
	for i, m := range c.Messages {
		msgs[i] = Message{Role: m.Role, Content: conv.Text(m.Content)}
	}
	return promptTokens(msgs), true
}

func promptTokens(msgs []Message) int {
	n := 3
	for _, m := range msgs {
		n += 4 + len(strings.Fields(m.Content))
	}
	return n
}

// completionTokens counts a choice's tokens: reasoning and content tokens, and for tool calls one per
// streamed delta.
func (ch *simChoice) completionTokens() int {
	n := len(ch.reasoning) + len(ch.toks)
	for _, call := range ch.calls {
		n += 1 + len(fragments(call.Arguments))
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// completionID is the id of a call's answer: the edge's (Call.ID), else a fresh one.
func completionID(c *Call) string {
	if c.ID != "" {
		return c.ID
	}
	return newCompletionID()
}

func newCompletionID() string {
	var b [12]byte
	rand.Read(b[:])
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	out := make([]byte, 0, 24)
	for _, v := range b {
		out = append(out, alphabet[int(v)%62], alphabet[int(v/62)%62])
	}
	return "chatcmpl-" + string(out)
}

// Log probabilities, deterministic: a token's logprob comes from its text and place, and its
// alternatives are variants of it, less likely.

type simLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []simTopProb `json:"top_logprobs"`
}

type simTopProb struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func tokenBytes(tok string) []int {
	b := make([]int, len(tok))
	for i := range tok {
		b[i] = int(tok[i])
	}
	return b
}

// logprob returns the log probability entry of token tok at position pos, with top alternatives.
func logprob(tok string, pos, top int) simLogprob {
	h := fnv.New32a()
	h.Write([]byte(tok))
	lp := -math.Round(float64((h.Sum32()+uint32(pos))%1500)/1000*1e4) / 1e4
	e := simLogprob{Token: tok, Logprob: lp, Bytes: tokenBytes(tok), TopLogprobs: []simTopProb{}}
	if top > 0 {
		e.TopLogprobs = append(e.TopLogprobs, simTopProb{Token: tok, Logprob: lp, Bytes: tokenBytes(tok)})
		for k := 1; k < top; k++ {
			alt := strings.TrimSpace(tok)
			switch k % 3 {
			case 1:
				alt = strings.ToUpper(alt)
			case 2:
				alt += "s"
			default:
				alt = strings.Repeat(alt, 2)
			}
			if strings.HasPrefix(tok, " ") {
				alt = " " + alt
			}
			alt += strings.Repeat("\u200b", k/3) // keeps alternatives distinct
			e.TopLogprobs = append(e.TopLogprobs, simTopProb{Token: alt, Logprob: lp - float64(k), Bytes: tokenBytes(alt)})
		}
	}
	return e
}

type simLogprobs struct {
	Content []simLogprob `json:"content"`
}

func (r *simRequest) logprobsOf(toks []string, from int) *simLogprobs {
	if !r.logprobs {
		return nil
	}
	lp := &simLogprobs{Content: make([]simLogprob, len(toks))}
	for i, t := range toks {
		lp.Content[i] = logprob(t, from+i, r.top)
	}
	return lp
}

// The chat completion wire.

type simMessage struct {
	Role             string            `json:"role"`
	Content          *string           `json:"content"`
	ReasoningContent *string           `json:"reasoning_content,omitempty"`
	ToolCalls        []simWireToolCall `json:"tool_calls,omitempty"`
}

// simWireToolCall is a tool call in OpenAI's wire format; in a stream's deltas Index is set, and the
// id, type and name only on a call's first delta.
type simWireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type simWireChoice struct {
	Index        int          `json:"index"`
	Message      simMessage   `json:"message"`
	Logprobs     *simLogprobs `json:"logprobs"`
	FinishReason string       `json:"finish_reason"`
}

type simCompletion struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []simWireChoice `json:"choices"`
	Usage             simUsage        `json:"usage"`
}

// simUsage is the simulator's usage on the wire: OpenAI's, with completion_tokens_details when the
// answer reasoned.
type simUsage struct {
	Usage
	CompletionTokensDetails *simTokenDetails `json:"completion_tokens_details,omitempty"`
}

type simTokenDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

func wireUsage(u Usage) simUsage {
	w := simUsage{Usage: u}
	if u.ReasoningTokens > 0 {
		w.CompletionTokensDetails = &simTokenDetails{ReasoningTokens: u.ReasoningTokens}
	}
	return w
}

func (s *simulator) Complete(ctx context.Context, c *Call) (*Completion, error) {
	r, err := s.request(c)
	if err != nil {
		return nil, err
	}
	choices := s.plan(c, r)
	longest := 0
	for i := range choices {
		longest = max(longest, choices[i].completionTokens())
	}
	wait := s.ttft
	if longest > 1 {
		wait += time.Duration(longest-1) * s.itl
	}
	if err := sleepCtx(ctx, wait); err != nil {
		return nil, err
	}
	out := &Completion{ID: completionID(c), Created: time.Now().Unix()}
	out.Usage = Usage{PromptTokens: promptTokens(c.Messages)}
	wire := simCompletion{ID: out.ID, Object: "chat.completion", Created: out.Created, Model: c.Served, SystemFingerprint: simFingerprint}
	for i := range choices {
		ch := &choices[i]
		out.Usage.CompletionTokens += ch.completionTokens()
		out.Usage.ReasoningTokens += len(ch.reasoning)
		msg := simMessage{Role: "assistant"}
		if len(ch.reasoning) > 0 {
			text := strings.Join(ch.reasoning, "")
			msg.ReasoningContent = &text
		}
		var lp *simLogprobs
		if len(ch.calls) > 0 {
			msg.ToolCalls = make([]simWireToolCall, len(ch.calls))
			for k, call := range ch.calls {
				msg.ToolCalls[k].ID, msg.ToolCalls[k].Type = call.ID, "function"
				msg.ToolCalls[k].Function.Name, msg.ToolCalls[k].Function.Arguments = call.Name, call.Arguments
			}
		} else {
			text := strings.Join(ch.toks, "")
			msg.Content = &text
			lp = r.logprobsOf(ch.toks, 0)
		}
		if i == 0 {
			out.FinishReason = ch.finish
			if msg.Content != nil {
				out.Content = *msg.Content
			}
		}
		wire.Choices = append(wire.Choices, simWireChoice{Index: i, Message: msg, Logprobs: lp, FinishReason: ch.finish})
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	wire.Usage = wireUsage(out.Usage)
	body, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	out.JSON = body
	return out, nil
}

// simStep is one chunk of a streamed answer after the role chunks: a delta of one choice, or its
// finish.
type simStep struct {
	choice    int
	reasoning string
	content   string
	pos       int // the content token's place, for its logprob
	tool      *ToolCallDelta
	finish    string
	tick      bool // a new engine step: the inter-token latency passes before it
}

func (s *simulator) Stream(ctx context.Context, c *Call) (Stream, error) {
	r, err := s.request(c)
	if err != nil {
		return nil, err
	}
	choices := s.plan(c, r)
	st := &simStream{ctx: ctx, sim: s, call: c, req: r, n: len(choices), id: completionID(c), created: time.Now().Unix()}
	// Each choice's deltas in order: reasoning tokens, content tokens or tool call deltas (one opening
	// each call, then its arguments in fragments, as inference servers stream them). The choices
	// advance together, one delta each per engine step.
	per := make([][]simStep, len(choices))
	for i := range choices {
		ch := &choices[i]
		st.usage += ch.completionTokens()
		st.reasoning += len(ch.reasoning)
		for _, t := range ch.reasoning {
			per[i] = append(per[i], simStep{choice: i, reasoning: t})
		}
		for k, t := range ch.toks {
			per[i] = append(per[i], simStep{choice: i, content: t, pos: k})
		}
		for k, call := range ch.calls {
			per[i] = append(per[i], simStep{choice: i, tool: &ToolCallDelta{Index: k, ID: call.ID, Name: call.Name}})
			for _, f := range fragments(call.Arguments) {
				per[i] = append(per[i], simStep{choice: i, tool: &ToolCallDelta{Index: k, Arguments: f}})
			}
		}
	}
	for k := 0; ; k++ {
		any := false
		for i := range per {
			if k < len(per[i]) {
				step := per[i][k]
				step.tick = !any && k > 0
				st.steps = append(st.steps, step)
				any = true
			}
		}
		if !any {
			break
		}
	}
	for i := range choices {
		st.steps = append(st.steps, simStep{choice: i, finish: choices[i].finish})
	}
	return st, nil
}

// simStream emits: a role chunk per choice, the steps, and the usage chunk.
type simStream struct {
	ctx       context.Context
	sim       *simulator
	call      *Call
	req       *simRequest
	n         int
	steps     []simStep
	usage     int // completion tokens of every choice
	reasoning int // of usage, reasoning tokens
	id        string
	created   int64

	next  int // chunks sent: the role chunks, then the steps, then usage
	chunk Chunk
}

type simDelta struct {
	Role             string            `json:"role,omitempty"`
	Content          *string           `json:"content,omitempty"`
	ReasoningContent *string           `json:"reasoning_content,omitempty"`
	ToolCalls        []simWireToolCall `json:"tool_calls,omitempty"`
}

type simChunkChoice struct {
	Index        int          `json:"index"`
	Delta        simDelta     `json:"delta"`
	Logprobs     *simLogprobs `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type simChunk struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	SystemFingerprint string           `json:"system_fingerprint"`
	Choices           []simChunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the client asked for usage, as OpenAI does.
	Usage json.RawMessage `json:"usage,omitempty"`
}

func (st *simStream) Next() (*Chunk, error) {
	total := st.n + len(st.steps) + 1
	if st.next >= total {
		return nil, io.EOF
	}
	var wait time.Duration
	switch {
	case st.next == 0:
		wait = st.sim.ttft
	case st.next >= st.n && st.next < st.n+len(st.steps) && st.steps[st.next-st.n].tick:
		wait = st.sim.itl
	}
	if err := sleepCtx(st.ctx, wait); err != nil {
		return nil, err
	}
	wire := simChunk{ID: st.id, Object: "chat.completion.chunk", Created: st.created, Model: st.call.Served,
		SystemFingerprint: simFingerprint}
	if st.call.IncludeUsage {
		wire.Usage = json.RawMessage("null")
	}
	st.chunk = Chunk{ID: st.id, Created: st.created}
	switch i := st.next; {
	case i < st.n:
		empty := ""
		wire.Choices = []simChunkChoice{{Index: i, Delta: simDelta{Role: "assistant", Content: &empty}}}
		st.chunk.Choices = []ChunkChoice{{Index: i, Role: "assistant"}}
	case i < st.n+len(st.steps):
		step := st.steps[i-st.n]
		wc := simChunkChoice{Index: step.choice}
		cc := ChunkChoice{Index: step.choice}
		switch {
		case step.finish != "":
			fr := step.finish
			wc.FinishReason, cc.FinishReason = &fr, fr
		case step.tool != nil:
			d := *step.tool
			tc := simWireToolCall{Index: &d.Index, ID: d.ID}
			if d.ID != "" {
				tc.Type = "function"
			}
			tc.Function.Name, tc.Function.Arguments = d.Name, d.Arguments
			wc.Delta.ToolCalls = []simWireToolCall{tc}
			cc.ToolCalls = []ToolCallDelta{d}
		case step.reasoning != "":
			r := step.reasoning
			wc.Delta.ReasoningContent, cc.Reasoning = &r, r
		default:
			t := step.content
			wc.Delta.Content, cc.Content = &t, t
			if st.req.logprobs {
				wc.Logprobs = &simLogprobs{Content: []simLogprob{logprob(t, step.pos, st.req.top)}}
			}
		}
		wire.Choices = []simChunkChoice{wc}
		st.chunk.Choices = []ChunkChoice{cc}
	default:
		u := Usage{PromptTokens: promptTokens(st.call.Messages), CompletionTokens: st.usage, ReasoningTokens: st.reasoning}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		wire.Choices = []simChunkChoice{}
		wire.Usage, _ = json.Marshal(wireUsage(u))
		st.chunk.Usage = &u
	}
	st.next++
	b, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	st.chunk.JSON = b
	return &st.chunk, nil
}

func (st *simStream) Close() error { return nil }
