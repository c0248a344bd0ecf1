package inference

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/svcdev/svc/internal/stopseq"
	"hash/fnv"
	"io"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The simulator's answers on the extra OpenAI routes (the models file's `routes`): deterministic
// embeddings of the configured dimension on /v1/embeddings, and text completions on
// /v1/completions, plain and streamed, in OpenAI's (and vLLM's) wire formats.

// RouteRuntime is implemented by runtimes that answer the extra routes themselves (the simulator);
// the edge passes those routes through to the upstream of other runtimes. body is the client's JSON
// request; served is the model name the answer carries. A refused body is an *Error (400).
type RouteRuntime interface {
	Embeddings(ctx context.Context, served string, body []byte) (*Completion, error)
	TextCompletion(ctx context.Context, served string, body []byte) (*Completion, error)
	// TextCompletionStream answers a request with stream: true; its chunks are text_completion
	// objects, the last one usage only (sent to clients that asked for it with stream_options).
	TextCompletionStream(ctx context.Context, served string, body []byte) (Stream, error)
}

var _ RouteRuntime = (*simulator)(nil)

// maxInputs bounds the inputs of one embeddings request, and the prompts of one completion, as
// OpenAI does.
const maxInputs = 2048

// inputs reads an embeddings input or a completion prompt: a string, an array of strings, an array of
// token ids or an array of arrays of token ids. Token ids are written out as their numbers.
func inputs(raw json.RawMessage, field string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest(field, "%s is required: a string or an array of strings or token ids", field)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, nil
	}
	var tokens []int64
	if json.Unmarshal(raw, &tokens) == nil && len(tokens) > 0 {
		return []string{tokensText(tokens)}, nil
	}
	var batches [][]int64
	if json.Unmarshal(raw, &batches) == nil && len(batches) > 0 {
		out := make([]string, len(batches))
		for i, b := range batches {
			if len(b) == 0 {
				return nil, badRequest(field, "%s[%d] must not be empty", field, i)
			}
			out[i] = tokensText(b)
		}
		return out, nil
	}
	return nil, badRequest(field, "%s must be a non-empty string, array of strings, array of token ids or array of arrays of token ids", field)
}

func tokensText(tokens []int64) string {
	parts := make([]string, len(tokens))
	for i, t := range tokens {
		parts[i] = strconv.FormatInt(t, 10)
	}
	return strings.Join(parts, " ")
}

func wordCount(s string) int { return max(1, len(strings.Fields(s))) }

