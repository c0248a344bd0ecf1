// Package oauth is the OAuth 2.0 authorization server of `svc server` for the svc CLI
// (docs/ARCHITECTURE.md, "Sign-in"): a sign-in page, authorization codes with PKCE for loopback
// redirects, and the token endpoint.
package oauth

import (
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/internal/clientip"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/static"
	"github.com/svcdev/svc/views"
)

// codeLifetime bounds how long an authorization code can be traded: the CLI trades it at once.
const codeLifetime = 60 * time.Second

// sessionLifetime is how long the sign-in page remembers who signed in, so that a second
// `svc login` in that browser needs a click, not the password.
const sessionLifetime = 7 * 24 * time.Hour

const (
	sessionName   = "svc_signin"
	stylesheetURL = "/oauth/app.css"
)

// Options configure the authorization server.
type Options struct {
	Service *core.Service
	// BaseURL is the server's public base URL; an https one makes the session cookie Secure.
	BaseURL string
	// SessionKey signs and encrypts the session cookie (64 bytes, see SessionKey).
	SessionKey []byte
	Logger     *slog.Logger
	// ClientIP decides the client address that sign-in limits count against (nil trusts no proxy).
	ClientIP *clientip.Resolver
	// Now is the clock of code expiry; time.Now when nil.
	Now func() time.Time
}

// Handler serves the /oauth routes.
type Handler struct {
	svc      *core.Service
	sessions *sessions.CookieStore
	codes    *codeStore
	log      *slog.Logger
	ip       *clientip.Resolver
}

// New returns the authorization server.
func New(o Options) *Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	store := sessions.NewCookieStore(o.SessionKey[:32], o.SessionKey[32:])
	store.Options = &sessions.Options{
		Path:     "/oauth",
		MaxAge:   int(sessionLifetime.Seconds()),
		HttpOnly: true,
		Secure:   strings.HasPrefix(strings.ToLower(o.BaseURL), "https://"),
		SameSite: http.SameSiteLaxMode,
	}
	return &Handler{svc: o.Service, sessions: store, codes: &codeStore{svc: o.Service, now: o.Now}, log: o.Logger, ip: o.ClientIP}
}

// Register mounts the routes of the authorization server on e: the one route table of this surface.
func (h *Handler) Register(e *echo.Echo) {
	e.GET("/oauth/authorize", h.authorizeForm)
	e.POST("/oauth/authorize", h.authorizeSubmit)
	e.POST("/oauth/token", h.token)
	e.GET(stylesheetURL, h.stylesheet)
}

// render writes the sign-in page. It must never be framed (clickjacking a password form) nor cached
// (it carries the CSRF token).
func render(c echo.Context, status int, p views.SignIn) error {
	p.StylesheetURL = stylesheetURL
	hdr := c.Response().Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Content-Security-Policy", "frame-ancestors 'none'")
	hdr.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return views.SignInPage(p).Render(c.Request().Context(), c.Response())
}

// stylesheet serves the studio's stylesheet, so that the sign-in page looks like the studio.
func (h *Handler) stylesheet(c echo.Context) error {
	css, err := fs.ReadFile(static.FS, "app.css")
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=3600")
	return c.Blob(http.StatusOK, "text/css; charset=utf-8", css)
}
