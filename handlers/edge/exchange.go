package edge

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/svcdev/svc/internal/conv"

	"go.opentelemetry.io/otel/trace"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/ratelimit"
	"github.com/svcdev/svc/internal/reqid"
	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/sse"
	"github.com/svcdev/svc/internal/tracing"
	"github.com/svcdev/svc/internal/translate"
)

// exchange is one edge request, from the moment it arrives to its answer: begun once in ServeEdge,
// finished once (ok or fail), and ended once by the deferred end, which settles its usage and records
// the run. Whatever
// path a request takes (plain, streamed, translated, passed through, refused), it goes through these
// few methods; recording, and later metrics, usage and limits, hang off end alone.
type exchange struct {
	h     *Handler
	w     http.ResponseWriter
	r     *http.Request
	f     format
	route string // the route's path, "other" when unknown (a bounded metrics label)
	start time.Time
	ttft  time.Duration // until the first event of a stream
	id    string        // the request id: the caller's X-Request-Id when sane, else a new one

	// Known once the deployment is found and the caller authorised; a request refused before that
	// (unknown slug, bad key) is not a run of anyone's deployment. key is the caller's key as the
	// lookup found it, one value: its id, limits, token budget and weight in its model's queue (the
	// zero key in none mode; a refused key's id alone).
	d   *edgemodel.EdgeDeployment
	key edgemodel.EdgeKey
	// slug is the endpoint's slug once it was found, so that a request it refuses (no route, wrong
	// method or key) is logged and counted under it; an unknown slug stays "" (unbounded labels).
	slug string
	run  bool // the route's requests are runs
	// early: the request is still being judged by its headers alone (ServeEdge), its body unread
	early bool
	// usageOnly: a refused call (refuse), counted in usage but never stored as a run with a transcript
	usageOnly bool
	// limits is what the call took of its limits (limits.go), given back or charged at the end.
	limits admitted

	model    string // the model the answer names (or the one asked for, when it could not be resolved)
	base     string // the catalog model serving it, once resolved
	reqBody  []byte
	upstream upstreamIDs
	stream   *sse.Writer
	// batch is the connection's batcher for the stream's writes (sse.BatchOf); nil for a request
	// with no client connection of its own (a replay, a shadow copy).
	batch sse.Batcher

	// runID is the run's id when the request chose it (a Responses call: its response id is the run's).
	runID string
	// streamFail, when set, writes an error after a stream's start as the surface's own event (the
	// Responses API's response.failed) instead of an error event.
	streamFail func(e *apiError)

	// How the call ended (ok, fail), and the answer as recorded.
	out outcome
	// answer assembles a streamed answer for the run, when it is kept; the run then records it, with
	// the error that cut it beside its content.
	answer inference.Answer

	// What the answer cost, settled once, in end.
	cost cost

	// The request's span when tracing is on (its span nil when off, and then nothing of it is touched).
	trace traced

	// queued: the route's calls wait for their model's turn; turn is the call's (admission.go).
	queued bool
	turn   turn

	// The canary's choice for the call (canary.go), and for a shadow copy the primary run it copies.
	canary armChoice
	copyOf string
	// For an eval's replay (replay.go), the eval and the stored run it replays.
	eval evalRef
}

// admitted is what a call took of its deployment's and key's limits (limits.go): the rate limits it
// was admitted under, its tokens charged to them at the end, and what it reserved of its token
// budgets, settled at the end.
type admitted struct {
	scopes []ratelimit.Scope
	buf    [2]ratelimit.Scope // scopes' storage
	budget ratelimit.Reservation
}

// upstreamIDs are the upstream's ids of the call: its request id, when it sent one, and the id of a
// passed-through Responses answer (the caller gets it).
type upstreamIDs struct{ request, response string }

// outcome is how a call ended: finished once (ok or fail), with the status answered, why it failed
// (cause for the log only, errCode for the run: the error's code or type) and the answer as recorded
// (the JSON sent, or the error).
type outcome struct {
	finished, failed bool
	status           int
	cause            error
	errCode          string
	response         []byte
}

// traced is the call's span when tracing is on, with the model the client asked for and why the
// answer ended, for its GenAI attributes.
type traced struct {
	span          trace.Span
	asked, finish string
}

// evalRef names an eval's replay: the eval, and the stored run it replays.
type evalRef struct{ id, of string }

