package core

import (
	"fmt"

	"github.com/svcdev/svc/internal/edgemodel"
)

func errorf(code, format string, args ...any) error {
	return &edgemodel.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound is the generic "no such thing (in your projects)" answer. Resources of projects the
// caller is not a member of are reported the same way, so that names do not leak.
var ErrNotFound = &edgemodel.Error{Code: edgemodel.CodeNotFound, Message: "not found"}

func notFound(what string) error {
	return &edgemodel.Error{Code: edgemodel.CodeNotFound, Message: what + " not found"}
}