type embeddingsRequest struct {
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// embedding returns the unit vector of text: normal values seeded by the text, so the same text gets
// the same vector, truncated to dim and scaled to length 1.
func embedding(text string, size, dim int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	rng := mrand.New(mrand.NewPCG(h.Sum64(), 0x5eed))
	v := make([]float32, dim)
	sum := 0.0
	for i := range size {
		x := rng.NormFloat64()
		if i < dim {
			v[i] = float32(x)
			sum += x * x
		}
	}
	norm := float32(math.Sqrt(sum))
	if norm == 0 {
		norm = 1
	}
	for i := range v {
		v[i] /= norm
	}
	return v
}

func (s *simulator) Embeddings(ctx context.Context, served string, body []byte) (*Completion, error) {
	var req embeddingsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badRequest("", "request body must be a JSON object")
	}
	texts, err := inputs(req.Input, "input")
	if err != nil {
		return nil, err
	}
	if len(texts) > maxInputs {
		return nil, badRequest("input", "input must hold at most %d items", maxInputs)
	}
	for i, t := range texts {
		if t == "" {
			return nil, badRequest("input", "input[%d] must not be empty", i)
		}
	}
	dim := s.cfg.EmbeddingDim
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > dim {
			return nil, badRequest("dimensions", "dimensions must be from 1 to %d for this model", dim)
		}
		dim = *req.Dimensions
	}
	format := "float"
	if req.EncodingFormat != nil {
		format = *req.EncodingFormat
		if format != "float" && format != "base64" {
			return nil, badRequest("encoding_format", "encoding_format must be float or base64")
		}
	}
	if err := sleepCtx(ctx, s.ttft); err != nil {
		return nil, err
	}
	out := &Completion{ID: "embd-" + strings.TrimPrefix(newCompletionID(), "chatcmpl-"), Created: time.Now().Unix()}
	data := make([]embeddingData, len(texts))
	for i, t := range texts {
		v := embedding(t, s.cfg.EmbeddingDim, dim)
		data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if format == "base64" {
			raw := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(raw)
		}
		out.Usage.PromptTokens += wordCount(t)
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	b, err := json.Marshal(struct {
		Object string          `json:"object"`
		Data   []embeddingData `json:"data"`
		Model  string          `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: data, Model: served, Usage: struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}{out.Usage.PromptTokens, out.Usage.TotalTokens}})
	if err != nil {
		return nil, err
	}
	out.JSON = b
	return out, nil
}

// Text completions.

type completionRequest struct {
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	N             *int            `json:"n"`
	Stop          json.RawMessage `json:"stop"`
	Echo          bool            `json:"echo"`
	Logprobs      *int            `json:"logprobs"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// textChoice is one choice of a text completion: its tokens and how it ended.
type textChoice struct {
	index  int
	prompt string
	toks   []string
	finish string
}

// textPlan reads a completion request and decides its choices: for each prompt, n choices that
// continue it (echo mode: the prompt's words again; lorem mode: seeded lorem ipsum), at most
// max_tokens tokens (16 when not given, as OpenAI), cut at a stop string.
func (s *simulator) textPlan(body []byte) (*completionRequest, []textChoice, error) {
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, badRequest("", "request body must be a JSON object with a prompt")
	}
	prompts, err := inputs(req.Prompt, "prompt")
	if err != nil {
		return nil, nil, err
	}
	if len(prompts) > maxInputs {
		return nil, nil, badRequest("prompt", "prompt must hold at most %d items", maxInputs)
	}
	limit := 16
	if req.MaxTokens != nil {
		if *req.MaxTokens < 0 {
			return nil, nil, badRequest("max_tokens", "max_tokens must not be negative")
		}
		limit = *req.MaxTokens
	}
	n := 1
	if req.N != nil {
		if *req.N < 1 || *req.N > maxChoices {
			return nil, nil, badRequest("n", "n must be an integer from 1 to %d", maxChoices)
		}
		n = *req.N
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > 5) {
		return nil, nil, badRequest("logprobs", "logprobs must be an integer from 0 to 5")
	}
	var stops []string
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if json.Unmarshal(req.Stop, &one) == nil {
			stops = []string{one}
		} else if json.Unmarshal(req.Stop, &stops) != nil || len(stops) > 4 {
			return nil, nil, badRequest("stop", "stop must be a string or an array of at most 4 strings")
		}
	}
	if len(prompts)*n > maxChoices {
		return nil, nil, badRequest("n", "prompts times n must be at most %d", maxChoices)
	}
	var out []textChoice
	for p, prompt := range prompts {
		for k := range n {
			c := &Call{Served: "completion", Messages: []Message{{Role: "user", Content: prompt}}}
			toks := wordTokens(strings.Join(s.words(c, k), " "))
			if len(toks) > 0 && prompt != "" && !strings.HasSuffix(prompt, " ") {
				toks[0] = " " + toks[0]
			}
			ch := textChoice{index: p*n + k, prompt: prompt, finish: "stop"}
			toks, _ = stopseq.Cut(toks, stops)
			if len(toks) > limit {
				toks, ch.finish = toks[:limit], "length"
			}
			ch.toks = toks
			out = append(out, ch)
		}
	}
	return &req, out, nil
}

type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func textLogprobsOf(toks []string, offset, top int) *textLogprobs {
	lp := &textLogprobs{Tokens: toks, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for i, t := range toks {
		e := logprob(t, i, top)
		lp.TokenLogprobs = append(lp.TokenLogprobs, e.Logprob)
		alts := map[string]float64{}
		for _, a := range e.TopLogprobs {
			alts[a.Token] = a.Logprob
		}
		lp.TopLogprobs = append(lp.TopLogprobs, alts)
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(t)
	}
	return lp
}

type textWireChoice struct {
	Index        int           `json:"index"`
	Text         string        `json:"text"`
	Logprobs     *textLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type textCompletion struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	SystemFingerprint string           `json:"system_fingerprint"`
	Choices           []textWireChoice `json:"choices"`
	Usage             json.RawMessage  `json:"usage,omitempty"`
}

func textCompletionID() string { return "cmpl-" + strings.TrimPrefix(newCompletionID(), "chatcmpl-") }

func (s *simulator) TextCompletion(ctx context.Context, served string, body []byte) (*Completion, error) {
	req, choices, err := s.textPlan(body)
	if err != nil {
		return nil, err
	}
	longest := 0
	for _, c := range choices {
		longest = max(longest, len(c.toks))
	}
	if err := sleepCtx(ctx, s.ttft+time.Duration(max(0, longest-1))*s.itl); err != nil {
		return nil, err
	}
	out := &Completion{ID: textCompletionID(), Created: time.Now().Unix()}
	wire := textCompletion{ID: out.ID, Object: "text_completion", Created: out.Created, Model: served, SystemFingerprint: simFingerprint}
	seen := map[string]bool{}
	for _, c := range choices {
		text := strings.Join(c.toks, "")
		offset := 0
		if req.Echo {
			text, offset = c.prompt+text, len(c.prompt)
		}
		fr := c.finish
		wc := textWireChoice{Index: c.index, Text: text, FinishReason: &fr}
		if req.Logprobs != nil {
			wc.Logprobs = textLogprobsOf(c.toks, offset, *req.Logprobs)
		}
		wire.Choices = append(wire.Choices, wc)
		out.Usage.CompletionTokens += len(c.toks)
		if !seen[c.prompt] {
			seen[c.prompt] = true
			out.Usage.PromptTokens += wordCount(c.prompt)
		}
		if c.index == 0 {
			out.Content, out.FinishReason = text, c.finish
		}
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	wire.Usage, _ = json.Marshal(out.Usage)
	b, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	out.JSON = b
	return out, nil
}

func (s *simulator) TextCompletionStream(ctx context.Context, served string, body []byte) (Stream, error) {
	req, choices, err := s.textPlan(body)
	if err != nil {
		return nil, err
	}
	st := &textStream{ctx: ctx, sim: s, served: served, id: textCompletionID(), created: time.Now().Unix(),
		includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	seen := map[string]bool{}
	per := make([][]textStep, len(choices))
	for i, c := range choices {
		if !seen[c.prompt] {
			seen[c.prompt] = true
			st.usage.PromptTokens += wordCount(c.prompt)
		}
		st.usage.CompletionTokens += len(c.toks)
		if req.Echo {
			per[i] = append(per[i], textStep{choice: c.index, text: c.prompt})
		}
		offset := 0
		for k, t := range c.toks {
			step := textStep{choice: c.index, text: t}
			if req.Logprobs != nil {
				step.lp = textLogprobsOf([]string{t}, offset, *req.Logprobs)
				step.lp.TokenLogprobs[0] = logprob(t, k, 0).Logprob
			}
			offset += len(t)
			per[i] = append(per[i], step)
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
	for _, c := range choices {
		st.steps = append(st.steps, textStep{choice: c.index, finish: c.finish})
	}
	st.usage.TotalTokens = st.usage.PromptTokens + st.usage.CompletionTokens
	return st, nil
}

type textStep struct {
	choice int
	text   string
	lp     *textLogprobs
	finish string
	tick   bool
}

// textStream emits the steps (a token of one choice, or its finish), then the usage chunk.
type textStream struct {
	ctx          context.Context
	sim          *simulator
	served       string
	id           string
	created      int64
	includeUsage bool
	steps        []textStep
	usage        Usage
	next         int
	chunk        Chunk
}

func (st *textStream) Next() (*Chunk, error) {
	if st.next > len(st.steps) {
		return nil, io.EOF
	}
	var wait time.Duration
	if st.next == 0 {
		wait = st.sim.ttft
	} else if st.next < len(st.steps) && st.steps[st.next].tick {
		wait = st.sim.itl
	}
	if err := sleepCtx(st.ctx, wait); err != nil {
		return nil, err
	}
	wire := textCompletion{ID: st.id, Object: "text_completion", Created: st.created, Model: st.served, SystemFingerprint: simFingerprint}
	if st.includeUsage {
		wire.Usage = json.RawMessage("null")
	}
	st.chunk = Chunk{ID: st.id, Created: st.created}
	if st.next < len(st.steps) {
		step := st.steps[st.next]
		wc := textWireChoice{Index: step.choice, Text: step.text, Logprobs: step.lp}
		if step.finish != "" {
			fr := step.finish
			wc.FinishReason = &fr
		}
		wire.Choices = []textWireChoice{wc}
		st.chunk.Choices = []ChunkChoice{{Index: step.choice, Content: step.text, FinishReason: step.finish}}
	} else {
		u := st.usage
		wire.Choices = []textWireChoice{}
		wire.Usage, _ = json.Marshal(u)
		st.chunk.Usage = &u
	}
	st.next++
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wire); err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	st.chunk.JSON = bytes.TrimRight(b.Bytes(), "\n")
	return &st.chunk, nil
}

func (st *textStream) Close() error { return nil }