// svcCopy reports whether svc made the call itself (a shadow copy, an eval's replay): no caller waits
// on it, nothing of it is a caller's.
func (x *exchange) svcCopy() bool { return x.copyOf != "" || x.eval.of != "" }

// begin starts an exchange and answers its request id at once, so that every answer carries it.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, f format) *exchange {
	x := &exchange{h: h, w: w, r: r, f: f, route: "other", start: h.now(), id: reqid.From(r.Header.Get(reqid.Header)), batch: sse.BatchOf(r)}
	w.Header().Set(reqid.Header, x.id)
	if h.tracer != nil {
		x.r, x.trace.span = h.tracer.StartServer(r, "edge") // the runtime's calls take x.r's context, and so the span
	}
	return x
}

// unhold sends what the stream's connection holds before the handler returns (sse.Writer.Unhold).
func (x *exchange) unhold() {
	if x.stream != nil {
		x.stream.Unhold()
	}
}

// streaming returns the exchange's event-stream writer; the stream starts with the first event.
func (x *exchange) streaming() *sse.Writer {
	if x.stream == nil {
		x.stream = sse.NewWriter(x.w)
		x.stream.Batch = x.batch
		x.stream.OnStart = func() { x.ttft = x.h.now().Sub(x.start) }
	}
	return x.stream
}

// relayUpstreamID passes on the upstream's own request id, before the answer's headers are sent.
func (x *exchange) relayUpstreamID(id string) {
	if id != "" && x.upstream.request == "" {
		x.upstream.request = id
		x.w.Header().Set("X-Upstream-Request-Id", id)
	}
}

// took notes that the upstream took the call (it answered, or began to): from then on the call costs at
// least its prompt.
func (x *exchange) took(call *inference.Call) { x.cost.took = call }

// read counts a chunk the upstream streamed, and keeps it in the run's assembled answer.
func (x *exchange) read(ch *inference.Chunk) {
	if ch.Usage != nil {
		x.cost.report(*ch.Usage)
	}
	if ch.Event != nil && ch.ID != "" {
		x.upstream.response = ch.ID // a passed-through Responses stream's response.created
	}
	x.cost.deltas += ch.Delivered()
	if x.trace.span != nil && ch.FinishReason() != "" {
		x.trace.finish = ch.FinishReason()
	}
	if x.answer != nil {
		x.answer.Add(ch)
	}
}

// answered counts a non-streamed answer.
func (x *exchange) answered(c *inference.Completion) {
	x.cost.report(c.Usage)
	x.cost.text += len(c.Content)
	x.trace.finish = c.FinishReason
}

// cost is what a call cost. The upstream's reported usage and what svc counted as the answer passed
// (chunks read, text answered) are gathered here whatever the path, and settled once, at the end
// (settle): a call is never free for want of usage.
type cost struct {
	took     *inference.Call // the call the upstream took, nil until it did
	sent     *inference.Call // the call sent upstream (target.call), nil until one was
	reported inference.Usage // the counts the upstream reported (0: not reported)
	deltas   int             // pieces of content streamed
	text     int             // bytes of text answered (non-streamed answers)
	usage    inference.Usage // the request's counts, settled at the end
}

// report keeps the counts an upstream reported; later reports (a Messages stream's message_delta after
// its message_start, a chat stream's final usage chunk) replace the counts they carry.
func (c *cost) report(u inference.Usage) {
	if u.PromptTokens > 0 {
		c.reported.PromptTokens = u.PromptTokens
	}
	if u.CompletionTokens > 0 {
		c.reported.CompletionTokens = u.CompletionTokens
	}
	if u.TotalTokens > 0 {
		c.reported.TotalTokens = u.TotalTokens
	}
	if u.CachedTokens > 0 {
		c.reported.CachedTokens = u.CachedTokens
	}
}

// settle decides the request's counts, once, at its end, whatever the path (relayed, translated or
// passed through, streamed or not, finished or cut): what the upstream reported, and for each count it
// did not report (none, or a malformed usage) svc's own: the prompt's text at four bytes a token, the
// completion a token per streamed delta (inference servers send a token per event) plus the answered
// text at four bytes a token. Counted figures are approximate; they are there so that no call is
// recorded, or charged to a tokens limit, as free.
func (c *cost) settle() {
	u := c.reported
	if c.took == nil {
		c.usage = u // the upstream never took the call
		return
	}
	counted := false
	if u.PromptTokens == 0 {
		u.PromptTokens, counted = translate.EstimateTokens(conv.PromptChars(c.took.Body)), true
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens, counted = c.deltas+translate.EstimateTokens(c.text), true
	}
	if counted || u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	c.usage = u
}

