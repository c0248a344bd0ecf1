package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

// Codes the transport itself produces (the rest come from core).
const (
	codeBodyTooLarge     = "body_too_large"
	codeMethodNotAllowed = "method_not_allowed"
	codeRequestTimeout   = "request_timeout"
	codeInternal         = "internal"
)

// statusOf maps an error code to the HTTP status of this API (docs/API.md, "Errors").
func statusOf(code string) int {
	switch code {
	case core.CodeInvalidRequest, core.CodeInvalidSlug, core.CodeReservedSlug, core.CodeInvalidTarget, core.CodeInvalidLabel, core.CodeInvalidRetention:
		return http.StatusBadRequest
	case core.CodeUnauthorized:
		return http.StatusUnauthorized
	case core.CodeForbidden, core.CodeAnonymousLimit:
		return http.StatusForbidden
	case core.CodeNotFound, core.CodeModelNotFound:
		return http.StatusNotFound
	case core.CodeSlugTaken, core.CodeLabelTaken, core.CodeKeyLimit, core.CodeAuthMode:
		return http.StatusConflict
	case core.CodeTooManyRequests:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// errorBody is the envelope content of a core rule violation.
func errorBody(e *core.Error) cloudapi.ErrorBody {
	return cloudapi.ErrorBody{Status: statusOf(e.Code), Code: e.Code, Message: e.Message}
}

// Envelope is the body of an error of this API: {"error": {"status", "code", "message"}} and a newline.
func Envelope(status int, code, message string) []byte {
	b, _ := json.Marshal(map[string]cloudapi.ErrorBody{"error": {Status: status, Code: code, Message: message}})
	return append(b, '\n')
}

// WriteError writes an error in this API's envelope outside Echo (the listener's own guards).
func WriteError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(Envelope(status, code, message))
}

// ErrorHandler writes every error of the management API in its one envelope,
// {"error": {"status", "code", "message"}}. Rule violations come from core with their code; anything
// else is logged with its cause and reported as a bare internal error, so SQL and stack traces never
// reach the client.
func (h *Handler) ErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	body := toBody(err, c)
	if body.Status >= 500 && !errors.Is(err, context.Canceled) {
		h.log.Error("management API request failed", "method", c.Request().Method, "route", c.Path(), "err", err)
	}
	var ce *core.Error
	if errors.As(err, &ce) && ce.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(ce.RetryAfter.Seconds())))
	}
	if body.Status == http.StatusRequestTimeout {
		// The rest of the body is still on its way: the connection cannot carry another request.
		c.Response().Header().Set("Connection", "close")
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(body.Status)
		return
	}
	_ = c.JSON(body.Status, map[string]cloudapi.ErrorBody{"error": body})
}

func toBody(err error, c echo.Context) cloudapi.ErrorBody {
	var ce *core.Error
	if errors.As(err, &ce) {
		return errorBody(ce)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return cloudapi.ErrorBody{Status: http.StatusRequestTimeout, Code: codeRequestTimeout, Message: "the request body did not arrive in time; send it at once"}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return cloudapi.ErrorBody{Status: 404, Code: core.CodeNotFound, Message: "no such route: " + c.Request().Method + " " + c.Request().URL.Path}
		case http.StatusMethodNotAllowed:
			return cloudapi.ErrorBody{Status: 405, Code: codeMethodNotAllowed, Message: "method " + c.Request().Method + " is not allowed on " + c.Request().URL.Path}
		case http.StatusRequestEntityTooLarge:
			return cloudapi.ErrorBody{Status: 413, Code: codeBodyTooLarge, Message: "request body is larger than the 1 MiB limit"}
		}
		if he.Code < 500 {
			msg, _ := he.Message.(string)
			if msg == "" {
				msg = http.StatusText(he.Code)
			}
			return cloudapi.ErrorBody{Status: he.Code, Code: core.CodeInvalidRequest, Message: msg}
		}
	}
	return cloudapi.ErrorBody{Status: 500, Code: codeInternal, Message: "internal error; the server log has the details"}
}
