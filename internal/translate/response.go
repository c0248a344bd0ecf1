package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The Anthropic message, as the Messages API sends it.
type message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"` // textBlock and toolUseBlock values
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CacheReadInputTokens are the prompt tokens read from the upstream's prefix cache, where it said
	// (absent otherwise); input_tokens then counts the rest, as Anthropic counts them.
	CacheReadInputTokens int `json:"cache_read_input_tokens,omitempty"`
}

// messageUsage is a usage in the Messages API's terms: OpenAI's prompt tokens include the cached
// ones, Anthropic's input tokens do not.
func messageUsage(u Usage) usage {
	cached := min(max(u.CachedTokens, 0), u.InputTokens)
	return usage{InputTokens: u.InputTokens - cached, OutputTokens: u.OutputTokens, CacheReadInputTokens: cached}
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// thinkingBlock is a thinking block: the upstream's reasoning, signed by svc.
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// sign returns the signature of a thinking block's text as sent (none when display is omitted).
func (info *RequestInfo) sign(text string) string {
	if info.ThinkingOmitted {
		text = ""
	}
	return signThinking(info.secret, text)
}

// thinkingBlock returns the block that carries reasoning text.
func (info *RequestInfo) thinkingBlock(text string) thinkingBlock {
	if info.ThinkingOmitted {
		text = ""
	}
	return thinkingBlock{Type: "thinking", Thinking: text, Signature: signThinking(info.secret, text)}
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ErrInvalidToolArguments is wrapped by the errors of ChatToMessage, Stream.Chunk and Stream.Finish
// when the upstream called a tool with arguments that are not a JSON object: the answer cannot be
// given to an Anthropic client, whose tool_use input is always an object.
var ErrInvalidToolArguments = errors.New("the upstream produced invalid tool arguments")

// toolInput checks a tool call's arguments and returns them as the tool_use input object. Empty
// arguments are an empty object (servers send "" for functions without parameters). cut tells that
// the answer stopped at max_tokens, which explains arguments cut short.
func toolInput(args []byte, name string, cut bool) (json.RawMessage, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return json.RawMessage("{}"), nil
	}
	if args[0] == '{' && json.Valid(args) {
		return compact(args), nil
	}
	if cut {
		return nil, fmt.Errorf("%w: the answer reached max_tokens in the middle of the arguments of tool %q; raise max_tokens", ErrInvalidToolArguments, name)
	}
	return nil, fmt.Errorf("%w: the arguments of tool %q are not a JSON object", ErrInvalidToolArguments, name)
}

// ChatToMessage turns a chat.completion JSON answer into an Anthropic message JSON answer named
// model. Only choice 0 is translated. The upstream's reasoning becomes a first thinking block when the
// request asked for thinking. An error means the upstream's answer cannot be translated (the edge
// answers 502); its message is safe to show to the client. Without upstream usage, usage is
// estimated from the sizes of the prompt and the answer.
func ChatToMessage(completionJSON []byte, model string, info *RequestInfo) (messageJSON []byte, u Usage, err error) {
	if info == nil {
		info = &RequestInfo{}
	}
	a, err := readAnswer(completionJSON)
	if err != nil {
		return nil, Usage{}, err
	}
	m := message{ID: messageID(a.id), Type: "message", Role: "assistant", Model: model, Content: []any{}}
	size := len(a.reasoning)
	if a.reasoning != "" && info.Thinking {
		m.Content = append(m.Content, info.thinkingBlock(a.reasoning))
	}
	if a.text != "" {
		m.Content = append(m.Content, textBlock{Type: "text", Text: a.text})
		size += len(a.text)
	}
	for _, c := range a.calls {
		input, err := toolInput(c.args, c.name, a.finish == "length")
		if err != nil {
			return nil, Usage{}, err
		}
		id := c.id
		if id == "" {
			id = toolUseID()
		}
		m.Content = append(m.Content, toolUseBlock{Type: "tool_use", ID: id, Name: c.name, Input: input})
		size += len(c.name) + len(input)
	}
	reason, seq := stopReason(a.finish, a.matched, info, len(a.calls) > 0)
	m.StopReason, m.StopSequence = &reason, seq
	if a.usage != nil {
		u = *a.usage
	} else {
		u = Usage{InputTokens: info.InputTokensEstimate(), OutputTokens: EstimateTokens(size)}
	}
	m.Usage = messageUsage(u)
	out, err := json.Marshal(m)
	return out, u, err
}

// matchedStop returns the stop string of a choice's stop_reason, nil when it holds none.
func matchedStop(raw json.RawMessage) *string {
	if !isKind(raw, '"') {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return &s
}

// upstreamErrorMessage finds the message of an error object in OpenAI's or vLLM's shape.
func upstreamErrorMessage(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	if s := matchedStop(raw); s != nil {
		return *s
	}
	return "no message"
}
