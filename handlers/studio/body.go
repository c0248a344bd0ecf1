package studio

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"
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
		if errors.Is(err, io.EOF) {
			return badRequest("invalid_request", "The request body is empty; send a JSON object.")
		}
		return badRequest("invalid_request", "The request body is not valid JSON: "+err.Error())
	}
	return nil
}

// formValue reads one field of a form body (or query), bounded like a JSON body.
func formValue(c echo.Context, name string) string {
	r := c.Request()
	if r.Form == nil {
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBody)
	}
	return r.FormValue(name)
}
