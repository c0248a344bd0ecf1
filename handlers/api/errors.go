package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/bodydeadline"
)

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
	var ce *edgemodel.Error
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
	if body.Status == http.StatusRequestEntityTooLarge {
		refuseBody(c, func() { _ = c.Blob(body.Status, echo.MIMEApplicationJSON, body.JSON()) })
		return
	}
	_ = c.Blob(body.Status, echo.MIMEApplicationJSON, body.JSON())
}

// toBody is the envelope of an error of the management API: core's rule violations with their
// status (apierr.APIStatus), Echo's own errors and the body deadline with theirs, anything else a bare
// internal error.
func toBody(err error, c echo.Context) apierr.API {
	var ce *edgemodel.Error
	if errors.As(err, &ce) {
		return apierr.APIError(ce)
	}
	if bodydeadline.Exceeded(err) {
		return apierr.API{Status: http.StatusRequestTimeout, Code: apierr.CodeRequestTimeout, Message: bodydeadline.Message}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return apierr.API{Status: 404, Code: edgemodel.CodeNotFound, Message: "no such route: " + c.Request().Method + " " + c.Request().URL.Path}
		case http.StatusMethodNotAllowed:
			return apierr.API{Status: 405, Code: apierr.CodeMethodNotAllowed, Message: "method " + c.Request().Method + " is not allowed on " + c.Request().URL.Path}
		case http.StatusRequestEntityTooLarge:
			return apierr.API{Status: 413, Code: apierr.CodeBodyTooLarge, Message: "request body is larger than the 1 MiB limit"}
		}
		if he.Code < 500 {
			msg, _ := he.Message.(string)
			if msg == "" {
				msg = http.StatusText(he.Code)
			}
			return apierr.API{Status: he.Code, Code: edgemodel.CodeInvalidRequest, Message: msg}
		}
	}
	return apierr.API{Status: 500, Code: apierr.CodeInternal, Message: "internal error; the server log has the details"}
}
