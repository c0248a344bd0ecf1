package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/views"
)

// contentSecurityPolicy allows our own scripts and styles only: a label or slug that slipped past
// templ's escaping still could not run script.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// page serves the one full page, with the session cookie its download links need; app.js loads the
// view named by the hash route into it.
func (s *Server) page(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	s.setSessionCookie(c)
	return renderHTML(c, http.StatusOK, views.Layout(views.Page{CSRFToken: s.csrf}))
}
