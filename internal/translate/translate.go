// Package translate converts Anthropic Messages and OpenAI Responses requests and answers to and from OpenAI chat completions.
//
// The edge serves POST /v1/messages and POST /v1/responses for models whose upstream only speaks chat
// completions: it turns the request into a chat completions request, handed back as its members, each
// encoded once (Chat: MessagesToChatWith, ResponsesToChat), and the upstream's answer back into the surface's answer (ChatToMessage,
// ChatToResponse) or its stream events (Stream, ResponsesStream). Both surfaces share the chat wire
// types (chat.go), the reasoning controls and thinking signatures (reasoning.go) and the stream's
// block assembler (assemble.go). Bytes in, bytes out: no I/O, no HTTP. A field or block that cannot be
// translated is an *Error naming it; a hint that changes no answer is accepted and named in
// RequestInfo.Ignored (the svc-ignored-fields header): nothing is silently dropped.
package translate

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Error is a request that cannot be translated: Param names the field (e.g.
// "messages[2].content[0].type", "thinking", "tools[1].type"), Message says what is wrong and what is
// allowed. Message starts with Param, so it reads on its own in an error envelope that has no param
// field (Anthropic's). It never quotes request content beyond field names and type names.
type Error struct {
	Param, Message string
	// Unsupported names the Messages API features the translation cannot serve in a way clients recover
	// from (a `thread`, which Anthropic's SDKs then drop, sending the history themselves): the edge
	// answers it with error.details {"error_code": "thread_unsupported_request", "unsupported": [...]}.
	Unsupported []string
	// References: the input holds item references, which the caller resolves (ItemReferences,
	// WithItems) before translating the request again; Message says they are not supported, for a
	// caller that cannot.
	References bool
}

// Error returns Message.
func (e *Error) Error() string { return e.Message }

// errorf builds an *Error whose message is prefixed with the field it names.
func errorf(param, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if param != "" {
		msg = param + ": " + msg
	}
	return &Error{Param: param, Message: msg}
}

// Options is what a translation needs beyond the request body.
type Options struct {
	// Reasoning is how the model's upstream takes reasoning controls: ReasoningEffort (the default,
	// also for ""), ReasoningChatTemplate, or ReasoningNone (the catalog entry's `reasoning`).
	Reasoning string
	// Secret keys the signatures of thinking blocks (an HMAC of their text): what svc signs in an
	// answer it verifies when the block comes back in the history. The edge passes a server secret;
	// an empty secret signs with an empty key, which only tests should do.
	Secret []byte
	// Checked, when not nil, holds the body's top-level members as the caller read them after checking
	// the body as json.Valid and strictjson.Duplicate do (the edge's one body walker, bodyFields, on
	// every body it reads): the translation opens them as they are, without splitting the body again,
	// and judges only its depth again: CheckedDepth, the deepest nesting the walker met, when the caller
	// gives it (a body within MaxDepth is then not read again), else the body's.
	Checked      map[string]json.RawMessage
	CheckedDepth int
}

// The catalog's ways of passing reasoning controls to a chat completions upstream.
const (
	// ReasoningEffort sends OpenAI's reasoning_effort (low, medium, high).
	ReasoningEffort = "reasoning_effort"
	// ReasoningChatTemplate sends chat_template_kwargs.enable_thinking (Qwen3 and other templates
	// that switch thinking on and off).
	ReasoningChatTemplate = "chat_template_kwargs"
	// ReasoningNone sends nothing: the model does not reason, or not on request.
	ReasoningNone = "none"
)

// RequestInfo is what the response side needs to know about a translated request.
type RequestInfo struct {
	// Model is the request's model, "" when it named none.
	Model string
	// Stream is the request's stream flag.
	Stream bool
	// StopSequences are the request's stop_sequences, to recognise the one the upstream stopped at.
	StopSequences []string
	// MaxTokens is the request's max_tokens.
	MaxTokens int
	// PromptChars is the number of bytes of text in the prompt (system, messages, tool definitions),
	// for a token estimate when the upstream reports no usage.
	PromptChars int
	// Ignored names what the request carried that svc accepted without effect (hints such as
	// cache_control, hosted tools it cannot run), in the order met and without duplicates, indexes
	// written as [] ("tools[].cache_control"); the edge sends them in the svc-ignored-fields header.
	Ignored []string
	// Thinking reports that the request asked for thinking (Messages: enabled or adaptive): the
	// upstream's reasoning is answered as thinking blocks. Without it, reasoning is left out of the
	// answer, as Anthropic's models give none when thinking is off.
	Thinking bool
	// ThinkingOmitted is thinking.display "omitted": thinking blocks carry a signature but no text.
	ThinkingOmitted bool

	secret []byte // Options.Secret, to sign the answer's thinking blocks
}

// IgnoredHeader is the value of the svc-ignored-fields response header: the names in Ignored,
// comma-separated ("" when none).
func (info *RequestInfo) IgnoredHeader() string {
	if info == nil {
		return ""
	}
	return strings.Join(info.Ignored, ", ")
}

// ignore records a field accepted without effect; path may hold indexes, which are written as [].
func (info *RequestInfo) ignore(path string) {
	name := unindexed(path)
	for _, n := range info.Ignored {
		if n == name {
			return
		}
	}
	info.Ignored = append(info.Ignored, name)
}

// unindexed is path with each index written as [] ("input[3].content[0]" is "input[].content[]"), the
// leftmost first as a regular expression `\[[0-9]+\]` replaces them; path itself when it has none.
func unindexed(path string) string {
	var b []byte // nil until an index is met
	last := 0
	for i := 0; i < len(path); i++ {
		if path[i] != '[' {
			continue
		}
		j := i + 1
		for j < len(path) && path[j] >= '0' && path[j] <= '9' {
			j++
		}
		if j == i+1 || j >= len(path) || path[j] != ']' {
			continue
		}
		b = append(b, path[last:i+1]...)
		last, i = j, j
	}
	if b == nil {
		return path
	}
	return string(append(b, path[last:]...))
}

// InputTokensEstimate guesses the prompt's token count from its size (about four bytes a token), for
// upstreams that report no usage.
func (info *RequestInfo) InputTokensEstimate() int {
	if info == nil {
		return 0
	}
	return EstimateTokens(info.PromptChars)
}

// EstimateTokens is svc's one rule for counting what an upstream did not count: about four bytes a
// token.
func EstimateTokens(chars int) int { return (chars + 3) / 4 }

// Usage counts tokens the Anthropic way; the details are the upstream's, when it gave them.
type Usage struct {
	InputTokens, OutputTokens int
	CachedTokens              int // of InputTokens, read from a prompt cache
	ReasoningTokens           int // of OutputTokens, spent reasoning
}

// Event is one Anthropic stream event: Name is its type ("message_start", "content_block_delta", ...)
// and Data its JSON, which carries the same name in its "type" field.
type Event struct {
	Name string
	Data []byte
}

// messageID names an Anthropic message after the chat completion it translates.
func messageID(completionID string) string {
	if completionID == "" {
		return "msg_" + randomHex(12)
	}
	return "msg_" + strings.TrimPrefix(completionID, "chatcmpl-")
}

// toolUseID names a tool call the upstream sent without an id.
func toolUseID() string { return "toolu_" + randomHex(12) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// stopReason maps a chat completion's finish_reason to an Anthropic stop_reason and stop_sequence.
// matched is the choice's stop_reason (vLLM names the stop string that ended the answer there).
// Some servers end a turn that called tools with finish_reason "stop"; Anthropic clients loop on
// "tool_use", so a turn with tool calls reports it whatever the finish_reason, unless it was cut at
// max_tokens or filtered.
func stopReason(finish string, matched *string, info *RequestInfo, toolCalls bool) (string, *string) {
	switch finish {
	case "length":
		return "max_tokens", nil
	case "content_filter":
		return "refusal", nil
	case "tool_calls", "function_call":
		return "tool_use", nil
	}
	if toolCalls {
		return "tool_use", nil
	}
	if matched != nil && info != nil {
		for _, s := range info.StopSequences {
			if s == *matched {
				seq := s
				return "stop_sequence", &seq
			}
		}
	}
	return "end_turn", nil
}
