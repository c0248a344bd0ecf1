package core

import (
	"fmt"

	"github.com/svcdev/svc/internal/edgemodel"
)

// Error is a rule the caller broke (edgemodel.Error, which the data plane reads too).
type Error = edgemodel.Error

// Error codes (edgemodel's; docs/API.md, "Errors").
const (
	CodeInvalidRequest   = edgemodel.CodeInvalidRequest
	CodeInvalidSlug      = edgemodel.CodeInvalidSlug
	CodeReservedSlug     = edgemodel.CodeReservedSlug
	CodeInvalidTarget    = edgemodel.CodeInvalidTarget
	CodeInvalidLabel     = edgemodel.CodeInvalidLabel
	CodeInvalidRetention = edgemodel.CodeInvalidRetention
	CodeUnauthorized     = edgemodel.CodeUnauthorized
	CodeForbidden        = edgemodel.CodeForbidden
	CodeAnonymousLimit   = edgemodel.CodeAnonymousLimit
	CodeNotFound         = edgemodel.CodeNotFound
	CodeSlugTaken        = edgemodel.CodeSlugTaken
	CodeLabelTaken       = edgemodel.CodeLabelTaken
	CodeKeyLimit         = edgemodel.CodeKeyLimit
	CodeAuthMode         = edgemodel.CodeAuthMode
	CodeModelNotFound    = edgemodel.CodeModelNotFound
	CodeTooManyRequests  = edgemodel.CodeTooManyRequests
	CodeUnavailable      = edgemodel.CodeUnavailable
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
func CodeOf(err error) string { return edgemodel.CodeOf(err) }
