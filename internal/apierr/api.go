package apierr

import (
	"net/http"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgemodel"
)

// Codes the transport produces by itself (the others are core's).
const (
	CodeBodyTooLarge     = "body_too_large"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeRequestTimeout   = "request_timeout"
	CodeInternal         = "internal"
)

// API is an error in the envelope of the management API (docs/API.md, "Errors"), which the internal
// API of edges and the listener's own answers share:
//
//	{"error": {"status": 404, "code": "not_found", "message": "..."}}
//
// The wire type is the SDK's (cloudapi.ErrorBody), so that what svc writes is what the SDK reads.
// Message is shown to the client as it is: it never carries a credential or internal detail.
type API cloudapi.ErrorBody

// APIError is the envelope of a core rule violation: its code, with the status APIStatus gives it.
func APIError(e *edgemodel.Error) API {
	return API{Status: APIStatus(e.Code), Code: e.Code, Message: e.Message}
}

// JSON renders the envelope, with a newline.
func (e API) JSON() []byte {
	return append(marshal(struct {
		Error cloudapi.ErrorBody `json:"error"`
	}{cloudapi.ErrorBody(e)}), '\n')
}

// Write answers with the envelope and its status, outside Echo (the internal API, the listener's
// guards, the operating routes of svc edge).
func (e API) Write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.JSON())
}

// WriteAPI answers with the envelope of code, under the status APIStatus gives it.
func WriteAPI(w http.ResponseWriter, code, message string) {
	API{Status: APIStatus(code), Code: code, Message: message}.Write(w)
}

// APIStatus is the HTTP status of an error code of the management API (docs/API.md, "Errors"); codes
// it does not know are a 500.
func APIStatus(code string) int {
	switch code {
	case edgemodel.CodeInvalidRequest, edgemodel.CodeInvalidSlug, edgemodel.CodeReservedSlug, edgemodel.CodeInvalidTarget, edgemodel.CodeInvalidLabel, edgemodel.CodeInvalidRetention:
		return http.StatusBadRequest
	case edgemodel.CodeUnauthorized:
		return http.StatusUnauthorized
	case edgemodel.CodeForbidden, edgemodel.CodeAnonymousLimit:
		return http.StatusForbidden
	case edgemodel.CodeNotFound, edgemodel.CodeModelNotFound:
		return http.StatusNotFound
	case edgemodel.CodeSlugTaken, edgemodel.CodeLabelTaken, edgemodel.CodeKeyLimit, edgemodel.CodeAuthMode, edgemodel.CodeEvalRequired:
		return http.StatusConflict
	case edgemodel.CodeTooManyRequests:
		return http.StatusTooManyRequests
	case CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeRequestTimeout:
		return http.StatusRequestTimeout
	case edgemodel.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
