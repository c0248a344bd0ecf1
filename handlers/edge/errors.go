package edge

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/inference"
)

// apiError is an error answer of the edge. Message is shown to the client and never carries the
// presented key or internal detail; cause is only logged.
type apiError struct {
	status  int
	typ     string // OpenAI error type; the Anthropic type is derived from the status
	code    string
	param   string
	message string
	cause   error

	anthropicType string   // the Anthropic error type, when an upstream named it; else derived from status
	retryAfter    string   // Retry-After to send with the answer
	upstreamID    string   // the upstream's request id, relayed
	allow         string   // the Allow header of a 405
	unsupported   []string // Messages API features refused so that clients fall back (error.details)
	upstream      bool     // the failure came from an inference upstream (counted per model)
}

func badRequest(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_request", param: param, message: msg}
}

func notFound(code, msg string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: code, message: msg}
}

func internalError(cause error) *apiError {
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal",
		message: "the endpoint failed to serve this request; try again", cause: cause}
}

// unavailable is the answer of an edge process that cannot tell what a slug serves: its control plane
// is unreachable and it holds no recent enough snapshot (docs/DEPLOY.md, "Failures").
func unavailable(cause error) *apiError {
	e := &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable", cause: cause, retryAfter: "5",
		message: "this endpoint cannot be served right now (its configuration cannot be confirmed); try again shortly"}
	var ce *edgemodel.Error
	if errors.As(cause, &ce) && ce.RetryAfter > 0 {
		e.retryAfter = strconv.Itoa(int(ce.RetryAfter.Seconds()))
	}
	return e
}

// final reports whether an error answer's status is one that sending the call again cannot change: a
// wrong key (401), a forbidden call (403), or no such endpoint, route or model (404). Such answers carry
// "X-Should-Retry: false", which the OpenAI and Anthropic SDKs (and Claude Code) obey over their own
// rule, so that a client with a wrong key stops at once instead of retrying for minutes.
func final(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound
}

// fromRuntime maps a runtime failure (an upstream error, 502, 504) to the answer relayed to the client.
func fromRuntime(err error) *apiError {
	var re *inference.Error
	if errors.As(err, &re) {
		return &apiError{status: re.Status, typ: re.Type, code: re.Code, param: re.Param, message: re.Message, cause: err,
			anthropicType: re.AnthropicType, retryAfter: re.RetryAfter, upstreamID: re.UpstreamRequestID, upstream: true}
	}
	return internalError(err)
}

// Wire formats of the edge's surfaces.
type format int

const (
	formatOpenAI format = iota
	formatAnthropic
)

// errorJSON renders an error in the surface's envelope (internal/apierr, the one place each envelope is
// built).
func errorJSON(f format, e *apiError) []byte {
	if f == formatAnthropic {
		a := apierr.Anthropic{Type: e.anthropicType, Message: e.message, Status: e.status}
		if len(e.unsupported) > 0 {
			a.Details = &apierr.AnthropicDetails{ErrorCode: "thread_unsupported_request", Unsupported: e.unsupported}
		}
		return a.JSON()
	}
	return apierr.OpenAI{Message: e.message, Type: e.typ, Code: e.code, Param: e.param}.JSON()
}
