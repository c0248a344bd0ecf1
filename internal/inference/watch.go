package inference

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/fleet"
)

// Time bounds of an upstream call after it is sent (docs/OPERATIONS.md, "Bounds"): the first byte of a
// streamed answer within the model's firstByteTimeoutMs, then no silence longer than idleTimeoutMs
// between two reads of any answer. One timer per call checks both, so that a read costs two atomic
// stores and a clock read, not a timer reset.

// Defaults of a model's firstByteTimeoutMs and idleTimeoutMs.
const (
	DefaultFirstByteTimeout = 30 * time.Second
	DefaultIdleTimeout      = 5 * time.Minute
)

// timeoutError is why a watched call was ended: it reads as a timeout (net.Error).
type timeoutError struct{ what string }

func (e *timeoutError) Error() string   { return e.what }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// watch ends one upstream call, through its context, that waits too long for its first byte or then
// stays silent too long.
type watch struct {
	ctx     context.Context // the request's: the caller's context, cancelled by the watch
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	first   time.Time // the deadline of the answer's first byte
	firstD  time.Duration
	idle    time.Duration
	started atomic.Bool  // a byte of the answer was read
	reading atomic.Int64 // when the read in progress began (UnixNano); 0 between reads
}

// watchCall starts the watch of a call sent now: its first byte is due within wait.
func (o *openAI) watchCall(ctx context.Context, wait time.Duration) *watch {
	w := &watch{firstD: wait, first: time.Now().Add(wait), idle: o.idle}
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	w.timer = time.AfterFunc(wait, w.check)
	return w
}

// check runs when the timer fires: it ends the call when a bound has passed, else sets the timer for
// when one could.
func (w *watch) check() {
	now := time.Now()
	if !w.started.Load() {
		if left := w.first.Sub(now); left > 0 {
			w.timer.Reset(left)
			return
		}
		w.cancel(&timeoutError{fmt.Sprintf("no answer within %v", w.firstD)})
		return
	}
	since := w.reading.Load()
	if since == 0 {
		w.timer.Reset(w.idle)
		return
	}
	if left := w.idle - now.Sub(time.Unix(0, since)); left > 0 {
		w.timer.Reset(left)
		return
	}
	w.cancel(&timeoutError{fmt.Sprintf("nothing sent for %v", w.idle)})
}

// timedOut is the watch's timeout once it ended the call, else nil.
func (w *watch) timedOut() *timeoutError {
	te, _ := context.Cause(w.ctx).(*timeoutError)
	return te
}

// stop ends the watch and releases its context.
func (w *watch) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// upstreamBody is the body of an upstream's 2xx answer: reads are watched, and when it is closed the
// picker of a fleet learns how the call ended. An answer cut after its headers (a reset, an end
// before the stream's last event, a bound passed) counts as a failure of its replica, as a failure
// before the headers does; it is never retried, since the caller has part of the answer.
type upstreamBody struct {
	io.ReadCloser
	w      *watch
	caller context.Context // the caller's context: its end says nothing of the replica
	f      *fleet.Fleet    // nil without replicas
	pick   fleet.Pick
	failed atomic.Bool
	closed atomic.Bool
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	b.w.reading.Store(time.Now().UnixNano())
	n, err := b.ReadCloser.Read(p)
	b.w.reading.Store(0)
	if n > 0 && !b.w.started.Load() {
		// From now on the idle bound applies: the timer, set for the first byte's deadline, is moved.
		b.w.started.Store(true)
		b.w.timer.Reset(b.w.idle)
	}
	if err != nil && err != io.EOF {
		if te := b.w.timedOut(); te != nil {
			err = te
		}
		b.fail()
	}
	return n, err
}

// fail counts the call as its replica's failure, unless the call was ended by its caller or closed.
func (b *upstreamBody) fail() {
	if b.caller.Err() == nil && !b.closed.Load() {
		b.failed.Store(true)
	}
}

func (b *upstreamBody) Close() error {
	first := !b.closed.Swap(true)
	err := b.ReadCloser.Close()
	if first {
		b.w.stop()
		switch {
		case b.f == nil:
		case b.failed.Load():
			b.f.Fail(b.pick, "cut an answer after it began")
		default:
			b.f.Done(b.pick, fleet.OK)
		}
	}
	return err
}

// replicaFailed counts a stream's answer as its replica's failure (it ended before its last event, or
// passed a bound), when its body is an upstream's.
func replicaFailed(body io.ReadCloser) {
	if b, ok := body.(*upstreamBody); ok {
		b.fail()
	}
}