// ok finishes a request that was answered in full; response is what the run keeps (nil for a stream,
// whose answer assembles itself).
func (x *exchange) ok(response []byte) {
	if x.out.finished {
		return
	}
	x.out.finished, x.out.status, x.out.response = true, http.StatusOK, response
}

// fail finishes a request with an error. Before the answer has started the error is the answer, with
// its status; once a stream has started it is sent as the stream's last event, since a broken
// connection would leave the client unsure whether the answer was complete. When the client is
// gone, nothing is sent and the run says so (499, as proxies log it). A stream cut this way keeps what
// it delivered: its counts, and its assembled answer with the error beside it.
// dropBody ends a request refused by its headers while its body is still to come (unknown or disabled
// endpoint, wrong key or method, rate limit): the answer goes out with "Connection: close" and the
// connection is closed after it, unread. Without it net/http reads up to 256 KiB of the unused body,
// before the answer (to keep the connection) and again when the handler returns (closing the body),
// so a client that sent its headers and stalled waited for the listener's body deadline (60 s).
// The answer is flushed before that read; a read deadline of dropGrace ends it: a client that is
// sending its body at once (as SDKs do) gets it drained, so that closing does not reset the connection
// under an answer it has not read yet, and a stalled one is cut after dropGrace.
func (x *exchange) dropBody() {
	_ = http.NewResponseController(x.w).SetReadDeadline(time.Now().Add(dropGrace))
}

// dropGrace is how long a refused request's unused body may keep arriving after the answer (dropBody).
const dropGrace = 500 * time.Millisecond

func (x *exchange) fail(e *apiError) {
	if x.out.finished {
		return
	}
	if e != bodyTimeout && x.r.Context().Err() != nil {
		// A failed body read cancels the request's context too; the body deadline's answer still
		// reaches its client.
		e = clientClosed
	}
	x.out.finished, x.out.failed, x.out.status, x.out.cause, x.out.errCode = true, true, e.status, e.cause, e.code
	if x.out.errCode == "" {
		x.out.errCode = e.typ
	}
	x.relayUpstreamID(e.upstreamID)
	if e.upstream {
		x.h.metrics.UpstreamError(x.base, e.code)
	}
	body := errorJSON(x.f, e)
	switch {
	case e == clientClosed:
	case x.stream != nil && x.stream.Started() && x.streamFail != nil:
		x.streamFail(e)
	case x.stream != nil && x.stream.Started():
		if x.f == formatAnthropic {
			x.stream.Event(eventError, body, false)
		} else {
			x.stream.Data(body, false)
		}
	default:
		if e.retryAfter != "" {
			x.w.Header().Set("Retry-After", e.retryAfter)
		}
		if e.status == http.StatusMethodNotAllowed && e.allow != "" {
			x.w.Header().Set("Allow", e.allow)
		}
		if final(e.status) {
			x.w.Header().Set("X-Should-Retry", "false")
		}
		unread := x.early && x.r.ContentLength != 0
		if unread {
			x.w.Header().Set("Connection", "close")
		}
		writeJSON(x.w, e.status, body)
		if unread {
			x.dropBody()
		}
	}
	x.out.response = body
}

var eventError = []byte("error")

// served is the deployment as the call's arm serves it: the canary's view when a split canary answers
// the call (armChoice.serve), else the deployment itself.
func (x *exchange) served() *edgemodel.EdgeDeployment {
	if x.canary.serve != nil {
		return x.canary.serve
	}
	return x.d
}

// recording reports whether the run of this exchange will be kept, so that paths can skip assembling
// what nobody will read.
func (x *exchange) recording() bool {
	return x.run && x.d != nil && x.h.rec != nil && x.d.Retention.Records()
}

