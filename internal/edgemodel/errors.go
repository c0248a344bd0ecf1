package edgemodel

import (
	"errors"
	"time"
)

// Error is a rule the caller broke. Code is one of the codes below (docs/API.md, "Errors"); Message
// is written for people and never carries secrets, SQL or internal detail. Each surface maps codes to
// its own statuses and envelope: the rules know nothing of HTTP.
type Error struct {
	Code    string
	Message string
	// RetryAfter says when a refused attempt may be made again (CodeTooManyRequests only).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Error codes.
const (
	CodeInvalidRequest   = "invalid_request"
	CodeInvalidSlug      = "invalid_slug"
	CodeReservedSlug     = "reserved_slug"
	CodeInvalidTarget    = "invalid_target"
	CodeInvalidLabel     = "invalid_label"
	CodeInvalidRetention = "invalid_retention"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeAnonymousLimit   = "anonymous_limit"
	CodeNotFound         = "not_found"
	CodeSlugTaken        = "slug_taken"
	CodeLabelTaken       = "label_taken"
	CodeKeyLimit         = "key_limit"
	CodeAuthMode         = "auth_mode"
	CodeModelNotFound    = "model_not_found"
	CodeTooManyRequests  = "too_many_requests"
	// CodeEvalRequired: a promote under a deployment's promotion gate without a passing, fresh eval of
	// the candidate (docs/API.md, "Evals"); 409.
	CodeEvalRequired = "eval_required"
	// CodeUnavailable: an svc edge process cannot confirm what a slug serves (its control plane is
	// unreachable); the edge answers 503.
	CodeUnavailable = "unavailable"
)

// CodeOf returns the code of an *Error, or "" for anything else (an internal failure).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrEdgeUnauthorized is the answer to a missing, unknown or revoked key, or a key of another endpoint.
var ErrEdgeUnauthorized = &Error{Code: CodeUnauthorized, Message: "invalid or missing API key; send it as Authorization: Bearer <API_KEY> or x-api-key"}

// ErrEdgeNotFound is the answer for a slug that serves nothing.
var ErrEdgeNotFound = &Error{Code: CodeNotFound, Message: "no endpoint is served at this address"}

// DisabledError is the not_found answer for the slug of a disabled endpoint: the caller reads what an
// unknown slug answers, while the edge counts the refused call in that endpoint's usage (docs/API.md,
// "Usage"). It unwraps to ErrEdgeNotFound, so CodeOf reads not_found.
type DisabledError struct{ Deployment *EdgeDeployment }

func (e *DisabledError) Error() string { return ErrEdgeNotFound.Error() }
func (e *DisabledError) Unwrap() error { return ErrEdgeNotFound }

// DisabledDeployment returns the disabled endpoint that err (a DisabledError) was answered for, or nil
// for any other error: an unknown, deleted or expired slug has no endpoint to count a call against.
func DisabledDeployment(err error) *EdgeDeployment {
	var e *DisabledError
	if errors.As(err, &e) {
		return e.Deployment
	}
	return nil
}
