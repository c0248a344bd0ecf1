package studio

import (
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// render is the one way handlers answer: htmx gets the fragment, everyone else gets data as JSON,
// both with the same status (see renderHTML for how htmx receives an error's status).
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
//
// An htmx request that failed (a taken slug, a refused value, an unknown endpoint, a cloud that does
// not answer) gets its error fragment with 200 and the real status in the Svc-Status header. Its page
// shows that fragment where the user looks; an error status would also make Chromium log "Failed to
// load resource" and htmx log "Response Status Error Code" in the console for what is an expected,
// handled answer, and nothing in the page reads the status. JSON callers keep the upstream status and
// envelope (docs/API.md, "Studio loopback routes").
func renderHTML(c echo.Context, status int, comp templ.Component) error {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	// The studio's answers hold live data; a cached copy would show stale state after a change.
	w.Header().Set("Cache-Control", "no-store")
	if status >= http.StatusBadRequest && isHTMX(c) {
		w.Header().Set(svcStatus, strconv.Itoa(status))
		status = http.StatusOK
	}
	w.WriteHeader(status)
	return comp.Render(c.Request().Context(), w)
}
