// Package bodydeadline gives request bodies a time limit to arrive, without limiting the answer: the
// guard of every svc listener against clients that drip a body (docs/ARCHITECTURE.md, "Limits of the
// listener").
package bodydeadline

import (
	"io"
	"net/http"
	"time"
)

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
