package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/bodydeadline"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/views"
)

// Session values.
const (
	sessUser = "uid"  // identity id of the user who signed in
	sessCSRF = "csrf" // the token every POST of the sign-in form must carry
)

// authRequest is an authorization request (RFC 6749 section 4.1.1 with RFC 7636's PKCE fields). The
// sign-in form carries it in hidden fields from the GET to the POST.
type authRequest struct {
	ResponseType, ClientID, RedirectURI, Challenge, ChallengeMethod, State string
}

func readAuthRequest(get func(string) string) authRequest {
	return authRequest{
		ResponseType: get("response_type"), ClientID: get("client_id"), RedirectURI: get("redirect_uri"),
		Challenge: get("code_challenge"), ChallengeMethod: get("code_challenge_method"), State: get("state"),
	}
}

func (r authRequest) params() []views.FormParam {
	return []views.FormParam{
		{Name: "response_type", Value: r.ResponseType}, {Name: "client_id", Value: r.ClientID},
		{Name: "redirect_uri", Value: r.RedirectURI}, {Name: "code_challenge", Value: r.Challenge},
		{Name: "code_challenge_method", Value: r.ChallengeMethod}, {Name: "state", Value: r.State},
	}
}

// clientProblem checks what must hold before anything may be sent to redirect_uri (RFC 6749 section
// 4.1.2.1): a known client and, for the CLI, a loopback redirect (RFC 8252 section 7.3), so that a
// code can only ever reach a program on the user's own machine.
func (r authRequest) clientProblem() string {
	if r.ClientID != cloudapi.CLIClientID {
		return fmt.Sprintf("Unknown client_id %q: this server signs in the svc CLI (client_id %s) only.", r.ClientID, cloudapi.CLIClientID)
	}
	if !loopbackRedirect(r.RedirectURI) {
		return fmt.Sprintf("The redirect_uri %q is not allowed: the svc CLI must receive the answer on this computer, at http://127.0.0.1:<port>/… or http://localhost:<port>/….", r.RedirectURI)
	}
	return ""
}

// loopbackRedirect accepts http://127.0.0.1:<port>/…, http://[::1]:<port>/… and
// http://localhost:<port>/…, with any port (the CLI listens on a free one).
func loopbackRedirect(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" {
		return false
	}
	return host == "127.0.0.1" || host == "::1" || host == "localhost"
}

// requestError checks the rest of the request; its errors go back to the (valid) redirect URI as
// error and error_description, where the CLI shows them.
func (r authRequest) requestError() (code, description string) {
	switch {
	case r.ResponseType != "code":
		return "unsupported_response_type", "response_type must be code"
	case r.Challenge == "":
		return "invalid_request", "code_challenge is required (PKCE)"
	case r.ChallengeMethod != "S256":
		return "invalid_request", "code_challenge_method must be S256"
	case !pkceValue(r.Challenge):
		return "invalid_request", "code_challenge must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~"
	}
	return "", ""
}

// pkceValue checks the syntax RFC 7636 gives code verifiers, which S256 challenges also satisfy.
func pkceValue(s string) bool {
	if len(s) < 43 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			return false
		}
	}
	return true
}

// redirectTo sends the browser back to the CLI with the given parameters added to redirect_uri.
func redirectTo(c echo.Context, redirectURI string, params url.Values) error {
	u, _ := url.Parse(redirectURI) // checked by clientProblem
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Redirect(http.StatusSeeOther, u.String())
}

func (h *Handler) redirectError(c echo.Context, r authRequest, code, description string) error {
	p := url.Values{"error": {code}, "error_description": {description}}
	if r.State != "" {
		p.Set("state", r.State)
	}
	return redirectTo(c, r.RedirectURI, p)
}

// session returns the sign-in session, a fresh one when the cookie is missing or was not made with
// this server's key.
func (h *Handler) session(c echo.Context) *sessions.Session {
	s, err := h.sessions.Get(c.Request(), sessionName)
	if err != nil {
		s, _ = h.sessions.New(c.Request(), sessionName)
		s.Values = map[any]any{}
	}
	if tok, _ := s.Values[sessCSRF].(string); tok == "" {
		s.Values[sessCSRF] = randomString(32)
	}
	return s
}

