package cli

import (
	"errors"
	"net"
	"strconv"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/sentence"
)

// shownError is an error as the CLI words it for the person at the terminal. Unwrap keeps the
// original, so that ExitCode and errors.As still see a *cloudapi.Error or a *UsageError.
type shownError struct {
	msg string
	err error
}

func (e *shownError) Error() string { return e.msg }
func (e *shownError) Unwrap() error { return e.err }

// present words err for people. The cloud keeps its precise wording; the CLI shows it as a sentence
// (internal/sentence) followed by its code and status, which scripts may look for: `Slug "www" is
// reserved; choose another name. (reserved_slug, HTTP 400)`. A server that cannot be reached is said
// so, with its URL, instead of Go's dial error.
func (c *cli) present(err error) error {
	if err == nil {
		return nil
	}
	var ce *cloudapi.Error
	if errors.As(err, &ce) {
		return &shownError{msg: sentence.From(ce.Message) + " (" + ce.Code + ", HTTP " + strconv.Itoa(ce.Status) + ")", err: err}
	}
	server := "the svc server"
	if c.api != "" {
		server += " at " + c.api
	}
	var oe *net.OpError
	var de *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &de), errors.As(err, &oe) && oe.Op == "dial":
		return &shownError{msg: "Cannot reach " + server + ". Is the server running? " +
			"(svc dev starts one; --api or SVC_API names another.)", err: err}
	case errors.As(err, &ne) && ne.Timeout():
		return &shownError{msg: "T" + server[1:] + " did not answer in time.", err: err}
	}
	return err
}
