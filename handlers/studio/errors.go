package studio

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/sentence"
	"github.com/svcdev/svc/views"
)

// apiError is every error the studio answers with. Status, Code and Message are what the client
// sees; Cause is what the log sees, so internal details never reach the page.
type apiError struct {
	Status  int
	Code    string
	Message string
	Cause   error
}

func (e *apiError) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *apiError) Unwrap() error { return e.Cause }

// problem is the error as the page shows it: the message as a sentence in the studio's voice (the
// cloud's precise wording, capitalised and without Markdown), with the status and code beside it.
// JSON callers get the message as it came.
func (e *apiError) problem() views.Problem {
	return views.Problem{Status: e.Status, Code: e.Code, Message: sentence.From(e.Message)}
}

// envelope is the error body of the management API, so the studio's errors read the same.
type envelope struct {
	Error cloudapi.ErrorBody `json:"error"`
}

// badRequest is a studio-side validation failure, with the management API's code for it.
func badRequest(code, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: msg}
}

// toAPIError is the one place errors become responses. A *cloudapi.Error keeps its upstream status,
// code and message (the studio maps CloudApiError to the same status). A cloud that does not
// answer is named by its URL, so that a wrong --api or a stopped server is plain to see.
func (s *Server) toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ce *cloudapi.Error
	if errors.As(err, &ce) {
		return &apiError{Status: ce.Status, Code: ce.Code, Message: ce.Message, Cause: err}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok {
			msg = m
		}
		return &apiError{Status: he.Code, Code: httpCode(he.Code), Message: msg, Cause: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &apiError{Status: http.StatusGatewayTimeout, Code: "upstream_timeout",
			Message: "The cloud API at " + s.apiBaseURL + " did not answer in time.", Cause: err}
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		// A transport failure: the cloud never answered.
		return &apiError{Status: http.StatusBadGateway, Code: "upstream_unreachable",
			Message: "Could not reach the cloud API at " + s.apiBaseURL + ". Is the server running? " +
				"(svc dev starts one with the studio; svc studio --api names another.)", Cause: err}
	}
	// What is left are local failures, such as an unreadable credentials or state file. The user
	// is on their own machine and needs the file name to fix it, so the message is shown.
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error(), Cause: err}
}

func httpCode(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusRequestEntityTooLarge:
		return "body_too_large"
	}
	return "internal"
}

// handleError is Echo's central error handler: log, then answer in the representation asked for.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	req := c.Request()
	if errors.Is(err, context.Canceled) && req.Context().Err() != nil {
		// The browser went away; nobody is left to answer.
		return
	}
	e := s.toAPIError(err)
	attrs := []any{"method", req.Method, "path", req.URL.Path, "status", e.Status, "code", e.Code}
	if e.Cause != nil {
		attrs = append(attrs, "err", e.Cause.Error())
	}
	if e.Status >= 500 {
		s.log.Error("studio request failed", attrs...)
	} else {
		s.log.Warn("studio request refused", attrs...)
	}

	if e.Status == http.StatusRequestTimeout {
		// The rest of the body is still on its way: the connection cannot carry another request.
		c.Response().Header().Set("Connection", "close")
		// The failed read cancelled the request's context (which stops templ from rendering); the
		// client is still there to read the answer.
		c.SetRequest(req.WithContext(context.WithoutCancel(req.Context())))
	}
	if isHTMX(c) {
		err = renderHTML(c, e.Status, errorFragment(c, e))
	} else {
		err = c.JSON(e.Status, envelope{Error: cloudapi.ErrorBody{Status: e.Status, Code: e.Code, Message: e.Message}})
	}
	if err != nil {
		s.log.Warn("studio: write error response", "err", err)
	}
}

// errorFragment is where a failed htmx request shows its error. A failed action must not replace the
// view it was started from: it goes to the flash area. A view that failed to load (GET into #main)
// becomes an error view; a picker of the create form says it in its one option.
func errorFragment(c echo.Context, e *apiError) templ.Component {
	p := e.problem()
	switch {
	case e.Code == csrfCode:
		// A tab from before a restart: whatever it asked for, say so where it shows, with a Reload.
		retarget(c, "#flash", "innerHTML")
		return views.StaleTab()
	case targetID(c) == "export-result":
		return views.ErrorAlert(p) // the Export's, under its button
	case c.Request().Method != http.MethodGet:
		retarget(c, "#flash", "innerHTML")
	case targetID(c) == "main":
		return views.ErrorView(errorPage(c, p))
	case targetID(c) == "create-job" || targetID(c) == "create-model":
		return views.PickerError(p)
	}
	return views.ErrorAlert(p)
}

// listErrorTitle is the title of the list's error view.
const listErrorTitle = "The endpoints could not be loaded"

// errorPage words a view that failed to load: which view, and whether trying again can help (not for
// something that is not there).
func errorPage(c echo.Context, p views.Problem) views.ErrorPage {
	list := c.Path() == "/api/deployments"
	page := views.ErrorPage{Problem: p, Retry: p.Status != http.StatusNotFound, Back: !list}
	switch {
	case list:
		page.Title = listErrorTitle
		// The message says the create form mints credentials: offer it, not only Retry.
		page.Create = p.Code == "no_credentials"
	case c.Path() == "/api/fleet":
		page.Title = "The fleet could not be loaded"
		page.Create = p.Code == "no_credentials" // the create form mints credentials
	case p.Status == http.StatusNotFound:
		page.Title = "Endpoint not found"
	default:
		page.Title = "The endpoint could not be loaded"
	}
	return page
}
