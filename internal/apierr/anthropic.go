package apierr

import (
	"net/http"
)

// Anthropic is an error in the envelope of Anthropic's Messages API (the edge's /v1/messages routes):
//
//	{"type": "error", "error": {"type": "invalid_request_error", "message": "...", "details": {...}}}
//
// Message is shown to the client as it is: it never carries a credential or internal detail.
type Anthropic struct {
	Type    string // Anthropic's error type; AnthropicType(status) when empty
	Message string
	Status  int // the answer's HTTP status, for the type when Type is empty
	// Details is error.details, which Anthropic's clients read to recover (an error_code such as
	// thread_unsupported_request, and what it concerns); omitted when nil.
	Details *AnthropicDetails
}

// AnthropicDetails is the error.details object of Anthropic's envelope.
type AnthropicDetails struct {
	ErrorCode   string   `json:"error_code"`
	Unsupported []string `json:"unsupported,omitempty"`
}

type anthropicBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string            `json:"type"`
		Message string            `json:"message"`
		Details *AnthropicDetails `json:"details,omitempty"`
	} `json:"error"`
}

// JSON renders the envelope.
func (e Anthropic) JSON() []byte {
	body := anthropicBody{Type: "error"}
	body.Error.Type, body.Error.Message, body.Error.Details = e.Type, e.Message, e.Details
	if body.Error.Type == "" {
		body.Error.Type = AnthropicType(e.Status)
	}
	return marshal(body)
}

// AnthropicType is the Anthropic error type of an HTTP status, as Anthropic's API answers it (its
// clients pick their exception classes by status and type).
func AnthropicType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}
