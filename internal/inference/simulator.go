package inference

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"hash/fnv"
	"io"
	mrand "math/rand/v2"
	"strings"
	"time"
)

// simulator is the embedded stand-in model: deterministic text, real wire format, realistic pacing.
type simulator struct {
	cfg  SimulatorConfig
	ttft time.Duration
	itl  time.Duration
}

func newSimulator(m ModelConfig) *simulator {
	return &simulator{cfg: *m.Simulator, ttft: time.Duration(m.Simulator.TTFTMs) * time.Millisecond,
		itl: time.Duration(m.Simulator.ITLMs) * time.Millisecond}
}

// fingerprint marks every simulated answer, so that nobody mistakes it for a model's output.
const simFingerprint = "svc-simulator"

var loremWords = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor
incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco laboris
nisi ut aliquip ex ea commodo consequat duis aute irure dolor in reprehenderit in voluptate velit esse cillum
dolore eu fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt in culpa qui officia
deserunt mollit anim id est laborum`)

// answer returns the tokens of the reply (each but the first with its leading space) and whether
// max_tokens cut it short.
func (s *simulator) answer(c *Call) (toks []string, truncated bool) {
	var words []string
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
		rng := mrand.New(mrand.NewPCG(h.Sum64(), uint64(s.cfg.Seed)))
		words = make([]string, s.cfg.LoremTokens)
		for i := range words {
			words[i] = loremWords[rng.IntN(len(loremWords))]
		}
		if len(words) > 0 {
			words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
			words[len(words)-1] += "."
		}
	} else {
		// Echo the last user message, or the tool result that follows it (an agent's next turn).
		for i := len(c.Messages) - 1; i >= 0; i-- {
			if c.Messages[i].Role == "user" || c.Messages[i].Role == "tool" {
				words = strings.Fields(c.Messages[i].Content)
				break
			}
		}
	}
	if c.MaxTokens > 0 && len(words) > c.MaxTokens {
		words, truncated = words[:c.MaxTokens], true
	}
	toks = make([]string, len(words))
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		toks[i] = w
	}
	return toks, truncated
}

// promptTokens counts words plus a small per-message overhead, like real chat templates add.
func promptTokens(msgs []Message) int {
	n := 3
	for _, m := range msgs {
		n += 4 + len(strings.Fields(m.Content))
	}
	return n
}

func finishReason(truncated bool) string {
	if truncated {
		return "length"
	}
	return "stop"
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

type simMessage struct {
	Role      string            `json:"role"`
	Content   *string           `json:"content"`
	ToolCalls []simWireToolCall `json:"tool_calls,omitempty"`
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

type simChoice struct {
	Index        int        `json:"index"`
	Message      simMessage `json:"message"`
	Logprobs     any        `json:"logprobs"`
	FinishReason string     `json:"finish_reason"`
}

type simCompletion struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	SystemFingerprint string      `json:"system_fingerprint"`
	Choices           []simChoice `json:"choices"`
	Usage             Usage       `json:"usage"`
}

func (s *simulator) Complete(ctx context.Context, c *Call) (*Completion, error) {
	if calls := simToolCalls(c); len(calls) > 0 {
		return s.completeTools(ctx, c, calls)
	}
	toks, truncated := s.answer(c)
	wait := s.ttft
	if len(toks) > 1 {
		wait += time.Duration(len(toks)-1) * s.itl
	}
	if err := sleepCtx(ctx, wait); err != nil {
		return nil, err
	}
	out := &Completion{ID: newCompletionID(), Created: time.Now().Unix(), Content: strings.Join(toks, ""),
		FinishReason: finishReason(truncated)}
	out.Usage = Usage{PromptTokens: promptTokens(c.Messages), CompletionTokens: len(toks)}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	body, err := json.Marshal(simCompletion{ID: out.ID, Object: "chat.completion", Created: out.Created, Model: c.Served,
		SystemFingerprint: simFingerprint,
		Choices:           []simChoice{{Message: simMessage{Role: "assistant", Content: &out.Content}, FinishReason: out.FinishReason}},
		Usage:             out.Usage})
	if err != nil {
		return nil, err
	}
	out.JSON = body
	return out, nil
}

// completeTools answers with tool calls instead of text.
func (s *simulator) completeTools(ctx context.Context, c *Call, calls []simToolCall) (*Completion, error) {
	deltas := 0
	wire := make([]simWireToolCall, len(calls))
	for i, call := range calls {
		deltas += 1 + len(fragments(call.Arguments))
		wire[i].ID, wire[i].Type = call.ID, "function"
		wire[i].Function.Name, wire[i].Function.Arguments = call.Name, call.Arguments
	}
	if err := sleepCtx(ctx, s.ttft+time.Duration(deltas-1)*s.itl); err != nil {
		return nil, err
	}
	out := &Completion{ID: newCompletionID(), Created: time.Now().Unix(), FinishReason: "tool_calls"}
	out.Usage = Usage{PromptTokens: promptTokens(c.Messages), CompletionTokens: deltas}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	body, err := json.Marshal(simCompletion{ID: out.ID, Object: "chat.completion", Created: out.Created, Model: c.Served,
		SystemFingerprint: simFingerprint,
		Choices:           []simChoice{{Message: simMessage{Role: "assistant", ToolCalls: wire}, FinishReason: out.FinishReason}},
		Usage:             out.Usage})
	if err != nil {
		return nil, err
	}
	out.JSON = body
	return out, nil
}

func (s *simulator) Stream(ctx context.Context, c *Call) (Stream, error) {
	st := &simStream{ctx: ctx, sim: s, call: c, id: newCompletionID(), created: time.Now().Unix()}
	if calls := simToolCalls(c); len(calls) > 0 {
		// One delta opening each call, then its arguments in fragments, as inference servers stream them.
		for i, call := range calls {
			st.tools = append(st.tools, ToolCallDelta{Index: i, ID: call.ID, Name: call.Name})
			for _, f := range fragments(call.Arguments) {
				st.tools = append(st.tools, ToolCallDelta{Index: i, Arguments: f})
			}
		}
		st.toks = make([]string, len(st.tools)) // one step per delta
		return st, nil
	}
	st.toks, st.truncated = s.answer(c)
	return st, nil
}

// simStream emits: a role chunk, one chunk per token, a finish chunk, and the usage chunk.
type simStream struct {
	ctx       context.Context
	sim       *simulator
	call      *Call
	toks      []string
	tools     []ToolCallDelta // the answer's tool-call deltas, one a step, instead of tokens
	truncated bool
	id        string
	created   int64

	step  int // 0: role chunk, 1..len(toks): tokens, then finish, then usage
	chunk Chunk
}

type simDelta struct {
	Role      string            `json:"role,omitempty"`
	Content   *string           `json:"content,omitempty"`
	ToolCalls []simWireToolCall `json:"tool_calls,omitempty"`
}

type simChunkChoice struct {
	Index        int      `json:"index"`
	Delta        simDelta `json:"delta"`
	Logprobs     any      `json:"logprobs"`
	FinishReason *string  `json:"finish_reason"`
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
	n := len(st.toks)
	if st.step > n+2 {
		return nil, io.EOF
	}
	var wait time.Duration
	switch {
	case st.step == 0:
		wait = st.sim.ttft
	case st.step > 1 && st.step <= n:
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
	switch {
	case st.step == 0:
		empty := ""
		wire.Choices = []simChunkChoice{{Delta: simDelta{Role: "assistant", Content: &empty}}}
		st.chunk.Choices = []ChunkChoice{{Role: "assistant"}}
	case st.step <= n && st.tools != nil:
		d := st.tools[st.step-1]
		tc := simWireToolCall{Index: &d.Index, ID: d.ID}
		if d.ID != "" {
			tc.Type = "function"
		}
		tc.Function.Name, tc.Function.Arguments = d.Name, d.Arguments
		wire.Choices = []simChunkChoice{{Delta: simDelta{ToolCalls: []simWireToolCall{tc}}}}
		st.chunk.Choices = []ChunkChoice{{ToolCalls: []ToolCallDelta{d}}}
	case st.step <= n:
		tok := st.toks[st.step-1]
		wire.Choices = []simChunkChoice{{Delta: simDelta{Content: &tok}}}
		st.chunk.Choices = []ChunkChoice{{Content: tok}}
	case st.step == n+1:
		fr := finishReason(st.truncated)
		if st.tools != nil {
			fr = "tool_calls"
		}
		wire.Choices = []simChunkChoice{{FinishReason: &fr}}
		st.chunk.Choices = []ChunkChoice{{FinishReason: fr}}
	default:
		u := Usage{PromptTokens: promptTokens(st.call.Messages), CompletionTokens: n}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		wire.Choices = []simChunkChoice{}
		wire.Usage, _ = json.Marshal(u)
		st.chunk.Usage = &u
	}
	st.step++
	b, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	st.chunk.JSON = b
	return &st.chunk, nil
}

func (st *simStream) Close() error { return nil }
