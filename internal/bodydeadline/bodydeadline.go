// Package bodydeadline gives request bodies a time limit to arrive, without limiting the answer: the
// guard of every svc listener against clients that drip a body (docs/ARCHITECTURE.md, "Limits of the
// listener").
package bodydeadline

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// Exceeded reports whether a body read failed because the body did not arrive in time. Every surface
// answers it with 408 in its own error shape and "Connection: close" (the rest of the body is still on
// its way, so the connection cannot carry another request); the client is still there, so it is never
// recorded as a client that went away.
func Exceeded(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// Message is what the 408 says, on every surface.
const Message = "the request body did not arrive in time; send it at once"

// Wrap gives every request body `d` to arrive in full. The deadline is a read deadline on the
// connection, set when the request comes in and cleared as soon as the body has been read, so it cuts
// a client that drips its body but never an answer that streams for minutes afterwards (writes have
// no deadline). Requests without a body are left alone.
func Wrap(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				// On a copy of the request: net/http judges what is left of an unread body by the
				// request it handed over (answering at once, without draining 256 KiB of it, a body
				// too large to keep the connection for, and closing gently after), which it can only
				// do while that request's Body is its own.
				r = r.WithContext(r.Context())
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
