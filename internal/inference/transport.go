package inference

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/fleet"
)

// The transport to OpenAI-compatible upstreams: one tuned HTTP transport per model, the POST of every
// inference call (with the adapter reload and retry of openai.go's adapters, and the Svc-Hop header that stops
// loops, below), and the end of a stream's answer read so that its connection is reused.

// maxUpstreamBody caps a non-streamed upstream answer held in memory; maxErrorBody an error answer.
const (
	maxUpstreamBody = 64 << 20
	maxErrorBody    = 1 << 20
)

// newTransport returns the transport of one model's upstream. Many concurrent requests to one upstream
// host reuse keep-alive connections instead of paying a TCP handshake each (the default keeps only 2
// idle connections per host).
func newTransport(responseTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // the upstream is addressed directly, whatever HTTP_PROXY says
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: responseTimeout,
		ExpectContinueTimeout: time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		// Token streams are small and already compressed poorly; gzip would only add latency and CPU.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}
}

// send posts body to path on the upstream, loading the call's adapter first when needed. When the
// upstream answers that the model does not exist (it, or a replica behind it, restarted and forgot
// the adapter), the adapter is loaded again and the request retried once. An answer that is not a 2xx
// comes back as the upstream's *Error (upstreamError), its body read and closed. A streamed call's
// answer must begin within the model's firstByteTimeoutMs (a non-streamed one's headers come with the
// whole answer, within timeoutMs), and no answer may then stay silent past idleTimeoutMs (watch, below).
func (o *openAI) send(ctx context.Context, c *Call, path string, body []byte, header http.Header, stream bool) (*http.Response, error) {
	if err := o.checkAdapter(c); err != nil {
		return nil, err
	}
	useAdapter := c.Adapter != "" && o.cfg.Lora == LoraVLLM
	var freq fleet.Request // with replicas: what the picker knows of the call
	if o.fleet != nil {
		if c.Adapter != "" {
			freq.Adapter = c.AdapterName
		}
		freq.Blocks = fleet.AppendBlocks(make([]uint64, 0, len(body)/fleet.BlockSize+1), freq.Adapter, body)
		freq.Session, freq.Opening = sessionKey(c)
	}
	retryFrom := "" // the replica that failed before answering, once the call goes elsewhere
	for attempt := 0; ; attempt++ {
		if useAdapter {
			if err := o.loadAdapter(ctx, c.AdapterName, c.Adapter); err != nil {
				return nil, err
			}
		}
		base := o.cfg.UpstreamURL
		var pick fleet.Pick
		if o.fleet != nil {
			var err error
			// A call of an adapter may be held until a slot frees on a replica (docs/LORA.md).
			if pick, err = o.fleet.PickWait(ctx, freq); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, o.noReplica()
			}
			base = pick.Replica.URL
			c.RetriedFrom = retryFrom // named only once another replica takes the call
		}
		wait := o.timeout
		if stream {
			wait = o.firstByte
		}
		w := o.watchCall(ctx, wait)
		req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, base+path, bytes.NewReader(body))
		if err != nil {
			w.stop()
			o.fleetDone(pick, fleet.Abandoned)
			return nil, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		if o.key != "" {
			req.Header.Set("Authorization", "Bearer "+o.key)
		}
		req.Header.Set(HopHeader, hops(c.Hops))
		if c.RequestID != "" {
			// vLLM (--enable-request-id-headers) and most gateways log and echo it: one id end to end.
			req.Header.Set("X-Request-Id", c.RequestID)
		}
		// The transport itself, not the client: an inference POST must not follow redirects, and the
		// client's redirect bookkeeping (a header copy per request) is measurable on the hot path.
		resp, err := o.rt.RoundTrip(req)
		if err != nil {
			if te := w.timedOut(); te != nil {
				err = te
			}
			w.stop()
			if ctx.Err() != nil {
				o.fleetDone(pick, fleet.Abandoned)
			} else if o.fleetFailed(pick, &freq, failedWhy(err)) {
				retryFrom = pick.Replica.Addr
				continue // refused, reset or timed out before any byte: once more, elsewhere
			}
			return nil, o.transportError(ctx, err)
		}
		c.UpstreamRequestID = upstreamRequestID(resp.Header)
		if o.fleet != nil {
			c.Replica = pick.Replica.Addr
		}
		if resp.StatusCode/100 == 2 {
			ub := &upstreamBody{ReadCloser: resp.Body, w: w, caller: ctx, pick: pick}
			if o.fleet != nil {
				ub.f = o.fleet.Fleet
				o.fleet.kv.remember(pick.Replica, freq, path, body, o) // the next turn's cache state, off the path
			}
			resp.Body = ub
			return resp, nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		w.stop()
		if resp.StatusCode >= 500 {
			if o.fleetFailed(pick, &freq, fmt.Sprintf("answered %d", resp.StatusCode)) {
				retryFrom = pick.Replica.Addr
				continue
			}
		} else {
			o.fleetDone(pick, fleet.OK) // a 4xx says the replica is up; it is never retried elsewhere
		}
		if useAdapter && attempt == 0 && resp.StatusCode == http.StatusNotFound && modelMissing(b) {
			if err := o.adapterMissing(ctx, c.AdapterName, c.Adapter); err != nil {
				return nil, err
			}
			continue
		}
		return nil, o.upstreamError(resp.StatusCode, resp.Header, b)
	}
}