// end closes the exchange, exactly once, in five steps: it gives its model's turn to the next waiting
// call (release), settles what the call came to (settle),
// counts and logs it (observe), charges its tokens to the limits that admitted it (charge), and hands
// its run to the recorder with what follows from it (record: the upstream's id remembered, the shadow
// copy queued). A shadow copy is only settled and recorded (recordShadow). end runs deferred, so a
// handler that returned without finishing (or panicked) is recorded as an internal failure.
func (x *exchange) end() {
	x.unhold()
	x.release()
	x.settle()
	x.settleBudget()
	elapsed := x.h.now().Sub(x.start)
	if x.svcCopy() {
		x.recordShadow(elapsed)
		return
	}
	x.observe(elapsed)
	x.charge()
	x.record(elapsed)
}

// settle finishes an exchange left unfinished as an internal failure, names the model of a call that
// failed before its model was resolved, settles its usage, and assembles a streamed answer for its run.
func (x *exchange) settle() {
	if !x.out.finished {
		x.out.finished, x.out.failed, x.out.status = true, true, http.StatusInternalServerError
		x.out.response = errorJSON(x.f, internalError(nil))
	}
	if x.out.failed && x.base == "" && x.d != nil {
		x.model = x.failedModel()
	}
	x.cost.settle()
	if x.answer != nil {
		var errJSON []byte
		if x.out.failed {
			errJSON = x.out.response
		}
		x.out.response = x.answer.JSON(x.cost.usage, errJSON)
	}
}

// observe counts the request in the metrics, ends its span and logs it.
func (x *exchange) observe(elapsed time.Duration) {
	x.h.metrics.ObserveEdge(metrics.Edge{Deployment: x.slug, Route: x.route, Status: x.out.status, Duration: elapsed, TTFT: x.ttft,
		Prompt: x.cost.usage.PromptTokens, Completion: x.cost.usage.CompletionTokens})
	if x.trace.span != nil {
		tracing.EndEdge(x.trace.span, tracing.Edge{Run: x.run, Method: x.r.Method, Route: x.route, Deployment: x.slug, Status: x.out.status, Code: x.out.errCode,
			RequestModel: x.trace.asked, ResponseModel: x.model, InputTokens: x.cost.usage.PromptTokens, OutputTokens: x.cost.usage.CompletionTokens,
			FinishReason: x.trace.finish, Start: x.start, TTFT: x.ttft, Replica: x.replica(), RetriedFrom: x.retriedFrom()})
	}
	x.log(x.slug, elapsed)
}

// charge counts the call's tokens against the limits that admitted it.
func (x *exchange) charge() {
	if x.limits.scopes != nil {
		x.h.limiter.Charge(x.cost.usage.PromptTokens+x.cost.usage.CompletionTokens, x.limits.scopes...)
	}
}

// record hands the run of an authorised inference request to the recorder (with retention "none" the
// recorder keeps its usage counts and drops the transcript); a passed-through answer's id is remembered
// for the chain and feedback that name it, and a shadow canary's copy of the call is queued.
func (x *exchange) record(elapsed time.Duration) {
	if !x.run || x.d == nil || x.h.rec == nil {
		return
	}
	shadow := x.canary.shadow != nil && !x.out.failed && !x.usageOnly
	passed := x.upstream.response != "" && !x.usageOnly // a passed-through response's id names no run by itself
	if (shadow || passed) && x.runID == "" && x.d.Retention.Records() {
		x.runID = runs.NewID(x.start) // the shadow's run names it; so does feedback on the upstream's id
	}
	if passed && x.runID != "" {
		x.h.passed.put(x.d.ID, x.upstream.response, x.runID)
		// Kept as a translated response is (keep): a chain continued at once by the upstream's id is
		// read here before its run is written (or shipped), as a split canary's session is (chainRoot).
		x.h.recent.put(x.d.ID, x.runID, x.reqBody, x.out.response)
	}
	x.h.rec.Record(x.runRecord(elapsed))
	if shadow {
		x.enqueueShadow()
	}
}

// recordShadow records the run of a shadow copy: no metrics or limits of the caller's, its run only.
func (x *exchange) recordShadow(elapsed time.Duration) {
	x.log(x.slug, elapsed)
	if x.h.rec != nil {
		x.h.rec.Record(x.runRecord(elapsed))
	}
}

