package cloudapi

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// CodeMissingState is the error code of a project call made without a project scope. The studio
// uses the same code, so callers can test for it whichever side produced it.
const CodeMissingState = "missing_state"

// Codes of the API's envelope that callers may want to test for (docs/API.md, "Errors").
const (
	CodeInternal        = "internal"
	CodeTooManyRequests = "too_many_requests"
	CodeAnonymousLimit  = "anonymous_limit"
)

// maxErrorBody bounds how much of an error answer is read: envelopes are small, and a proxy's
// HTML error page is not worth more.
const maxErrorBody = 64 << 10

// maxSnippet bounds how much of a non-envelope body is quoted in a message.
const maxSnippet = 200

// Error is every non-2xx answer of the management API (the CloudApiError of the studio). Status is the HTTP
// status, Code the machine-readable code of the envelope, Message the text meant for people.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the server's Retry-After on a 429 too_many_requests (0 when it sent none).
	RetryAfter time.Duration
}

// Error reads "<message> (<code>, HTTP <status>)", the form the CLI prints after "error: ".
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// decodeError turns a non-2xx answer into *Error. It never fails: a body that is not the envelope
// still yields an *Error with the HTTP status, so callers can always branch on Status and Code.
func decodeError(resp *http.Response) *Error {
	e := decodeErrorBody(resp)
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}

func decodeErrorBody(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env struct {
		Error *ErrorBody `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error != nil && (env.Error.Code != "" || env.Error.Message != "") {
		e := &Error{Status: env.Error.Status, Code: env.Error.Code, Message: env.Error.Message}
		// The HTTP status is the truth the studio maps back to; the envelope's copy is informative.
		e.Status = resp.StatusCode
		if e.Code == "" {
			e.Code = httpCode(resp.StatusCode)
		}
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return e
	}
	return &Error{
		Status:  resp.StatusCode,
		Code:    httpCode(resp.StatusCode),
		Message: describeBody(resp, raw),
	}
}

// httpCode is the code given to an answer that carried no envelope (a proxy, a load balancer, a
// server that is not svc).
func httpCode(status int) string {
	return fmt.Sprintf("http_%d", status)
}

// describeBody says what came back without dumping it: an HTML page is named as such, short text
// is quoted, the rest is summarised by type and size.
func describeBody(resp *http.Response, raw []byte) string {
	where := resp.Request.Method + " " + resp.Request.URL.Path
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	ct := contentType(resp)
	text := strings.TrimSpace(string(raw))
	switch {
	case text == "":
		return fmt.Sprintf("%s answered %s with an empty body", where, status)
	case ct == "text/html" || strings.HasPrefix(strings.ToLower(text), "<!doctype html") || strings.HasPrefix(strings.ToLower(text), "<html"):
		return fmt.Sprintf("%s answered %s with an HTML page (%d bytes); is the base URL an svc server?", where, status, len(raw))
	case !utf8.ValidString(text):
		return fmt.Sprintf("%s answered %s with %d bytes of %s", where, status, len(raw), ct)
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > maxSnippet {
		// Cut on a rune boundary so the message stays valid UTF-8.
		cut := maxSnippet
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return fmt.Sprintf("%s answered %s: %s", where, status, text)
}

func contentType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return "no content type"
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	return ct
}
