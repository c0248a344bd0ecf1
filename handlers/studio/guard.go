package studio

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// csrfHeader carries the per-launch token on API calls; csrfCode is the error of a call without the
// current one (a tab loaded before the studio restarted gets it: errorFragment offers a Reload).
const (
	csrfHeader = "X-CSRF-Token"
	csrfCode   = "csrf"
)

// requireLoopbackHost refuses requests whose Host is not a loopback name with the studio's port.
// A page on another site can make a browser send requests here through DNS rebinding (its own
// name resolving to 127.0.0.1); the Host header still names that site, so checking it stops them.
func (s *Server) requireLoopbackHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.loopbackHost(c.Request().Host) {
			return &apiError{
				Status:  http.StatusMisdirectedRequest,
				Code:    "bad_host",
				Message: "The studio answers only on localhost, 127.0.0.1 or [::1] with its own port.",
			}
		}
		return next(c)
	}
}

func (s *Server) loopbackHost(host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		// No port: only acceptable if the studio really is on port 80.
		name, port = strings.Trim(host, "[]"), "80"
	}
	switch strings.ToLower(name) {
	case "localhost", "127.0.0.1", "::1":
	default:
		return false
	}
	want := s.port.Load()
	if want == 0 {
		// Port unknown (Handler used without Serve and without Options.Port): the name check
		// alone still defeats DNS rebinding, which needs a foreign name.
		return true
	}
	p, err := strconv.Atoi(port)
	return err == nil && int64(p) == want
}

// requireCSRF demands the per-launch token. Pages of other origins cannot read it from our page,
// so they cannot forge these calls. The comparison takes constant time.
func (s *Server) requireCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		got := c.Request().Header.Get(csrfHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			return &apiError{
				Status:  http.StatusForbidden,
				Code:    csrfCode,
				Message: "Missing or wrong " + csrfHeader + " header: reload the studio page to get the current token.",
			}
		}
		return next(c)
	}
}
