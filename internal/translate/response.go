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
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// The parts of a chat completion that translate.
type completion struct {
	ID      string `json:"id"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
					// A string of JSON per OpenAI; some servers send the object itself.
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string          `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"` // vLLM: the stop string (or token id) that ended the answer
	} `json:"choices"`
	Usage *upstreamUsage  `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type upstreamUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
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
// model. Only choice 0 is translated. An error means the upstream's answer cannot be translated (the
// edge answers 502); its message is safe to show to the client. Without upstream usage, usage is
// estimated from the sizes of the prompt and the answer.
func ChatToMessage(completionJSON []byte, model string, info *RequestInfo) (messageJSON []byte, u Usage, err error) {
	var c completion
	if err := json.Unmarshal(completionJSON, &c); err != nil {
		return nil, Usage{}, fmt.Errorf("the upstream's answer is not a chat completion: %v", err)
	}
	if !isNull(c.Error) {
		return nil, Usage{}, fmt.Errorf("the upstream answered with an error: %s", upstreamErrorMessage(c.Error))
	}
	idx := -1
	for i, ch := range c.Choices {
		if ch.Index == 0 {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, Usage{}, errors.New("the upstream's answer has no choice")
	}
	ch := c.Choices[idx]
	m := message{ID: messageID(c.ID), Type: "message", Role: "assistant", Model: model, Content: []any{}}
	size := 0
	if ch.Message.Content != nil && *ch.Message.Content != "" {
		m.Content = append(m.Content, textBlock{Type: "text", Text: *ch.Message.Content})
		size += len(*ch.Message.Content)
	}
	for _, tc := range ch.Message.ToolCalls {
		args := []byte(tc.Function.Arguments)
		if isKind(tc.Function.Arguments, '"') {
			var s string
			if json.Unmarshal(tc.Function.Arguments, &s) != nil {
				return nil, Usage{}, fmt.Errorf("%w: the arguments of tool %q are not a JSON string", ErrInvalidToolArguments, tc.Function.Name)
			}
			args = []byte(s)
		} else if isNull(tc.Function.Arguments) {
			args = nil
		}
		if tc.Function.Name == "" {
			return nil, Usage{}, errors.New("the upstream called a tool without naming it")
		}
		input, err := toolInput(args, tc.Function.Name, ch.FinishReason == "length")
		if err != nil {
			return nil, Usage{}, err
		}
		id := tc.ID
		if id == "" {
			id = toolUseID()
		}
		m.Content = append(m.Content, toolUseBlock{Type: "tool_use", ID: id, Name: tc.Function.Name, Input: input})
		size += len(tc.Function.Name) + len(input)
	}
	reason, seq := stopReason(ch.FinishReason, matchedStop(ch.StopReason), info, len(ch.Message.ToolCalls) > 0)
	m.StopReason, m.StopSequence = &reason, seq
	if c.Usage != nil {
		u = Usage{c.Usage.PromptTokens, c.Usage.CompletionTokens}
	} else {
		u = Usage{info.InputTokensEstimate(), EstimateTokens(size)}
	}
	m.Usage = usage{u.InputTokens, u.OutputTokens}
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