// fleetDone tells the picker how a call ended (nothing without replicas).
func (o *openAI) fleetDone(pick fleet.Pick, outcome fleet.Outcome) {
	if o.fleet != nil {
		o.fleet.Done(pick, outcome)
	}
}

// fleetFailed ejects the replica that failed before any byte of its answer, saying why, and reports
// whether the call goes once more, to the next best replica: only the first failure of a call does.
func (o *openAI) fleetFailed(pick fleet.Pick, freq *fleet.Request, why string) bool {
	if o.fleet == nil {
		return false
	}
	o.fleet.Fail(pick, why)
	if freq.Exclude != nil {
		return false
	}
	freq.Exclude = pick.Replica
	return true
}

// failedWhy says in words why a call's replica failed before its answer's first byte (the Fleet view
// shows it; it names no address or secret).
func failedWhy(err error) string {
	if why := fleet.Unreachable(err); why != "" {
		return why
	}
	if _, ok := err.(*timeoutError); ok {
		return "sent no answer within the first-byte bound"
	}
	return "failed before its answer"
}

// readAnswer reads a non-streamed answer whole, and closes it.
func (o *openAI) readAnswer(ctx context.Context, resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		return nil, o.transportError(ctx, err)
	}
	return body, nil
}

// upstreamRequestID is the upstream's id for a request: OpenAI-style servers send x-request-id,
// Anthropic's API request-id.
func upstreamRequestID(h http.Header) string {
	id := h.Get("X-Request-Id")
	if id == "" {
		id = h.Get("Request-Id")
	}
	if len(id) > 128 {
		id = id[:128]
	}
	return id
}

// How long and how far a stream's Close reads past its last event, for the end of the HTTP answer.
const (
	drainWait  = 100 * time.Millisecond
	drainLimit = 4 << 10
)

// drain reads what follows the last event of a finished upstream stream, usually nothing but the end of
// the chunked answer, so that the transport can reuse the upstream connection: a body closed before
// its end costs the next request a new connection (a TLS handshake in production). It gives up after
// drainWait or drainLimit bytes, as a server that lingers after its last event must not hold the
// client's answer open. The caller still closes body.
func drain(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	io.CopyN(io.Discard, body, drainLimit)
	t.Stop()
}

// Loops: a model whose upstreamUrl points back at svc (an endpoint of its own, by mistake or through a
// proxy) would send each call around again until a connection cap stopped it, a run recorded each
// time. Every inference call svc sends upstream carries HopHeader: the hops it has made, each an svc
// process's id, this one's last. An edge refuses a call whose header already names it (508
// loop_detected, exchange's loop check), or that has made more than MaxHops hops, so that a call that
// comes back is answered at its second arrival. svc behind another svc installation (a chain, not a
// loop) is served as before.

// HopHeader lists the svc processes an inference call passed through, comma-separated.
const HopHeader = "Svc-Hop"

// MaxHops is how many svc processes one call may pass through.
const MaxHops = 8

// hopID is this process's id in HopHeader: random, so that two processes never share one.
var hopID = func() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}()

// hops is the HopHeader of a call sent upstream: the call's own hops (Call.Hops), then this process.
func hops(in string) string {
	if in == "" {
		return hopID
	}
	return in + ", " + hopID
}

// Loop reports whether an incoming call has already passed through this process, or through more than
// MaxHops svc processes: it came back by an upstreamUrl that points at svc.
func Loop(h http.Header) bool {
	vs := h.Values(HopHeader)
	if len(vs) == 0 {
		return false
	}
	n := 0
	for _, v := range vs {
		for id := range strings.SplitSeq(v, ",") {
			if n++; n > MaxHops || strings.TrimSpace(id) == hopID {
				return true
			}
		}
	}
	return false
}

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
