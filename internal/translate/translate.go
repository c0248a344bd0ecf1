// Package translate converts Anthropic Messages API requests and answers to and from OpenAI chat completions.
//
// The edge serves POST /v1/messages for models whose upstream only speaks chat completions: it turns
// the request into a chat completions body with MessagesToChat, and the upstream's answer back into
// an Anthropic message (ChatToMessage) or Anthropic stream events (Stream). Bytes in, bytes out: no
// I/O, no HTTP. A field or block that cannot be translated is an *Error naming it, never silently
// dropped.
package translate

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// Error is a request that cannot be translated: Param names the field (e.g.
// "messages[2].content[0].type", "thinking", "tools[1].type"), Message says what is wrong and what is
// allowed. Message starts with Param, so it reads on its own in an error envelope that has no param
// field (Anthropic's). It never quotes request content beyond field names and type names.
type Error struct{ Param, Message string }

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

// Usage counts tokens the Anthropic way.
type Usage struct{ InputTokens, OutputTokens int }

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
