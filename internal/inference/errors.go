package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Error is a failure to relay to the client with its status: an upstream that answered with an error,
// could not be reached (502) or took too long (504), or sent what cannot be relayed (502).
type Error struct {
	Status  int
	Type    string // OpenAI error type, e.g. "invalid_request_error", "api_error"
	Code    string
	Param   string
	Message string
	// AnthropicType is the upstream's own error type when it answered in Anthropic's envelope
	// ({"type":"error","error":{"type","message"}}): Messages clients get it as it came.
	AnthropicType string
	// RetryAfter and UpstreamRequestID are the upstream's Retry-After and request id headers, relayed.
	RetryAfter        string
	UpstreamRequestID string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Error codes of failures that the runtime itself detects.
const (
	CodeUpstreamUnavailable = "upstream_unavailable"
	CodeUpstreamTimeout     = "upstream_timeout"
	CodeUpstreamError       = "upstream_error"
	CodeUpstreamAuth        = "upstream_auth_failed"
)

// transportError maps a failed round trip: cancelled by the client (passed through, nobody to answer),
// timed out (504) or unreachable (502). The message names the model, not the upstream's address.
func (o *openAI) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var te *timeoutError
	if errors.As(err, &te) {
		return &Error{Status: http.StatusGatewayTimeout, Type: "api_error", Code: CodeUpstreamTimeout,
			Message: fmt.Sprintf("the upstream serving %q timed out: %s", o.cfg.Name, te.what)}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Status: http.StatusGatewayTimeout, Type: "api_error", Code: CodeUpstreamTimeout,
			Message: fmt.Sprintf("the upstream serving %q did not answer in time", o.cfg.Name)}
	}
	return &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamUnavailable,
		Message: fmt.Sprintf("the upstream serving %q could not be reached", o.cfg.Name)}
}

// badAnswer is the 502 of an upstream that answered with what cannot be relayed: what says what it did
// ("ended the stream early", "sent an invalid event").
func (o *openAI) badAnswer(what string) *Error {
	return &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamError,
		Message: fmt.Sprintf("the upstream serving %q %s", o.cfg.Name, what)}
}

// upstreamError is the one place that decides how an upstream's error reaches the client, for every
// surface, passed through or not: an error answer (with its status and headers) or an error event in a
// stream (status 502, no headers). It keeps the upstream's status, type, code, param and message,
// reading OpenAI's envelope ({"error": {...}}), vLLM's flat one ({"object": "error", "message": ...})
// and Anthropic's ({"type": "error", "error": {...}}), and relays Retry-After and the upstream's request
// id. An upstream that refuses svc's own credentials is the operator's problem, not the caller's: it
// becomes a 502 naming the model, never a 401 that would blame the caller's key.
func (o *openAI) upstreamError(status int, header http.Header, body []byte) *Error {
	e := &Error{Status: status, Type: errorType(status), Code: CodeUpstreamError}
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   *string         `json:"param"`
		Code    any             `json:"code"`
	}
	if json.Unmarshal(body, &env) == nil {
		anthropic := env.Type == "error" && len(env.Error) > 0 && env.Error[0] == '{'
		if len(env.Error) > 0 && env.Error[0] == '{' {
			var inner struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    any     `json:"code"`
			}
			if json.Unmarshal(env.Error, &inner) == nil {
				env.Message, env.Type, env.Param, env.Code = inner.Message, inner.Type, inner.Param, inner.Code
			}
		} else if len(env.Error) > 0 && env.Error[0] == '"' {
			json.Unmarshal(env.Error, &env.Message)
		}
		if env.Message != "" {
			e.Message = env.Message
			if anthropic && env.Type != "" {
				e.AnthropicType = env.Type
			}
		}
		// The upstream's own type when it is one of OpenAI's; vLLM sends Python class names
		// ("BadRequestError"), which mean nothing to clients. A 429 is always a rate_limit_error.
		if env.Type != "" && strings.HasSuffix(env.Type, "_error") && status != http.StatusTooManyRequests {
			e.Type = env.Type
		}
		if code, ok := env.Code.(string); ok && code != "" {
			e.Code = code
		}
		if env.Param != nil {
			e.Param = *env.Param
		}
	}
	if e.Message == "" {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 500 {
			msg = msg[:500]
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		e.Message = "upstream answered " + fmt.Sprint(status) + ": " + msg
	}
	if header != nil {
		e.RetryAfter = header.Get("Retry-After")
		e.UpstreamRequestID = upstreamRequestID(header)
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		e.Status, e.Type, e.Code, e.Param, e.AnthropicType = http.StatusBadGateway, "api_error", CodeUpstreamAuth, "", ""
		e.Message = fmt.Sprintf("the upstream serving %q refused svc's credentials (it answered %d); the operator must check the model's apiKeyEnv",
			o.cfg.Name, status)
	}
	return e
}

// errorType is OpenAI's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