// page is the sign-in page for r in session s, with the CSRF token of s.
func (h *Handler) page(c echo.Context, s *sessions.Session, r authRequest) views.SignIn {
	p := views.SignIn{Params: r.params(), CSRFToken: s.Values[sessCSRF].(string), Client: "The svc CLI on this computer"}
	if u, err := url.Parse(r.RedirectURI); err == nil && u.Port() != "" {
		p.Client += " (port " + u.Port() + ")"
	}
	if uid, _ := s.Values[sessUser].(string); uid != "" {
		email, err := h.svc.IdentityEmail(c.Request().Context(), uid)
		if err == nil && email != "" {
			p.SignedInAs = email
		} else {
			delete(s.Values, sessUser) // the user is gone (or the database was replaced)
		}
	}
	return p
}

// authorizeForm is GET /oauth/authorize: the sign-in page.
func (h *Handler) authorizeForm(c echo.Context) error {
	r := readAuthRequest(c.QueryParam)
	if problem := r.clientProblem(); problem != "" {
		return render(c, http.StatusBadRequest, views.SignIn{Problem: problem})
	}
	if code, desc := r.requestError(); code != "" {
		return h.redirectError(c, r, code, desc)
	}
	s := h.session(c)
	p := h.page(c, s, r)
	if err := s.Save(c.Request(), c.Response()); err != nil {
		return err
	}
	return render(c, http.StatusOK, p)
}

// authorizeSubmit is POST /oauth/authorize: check the password (or continue the session's sign-in),
// then send the browser back to the CLI with a code.
func (h *Handler) authorizeSubmit(c echo.Context) error {
	req := c.Request()
	if err := req.ParseForm(); err != nil {
		if bodydeadline.Exceeded(err) {
			c.Response().Header().Set("Connection", "close") // the rest of the body is still on its way
			// The failed read cancelled the request's context; the client is still there to read this.
			c.SetRequest(req.WithContext(context.WithoutCancel(req.Context())))
			return render(c, http.StatusRequestTimeout, views.SignIn{Problem: "The form did not arrive in time. Please sign in again."})
		}
		return render(c, http.StatusBadRequest, views.SignIn{Problem: "The form could not be read. Please sign in again."})
	}
	r := readAuthRequest(req.PostFormValue)
	if problem := r.clientProblem(); problem != "" {
		return render(c, http.StatusBadRequest, views.SignIn{Problem: problem})
	}
	if code, desc := r.requestError(); code != "" {
		return h.redirectError(c, r, code, desc)
	}
	s := h.session(c)
	// The token lives in the session cookie, which another site's form cannot read, so a form posted
	// from elsewhere (login CSRF) fails here.
	sent := req.PostFormValue("csrf_token")
	if subtle.ConstantTimeCompare([]byte(sent), []byte(s.Values[sessCSRF].(string))) != 1 {
		p := h.page(c, s, r)
		p.Error = "This form has expired. Please sign in again."
		if err := s.Save(req, c.Response()); err != nil {
			return err
		}
		return render(c, http.StatusForbidden, p)
	}

	var identityID string
	if uid, _ := s.Values[sessUser].(string); req.PostFormValue("continue") != "" && uid != "" {
		identityID = uid
	} else {
		email := req.PostFormValue("email")
		id, err := h.svc.SignIn(req.Context(), h.ip.Key(req), email, req.PostFormValue("password"))
		var limited *edgemodel.Error
		switch {
		case errors.As(err, &limited) && limited.Code == edgemodel.CodeTooManyRequests:
			h.log.Warn("sign-in refused: too many failures", "email", core.NormalizeEmail(email), "remote", h.ip.String(req))
			secs := int(limited.RetryAfter.Seconds())
			c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
			p := h.page(c, s, r)
			p.Email, p.Error = email, fmt.Sprintf("Too many failed sign-in attempts. Try again in %d seconds.", secs)
			return render(c, http.StatusTooManyRequests, p)
		case errors.Is(err, core.ErrBadCredentials):
			h.log.Warn("sign-in failed", "email", core.NormalizeEmail(email), "remote", h.ip.String(req))
			p := h.page(c, s, r)
			p.Email, p.Error = email, "Wrong email or password."
			return render(c, http.StatusUnauthorized, p)
		case err != nil:
			return err
		}
		identityID = id
	}
	// A new CSRF token after sign-in, so that a token seen before it is worth nothing after.
	s.Values[sessUser] = identityID
	s.Values[sessCSRF] = randomString(32)
	if err := s.Save(req, c.Response()); err != nil {
		return err
	}
	code, err := h.codes.issue(req.Context(), grant{identityID: identityID, clientID: r.ClientID, redirectURI: r.RedirectURI, challenge: r.Challenge})
	if err != nil {
		return err
	}
	p := url.Values{"code": {code}}
	if r.State != "" {
		p.Set("state", r.State)
	}
	return redirectTo(c, r.RedirectURI, p)
}
