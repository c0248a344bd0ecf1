package core

import (
	"errors"
	"fmt"
	"time"
)

// Error is a rule the caller broke. Code is one of the codes below (docs/API.md, "Errors"); Message
// is written for people and never carries secrets, SQL or internal detail. Each surface maps codes to
// its own statuses and envelope: core knows nothing of HTTP.
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
	// CodeUnavailable: an svc edge process cannot confirm what a slug serves (its control plane is
	// unreachable); the edge answers 503.
	CodeUnavailable = "unavailable"
)

func errorf(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound is the generic "no such thing (in your projects)" answer. Resources of projects the
// caller is not a member of are reported the same way, so that names do not leak.
var ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}

func notFound(what string) error {
	return &Error{Code: CodeNotFound, Message: what + " not found"}
}

// CodeOf returns the code of a core error, or "" for anything else (an internal failure).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
