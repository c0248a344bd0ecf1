package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/core"
)

// Codes the transport itself produces (the rest come from core).
const (
	codeBodyTooLarge     = "body_too_large"
	codeMethodNotAllowed = "method_not_allowed"
	codeInternal         = "internal"
)

// ErrorHandler writes every error of the management API in its one envelope,
// {"error": {"status", "code", "message"}}. Rule violations come from core with their code; anything
// else is logged with its cause and reported as a bare internal error, so SQL and stack traces never
// reach the client.
func ErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	body := toBody(err, c)
	if body.Status >= 500 {
		if !errors.Is(err, context.Canceled) {
			slog.Error("management API request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		}
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
		return cloudapi.ErrorBody{Status: core.StatusOf(ce.Code), Code: ce.Code, Message: ce.Message}
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
