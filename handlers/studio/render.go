package studio

import (
	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// render is the one way handlers answer: htmx gets the fragment, everyone else gets data as JSON,
// both with the same status.
func render(c echo.Context, status int, fragment templ.Component, data any) error {
	if isHTMX(c) {
		return renderHTML(c, status, fragment)
	}
	if data == nil {
		return c.NoContent(status)
	}
	return c.JSON(status, data)
}

// renderHTML writes a component as HTML (the full page, or a fragment).
func renderHTML(c echo.Context, status int, comp templ.Component) error {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	// The studio's answers hold live data; a cached copy would show stale state after a change.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return comp.Render(c.Request().Context(), w)
}
