package translate

import (
	"encoding/json"

	"github.com/svcdev/svc/internal/conv"
)

// POST /v1/messages/count_tokens on a translated model: the upstream's own count where it has a
// /tokenize endpoint (vLLM does, taking the chat form of the request), else svc's estimate.

// tokenizeRequest is vLLM's chat-form /tokenize request.
type tokenizeRequest struct {
	Model               json.RawMessage `json:"model,omitempty"`
	Messages            []conv.Message  `json:"messages"`
	Tools               []conv.Tool     `json:"tools,omitempty"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]bool `json:"chat_template_kwargs,omitempty"`
}

// CountTokens reads a count_tokens body (a Messages request; max_tokens is not required, and the
// fields that change no prompt, such as stream or temperature, are accepted) and returns the body of the equivalent /tokenize request for vLLM and svc's estimate of the
// input tokens: the text of the prompt (system, messages, tool definitions, output schema) at four
// characters a token, svc's one rule for what an upstream did not count (EstimateTokens). Images are
// not counted in the estimate. A body that MessagesToChatWith would refuse is refused the same way.
func CountTokens(body []byte, opts Options) (tokenize []byte, estimate int, err *Error) {
	t := &translator{opts: opts, counting: true}
	out, e := t.translate(body)
	if e != nil {
		return nil, 0, e
	}
	req := tokenizeRequest{Model: out.Model, Messages: out.Messages, Tools: out.Tools, AddGenerationPrompt: !out.ContinueFinalMessage,
		ChatTemplateKwargs: out.ChatTemplateKwargs}
	tokenize, mErr := json.Marshal(req)
	if mErr != nil {
		return nil, 0, errorf("", "request cannot be counted: %s", mErr.Error())
	}
	return tokenize, EstimateTokens(t.info.PromptChars), nil
}

// ResponsesCountTokens is CountTokens for a Responses request (POST /v1/responses/input_tokens, the
// openai package's responses.inputTokens.count): the body of the equivalent /tokenize request and svc's
// estimate, from the chat request the body translates to. A body ResponsesToChat would refuse is
// refused the same way.
func ResponsesCountTokens(body []byte, opts Options) (tokenize []byte, estimate int, err *Error) {
	out, info, e := responsesRequest(body, opts)
	if e != nil {
		return nil, 0, e
	}
	req := tokenizeRequest{Model: out.Model, Messages: out.Messages, Tools: out.Tools, AddGenerationPrompt: true,
		ChatTemplateKwargs: out.ChatTemplateKwargs}
	tokenize, mErr := json.Marshal(req)
	if mErr != nil {
		return nil, 0, errorf("", "request cannot be counted: %s", mErr.Error())
	}
	return tokenize, info.InputTokensEstimate(), nil
}