// runRecord is the exchange's run.
func (x *exchange) runRecord(elapsed time.Duration) runs.Run {
	status := "ok"
	if x.out.failed {
		status = "error"
	}
	ttft := x.ttft
	if ttft == 0 {
		ttft = elapsed // answered at once: the first byte came with the whole answer
	}
	return runs.Run{
		ID: x.runID, DeploymentID: x.d.ID, KeyID: x.key.ID, Model: x.model, Status: status, StatusCode: x.out.status, ErrorCode: x.out.errCode, Latency: elapsed,
		PromptTokens: x.cost.usage.PromptTokens, CompletionTokens: x.cost.usage.CompletionTokens, CachedTokens: x.cost.usage.CachedTokens, CreatedAt: x.start,
		Request: x.reqBody, Response: x.out.response, ExpiresAt: x.d.Retention.RunExpiresAt(x.start),
		RequestID: x.id, UpstreamRequestID: x.upstream.request, TraceID: tracing.TraceID(x.trace.span), Replica: x.replica(),
		RetriedFrom: x.retriedFrom(), Surface: routeSurfaces[x.route],
		UsageOnly: x.usageOnly || !x.d.Retention.Records(),
		TTFT:      ttft, Queue: x.turn.waited, Arm: x.canary.arm, ArmTarget: x.canary.target, ShadowOf: x.copyOf, CanaryID: x.canary.canaryID,
		UpstreamResponseID: x.upstream.response, EvalID: x.eval.id, EvalOf: x.eval.of,
	}
}

// replica is the replica that answered the call sent upstream, when the model has replicas.
func (x *exchange) replica() string {
	if x.cost.sent == nil {
		return ""
	}
	return x.cost.sent.Replica
}

// retriedFrom is the replica that failed before answering when the call was retried on another.
func (x *exchange) retriedFrom() string {
	if x.cost.sent == nil {
		return ""
	}
	return x.cost.sent.RetriedFrom
}

// failedModel names the model of a request that failed before its model was resolved (a refused or
// malformed request): the one the endpoint serves it with, else the one the body asked for, so that
// its run says which model the call was for.
func (x *exchange) failedModel() string {
	requested := x.model
	if requested == "" {
		if s, e := jsonx.TopLevelString(x.reqBody, "model"); s >= 0 {
			requested = jsonx.String(x.reqBody[s:e])
		}
	}
	if t, e := x.h.resolve(x.served(), requested, x.f == formatAnthropic); e == nil {
		return t.served
	}
	return requested
}

// log writes the request's line: at debug for every request, always for server-side failures, the
// repeats of a failure (same deployment, status and code) counted instead of written (logx). It never
// carries a key, a body or a query.
func (x *exchange) log(slug string, elapsed time.Duration) {
	level := slog.LevelDebug
	if x.out.status >= 500 {
		level = slog.LevelWarn
	}
	ctx := x.r.Context()
	if !x.h.log.Enabled(ctx, level) {
		return
	}
	if level == slog.LevelWarn && !x.h.failures.Allow(ctx, level, "edge", slug+" "+strconv.Itoa(x.out.status)+" "+x.out.errCode) {
		return
	}
	attrs := []slog.Attr{slog.String("request_id", x.id), slog.String("method", x.r.Method), slog.String("route", x.route),
		slog.String("deployment", slug), slog.Int("status", x.out.status), slog.Int64("ms", elapsed.Milliseconds()),
		slog.String("client", x.h.clientIP.String(x.r))}
	if x.model != "" {
		attrs = append(attrs, slog.String("model", x.model))
	}
	if x.upstream.request != "" {
		attrs = append(attrs, slog.String("upstream_request_id", x.upstream.request))
	}
	if x.trace.span != nil {
		attrs = append(attrs, slog.String("trace_id", tracing.TraceID(x.trace.span)))
	}
	if x.turn.waited > 0 {
		attrs = append(attrs, slog.Int64("queue_ms", x.turn.waited.Milliseconds()))
	}
	if x.cost.usage.PromptTokens+x.cost.usage.CompletionTokens > 0 {
		attrs = append(attrs, slog.Int("prompt_tokens", x.cost.usage.PromptTokens), slog.Int("completion_tokens", x.cost.usage.CompletionTokens))
	}
	if x.out.failed {
		attrs = append(attrs, slog.String("code", x.out.errCode))
	}
	if x.out.failed && x.out.cause != nil {
		attrs = append(attrs, slog.String("err", x.out.cause.Error()))
	}
	x.h.log.LogAttrs(ctx, level, "edge", attrs...)
}
