package studio

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/internal/bodydeadline"
)

// maxBody bounds request bodies: the studio's bodies are a few fields.
const maxBody = 64 << 10

// sentJSON reports whether the request body is JSON (programmatic callers) rather than the form
// encoding htmx uses.
func sentJSON(c echo.Context) bool {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	return mt == echo.MIMEApplicationJSON
}

// decodeJSON reads a JSON body into v, refusing unknown fields so typos are reported, not ignored.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Message: "The request body is too large."}
		}
		if bodydeadline.Exceeded(err) {
			return bodyTimeout
		}
		if errors.Is(err, io.EOF) {
			return badRequest("invalid_request", "The request body is empty; send a JSON object.")
		}
		return badRequest("invalid_request", "The request body is not valid JSON: "+err.Error())
	}
	return nil
}

// bodyTimeout answers a body that did not arrive within the listener's body deadline.
var bodyTimeout = &apiError{Status: http.StatusRequestTimeout, Code: "request_timeout", Message: "The request body did not arrive in time; send it at once."}

// readForm parses a form body before the handler runs, bounded like a JSON body, so that a body that
// is too large, too slow or malformed is refused as such rather than read as empty fields.
func readForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
		if r.Body == nil || r.Body == http.NoBody || mt != echo.MIMEApplicationForm {
			return next(c)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBody)
		if err := r.ParseForm(); err != nil {
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Message: "The request body is too large."}
			case bodydeadline.Exceeded(err):
				return bodyTimeout
			}
			return badRequest("invalid_request", "The request body is not a valid form.")
		}
		return next(c)
	}
}

// formValue reads one field of a form body (parsed by readForm) or of the query.
func formValue(c echo.Context, name string) string {
	r := c.Request()
	if r.Form == nil {
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBody)
	}
	return r.FormValue(name)
}
