// Package edge serves a deployment's inference API on its host: OpenAI chat completions, responses,
// models, embeddings and text completions, and the Anthropic Messages API, with key auth and run
// recording.
package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svcdev/svc/internal/bodydeadline"
	"github.com/svcdev/svc/internal/clientip"
	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/logx"
	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/ratelimit"
	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/tracing"
)

// MaxBodyBytes caps a request body; larger bodies are refused with 413.
const MaxBodyBytes = conv.MaxBytes

// Service is what the edge reads and writes of the service's state: core's Service in svc server,
// edgesync's Cache (through its control plane) in svc edge.
type Service interface {
	EdgeDeployment(ctx context.Context, slug string) (*edgemodel.EdgeDeployment, error)
	EdgeAuthorize(ctx context.Context, d *edgemodel.EdgeDeployment, presentedKey string) (edgemodel.EdgeKey, error)
	RunReader
	FeedbackWriter
}

// Recorder takes the runs and key uses of served requests, never blocking: the run recorder in svc
// server (recorder.Recorder), the run shipper in svc edge (edgesync.Shipper).
type Recorder interface {
	Record(run runs.Run) bool
	Touch(keyID string, at time.Time)
}

// Options are the edge's dependencies.
type Options struct {
	Service  Service
	Runtimes *inference.Registry
	Recorder Recorder // nil records nothing
	Logger   *slog.Logger
	Metrics  *metrics.Metrics // nil exports nothing
	// CORSOrigins are the origins browsers may call endpoints from ("*" for any); none turns CORS off.
	CORSOrigins []string
	// ClientIP decides the client address for the log line (X-Forwarded-For only from trusted proxies).
	ClientIP *clientip.Resolver
	// EdgeCount is the number of edge processes sharing the rate limits: each enforces its share
	// (limit / EdgeCount); 0 or 1 for one process.
	EdgeCount int
	// Edges is the number of edge processes sharing each model's capacity: each admits its share
	// (capacity / Edges, admission.go), whether or not the rate limits are shared through Redis; 0 or 1
	// for one process.
	Edges int
	// Limiter enforces the rate limits of deployments and keys; nil keeps them in this process
	// (ratelimit.Local).
	Limiter ratelimit.Limiter
	// Budgets counts the token budgets of deployments and keys; nil counts them in this process, each
	// of EdgeCount processes its share (ratelimit.NewBudgets).
	Budgets *ratelimit.Budgets
	// ThinkingSecret keys the signatures of the thinking blocks and reasoning items of translated
	// answers, verified when they come back (internal/translate, reasoning.go). svc server derives
	// one from its data folder's session key, stable across restarts; nil: a random one per process.
	ThinkingSecret []byte
	// ThinkingSecretFrom, when set, gives the key at each translation instead: an svc edge process's is
	// its control plane's (edgesync.Cache.ThinkingSecret, from the change feed or the spool folder).
	// While it gives nil (an edge that never reached a control plane), the random key serves.
	ThinkingSecretFrom func() []byte
	// LogEvery is the interval of the count lines of repeated failures (logx.DefaultEvery when 0).
	LogEvery time.Duration
	// Tracer makes a span of each request and of its upstream call; nil: tracing off.
	Tracer *tracing.Tracer
}

// Handler serves the edge routes of every deployment.
type Handler struct {
	svc       Service
	rt        *inference.Registry
	rec       Recorder
	log       *slog.Logger
	failures  *logx.Limiter // the failure lines, bounded under storms
	tracer    *tracing.Tracer
	metrics   *metrics.Metrics
	cors      *cors
	limiter   ratelimit.Limiter
	budgets   *ratelimit.Budgets
	clientIP  *clientip.Resolver
	edgeCount int
	edges     int // Options.Edges
	now       func() time.Time
	started   time.Time // when the catalog was loaded: the "created" of multi-model endpoints' models
	secret    []byte    // Options.ThinkingSecret, or a random one
	secretOf  func() []byte
	recent    recentResponses
	passed    passedResponses // the runs of this process's latest passed-through responses (feedback.go)
	shadows   shadows         // the copies of calls for shadow canaries (canary.go)
	gates     gates           // the models' admission gates (admission.go)
}

// New returns the edge handler.
func New(o Options) *Handler {
	h := &Handler{svc: o.Service, rt: o.Runtimes, rec: o.Recorder, log: o.Logger, metrics: o.Metrics,
		cors: newCORS(o.CORSOrigins), limiter: o.Limiter, budgets: o.Budgets, edgeCount: o.EdgeCount, edges: o.Edges, clientIP: o.ClientIP, now: time.Now,
		tracer: o.Tracer}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.limiter == nil {
		h.limiter = ratelimit.NewLocal()
	}
	if h.budgets == nil {
		h.budgets = ratelimit.NewBudgets(nil, o.EdgeCount)
	}
	h.failures = logx.New(h.log, o.LogEvery)
	o.Metrics.WatchShadows(&h.shadows)
	o.Metrics.WatchAdmission(&h.gates)
	h.started = h.now()
	h.secret, h.secretOf = o.ThinkingSecret, o.ThinkingSecretFrom
	if len(h.secret) == 0 {
		// Only a process with no key of its own and none from a control plane yet (an svc edge that
		// never reached one, tests) signs with a random key: its signed blocks come back to it alone.
		h.secret = make([]byte, 32)
		rand.Read(h.secret)
	}
	return h
}

// thinkingSecret is the key of thinking signatures: the control plane's on an svc edge process once
// known, else this process's own.
func (h *Handler) thinkingSecret() []byte {
	if h.secretOf != nil {
		if s := h.secretOf(); len(s) > 0 {
			return s
		}
	}
	return h.secret
}

// FlushLog writes the counts of repeated failures not written yet; the server calls it when it stops.
func (h *Handler) FlushLog() { h.failures.Flush() }

// route is one edge operation.
type route struct {
	method  string
	format  format
	run     bool // recorded in the run history (inference calls, not listings)
	limited bool // takes a request from the rate limits (inference calls and feedback, not listings)
	queued  bool // waits for its model's turn (admission.go): the calls that generate, not token counts
	serve   func(h *Handler, x *exchange)
}

// routes is the edge's route table. Paths match exactly, so an SDK given an operation URL as its base
// URL (".../v1/chat/completions/chat/completions") gets 404.
var routes = map[string]route{
	"/v1/chat/completions":       {http.MethodPost, formatOpenAI, true, true, true, (*Handler).chat},
	"/v1/models":                 {http.MethodGet, formatOpenAI, false, false, false, (*Handler).models},
	"/v1/messages":               {http.MethodPost, formatAnthropic, true, true, true, (*Handler).messages},
	"/v1/messages/count_tokens":  {http.MethodPost, formatAnthropic, true, true, false, (*Handler).countTokens},
	"/v1/responses":              {http.MethodPost, formatOpenAI, true, true, true, (*Handler).responses},
	"/v1/responses/input_tokens": {http.MethodPost, formatOpenAI, true, true, false, (*Handler).responsesInputTokens},
	"/v1/embeddings":             {http.MethodPost, formatOpenAI, true, true, true, (*Handler).embeddings},
	"/v1/completions":            {http.MethodPost, formatOpenAI, true, true, true, (*Handler).completions},
	// Feedback is no run, but a request of its key all the same: without a limit a key could write
	// scores as fast as it can send them.
	"/v1/feedback": {http.MethodPost, formatOpenAI, false, true, false, (*Handler).feedback},
}

// routeSurfaces are the surfaces (runs.Run.Surface) of the routes whose requests are runs.
var routeSurfaces = map[string]string{
	"/v1/chat/completions": runs.SurfaceChat,
	"/v1/messages":         runs.SurfaceMessages, "/v1/messages/count_tokens": runs.SurfaceMessages,
	"/v1/responses": runs.SurfaceResponses, "/v1/responses/input_tokens": runs.SurfaceResponses,
	"/v1/embeddings": runs.SurfaceEmbeddings, "/v1/completions": runs.SurfaceCompletions,
}

// prefixRoutes are the routes whose last segment is an id; their metrics label is the pattern.
var prefixRoutes = map[string]route{
	"/v1/models/":    {http.MethodGet, formatOpenAI, false, false, false, (*Handler).model},
	"/v1/responses/": {http.MethodGet, formatOpenAI, false, false, false, (*Handler).storedResponse},
}

// lookup finds the route of a path, and the label it is counted under.
func lookup(path string) (route, string, bool) {
	if rt, ok := routes[path]; ok {
		return rt, path, true
	}
	for prefix, rt := range prefixRoutes {
		if id, ok := strings.CutPrefix(path, prefix); ok && id != "" && !strings.Contains(id, "/") {
			return rt, prefix + "{id}", true
		}
	}
	return route{}, "", false
}

// ServeEdge serves one request for the deployment with this slug; r.URL.Path is "/v1/...".
func (h *Handler) ServeEdge(w http.ResponseWriter, r *http.Request, slug string) {
	if h.cors.handle(w, r) {
		return // a preflight, answered before any credentials could be checked
	}
	rt, label, known := lookup(r.URL.Path)
	if known && strings.HasSuffix(label, "{id}") && r.Method == http.MethodPost {
		// A POST under an id route names an operation svc does not serve, not an id
		// (POST /v1/responses/compact, openai's responses.compact()): no route, 404.
		rt, label, known = route{}, "", false
	}
	f := rt.format
	if !known && strings.Contains(r.URL.Path, "/messages") {
		f = formatAnthropic
	}
	x := h.begin(w, r, f)
	defer x.end()
	x.early = true // until rt.serve: every refusal below is decided by the headers (exchange.fail)
	if known {
		x.route = label
	}
	if inference.Loop(r.Header) {
		// svc called itself (a model's upstreamUrl points at svc): refused before anything else, no run
		// recorded, so that the call that went around answers in one hop with one run (its own).
		x.fail(loopDetected)
		return
	}
	// The deployment comes first: an unknown, disabled, deleted or expired endpoint is 404 whatever
	// the path, method or credentials.
	d, err := h.svc.EdgeDeployment(r.Context(), slug)
	if err != nil {
		switch edgemodel.CodeOf(err) {
		case edgemodel.CodeNotFound:
			e := notFound("not_found", "no endpoint is served at this address; check the URL, or whether the endpoint was disabled or deleted")
			if d := edgemodel.DisabledDeployment(err); d != nil && known {
				// A disabled endpoint's call counts in its usage, with the key where one is recognised.
				key, _ := h.svc.EdgeAuthorize(r.Context(), d, presentedKey(r))
				x.slug = d.Slug
				x.refuse(d, key.ID, rt, e)
				return
			}
			x.fail(e)
		case edgemodel.CodeUnavailable:
			x.fail(unavailable(err)) // an svc edge process that cannot reach its control plane
		default:
			x.fail(internalError(err))
		}
		return
	}
	x.slug = d.Slug
	if !known {
		x.fail(notFound("not_found", noRoute(r.Method, r.URL.Path, f)))
		return
	}
	if r.Method != rt.method {
		x.fail(&apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", code: "method_not_allowed", allow: rt.method,
			message: fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, rt.method)})
		return
	}
	key, err := h.svc.EdgeAuthorize(r.Context(), d, presentedKey(r))
	if err != nil {
		if edgemodel.CodeOf(err) == edgemodel.CodeUnauthorized {
			// The message never repeats the presented key.
			x.refuse(d, "", rt, &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
				message: "invalid or missing API key; send it as Authorization: Bearer <API_KEY> or x-api-key: <API_KEY>"})
		} else if edgemodel.CodeOf(err) == edgemodel.CodeUnavailable {
			x.fail(unavailable(err)) // the store does not answer
		} else {
			x.fail(internalError(err))
		}
		return
	}
	x.d, x.key, x.run, x.queued = d, key, rt.run, rt.queued
	if key.ID != "" && h.rec != nil {
		h.rec.Touch(key.ID, x.start)
	}
	if rt.limited && !h.admit(x) {
		return
	}
	x.early = false
	rt.serve(h, x)
}

// refuse answers a call to a known endpoint's inference route that is refused before its body is read
// (a wrong or missing key: 401; the endpoint disabled: 404) and hands it to the recorder from the
// headers alone, usage-only: it counts as an error call with its status in the endpoint's usage, under
// keyID when a key was recognised (docs/API.md, "Usage"), but no run row or transcript is written, so
// a flood of refused calls costs an hourly counter, not a row per call.
func (x *exchange) refuse(d *edgemodel.EdgeDeployment, keyID string, rt route, e *apiError) {
	x.d, x.key, x.run, x.usageOnly = d, edgemodel.EdgeKey{ID: keyID}, rt.run, true
	x.fail(e)
}

// operations are the edge's operation paths under /v1, to recognise a base URL that already held one.
var operations = []string{"/chat/completions", "/messages", "/responses", "/embeddings", "/completions", "/models", "/feedback"}

// noRoute says what a path that is no route looks like (docs/API.md, "Edge"): a base URL hint only
// where the path shows one (an operation path twice, /v1 twice or missing), for Anthropic clients that
// their base URL must not end in /v1; otherwise the routes there are.
func noRoute(method, path string, f format) string {
	saw := fmt.Sprintf("no route %s %s", method, path)
	rest, hasV1 := strings.CutPrefix(path, "/v1")
	switch {
	case f == formatAnthropic && strings.HasPrefix(rest, "/v1/"):
		return saw + ": the path holds /v1 twice; the Anthropic SDK (and Claude Code) add /v1/messages themselves, so their base URL must not end in /v1 (…/e/<slug>)"
	case f == formatAnthropic && !hasV1:
		return saw + ": the path lacks /v1; the Anthropic SDK's base URL is the endpoint's address without /v1 (…/e/<slug>), to which it adds /v1/messages"
	case strings.HasPrefix(rest, "/v1/"):
		return saw + ": the path holds /v1 twice; an OpenAI SDK's base URL ends in /v1 once (…/e/<slug>/v1)"
	case !hasV1 || (rest != "" && rest[0] != '/'):
		for _, op := range operations {
			if strings.HasPrefix(path, op) {
				return saw + ": the path lacks /v1; an OpenAI SDK's base URL must end in /v1 (…/e/<slug>/v1)"
			}
		}
	default:
		for _, op := range operations {
			if i := strings.Index(rest, op); i >= 0 && strings.Contains(rest[i+len(op):], op) {
				if f == formatAnthropic {
					return saw + ": the path holds the operation " + op + " twice; the Anthropic SDK (and Claude Code) add /v1/messages themselves, so their base URL is the endpoint's address alone (…/e/<slug>), without /v1 or an operation path"
				}
				return saw + ": the path holds the operation " + op + " twice; an SDK's base URL must end in /v1, not in an operation path"
			}
		}
	}
	return saw + "; the routes are POST /v1/chat/completions, /v1/responses, /v1/responses/input_tokens, /v1/messages, /v1/messages/count_tokens, /v1/embeddings, /v1/completions, /v1/feedback; GET /v1/models, /v1/models/{id}, /v1/responses/{id}"
}

// presentedKey returns the key sent as "Authorization: Bearer <key>" or "x-api-key: <key>".
func presentedKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if scheme, key, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(key)
		}
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

var tooLarge = &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "body_too_large",
	message: fmt.Sprintf("request body is larger than %d MiB", MaxBodyBytes>>20)}

// loopDetected answers a call that svc sent itself: a model's upstreamUrl points back at svc
// (inference.Loop). The caller (svc, one hop back) relays it to its own caller.
var loopDetected = &apiError{status: http.StatusLoopDetected, typ: "api_error", code: "loop_detected",
	message: "this call came back to svc from svc itself: the upstreamUrl of the endpoint's model points at svc; the operator must point it at the inference server"}

// bodyTimeout answers a body that did not arrive within the listener's body deadline
// (internal/bodydeadline). The client is still connected (it is still sending), so it gets this answer,
// not the 499 of a client that went away.
var bodyTimeout = &apiError{status: http.StatusRequestTimeout, typ: "invalid_request_error", code: "request_timeout",
	message: bodydeadline.Message}

// readBody reads the request body up to MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	return readBodyUpTo(w, r, MaxBodyBytes, tooLarge)
}

// readBodyUpTo reads the request body up to limit bytes, answering over when it is longer.
func readBodyUpTo(w http.ResponseWriter, r *http.Request, limit int64, over *apiError) ([]byte, *apiError) {
	if r.ContentLength > limit {
		return nil, over
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, over
		}
		if bodydeadline.Exceeded(err) {
			// The rest of the body is still on its way: the connection cannot carry another request.
			w.Header().Set("Connection", "close")
			return nil, bodyTimeout
		}
		return nil, badRequest("", "could not read the request body")
	}
	return body, nil
}

// readAll is io.ReadAll into one buffer of the size the request declared, up to presized (io.ReadAll
// starts at 512 bytes and grows: five buffers and copies for an agent's 5 KB request). A larger body
// grows as it arrives: a declared size is not memory to hand a client that has sent nothing yet.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > presized {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead)) // the room ReadFrom wants to see the end
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// presized is the largest declared body readAll reads into a buffer of its size at once.
const presized = 256 << 10

// target is the model that serves one request.
type target struct {
	model       string // catalog id of the base model
	served      string // name the response carries
	adapter     string
	adapterName string
	info        edgemodel.ModelInfo
	rt          inference.Runtime
}

// call points a validated call at the target's model and adapter, under the exchange's request id.
func (t *target) call(call *inference.Call, x *exchange) *inference.Call {
	call.Model, call.Served, call.Adapter, call.AdapterName = t.model, t.served, t.adapter, t.adapterName
	call.RequestID = x.id
	call.Hops = x.r.Header.Get(inference.HopHeader)
	x.cost.sent = call
	return call
}

// answerID gives a call svc's answer id, made of the exchange's run id (docs/API.md, "Ids are run
// ids"): the chat completion's id, chatcmpl-<tail>, which a translated Messages answer turns into
// msg_<tail> and a translated Responses answer does not use (its id is resp_<tail>).
func (x *exchange) answerID(call *inference.Call) {
	if x.runID == "" || x.eval.of == "" {
		x.runID = runs.NewID(x.start) // an eval's replay keeps the id its worker chose (replay.go)
	}
	call.ID = runs.CompletionID(x.runID)
}

// resolve picks the model for a request: the pinned one on single-target endpoints (whatever the
// request's model says), else the requested public model or the default.
func (h *Handler) resolve(d *edgemodel.EdgeDeployment, requested string, messagesAPI bool) (*target, *apiError) {
	var t target
	if d.BaseModel != "" {
		info, ok := h.rt.Model(d.BaseModel)
		if !ok {
			return nil, notFound("model_not_found", fmt.Sprintf("the model %q of this endpoint is no longer served", d.BaseModel))
		}
		t = target{model: d.BaseModel, served: d.Served(), adapter: d.Adapter, adapterName: d.AdapterName, info: info}
		if messagesAPI && !info.SupportsMessages {
			return nil, notFound("not_found", fmt.Sprintf("the model %q of this endpoint does not serve the Messages API; use /v1/chat/completions", t.served))
		}
	} else {
		var info edgemodel.ModelInfo
		ok := false
		if requested == "" {
			info, ok = h.rt.Default()
		} else {
			info, ok = h.rt.Model(requested)
			ok = ok && info.Public
		}
		if !ok {
			e := notFound("model_not_found", fmt.Sprintf("the model %q is not served by this endpoint; GET /v1/models lists the models", requested))
			e.param = "model"
			return nil, e
		}
		if messagesAPI && !info.SupportsMessages {
			e := notFound("model_not_found", fmt.Sprintf("the model %q does not serve the Messages API; use /v1/chat/completions", info.ID))
			e.param = "model"
			return nil, e
		}
		t = target{model: info.ID, served: info.ID, info: info}
	}
	t.rt = h.rt.Runtime(t.model)
	if t.rt == nil {
		return nil, notFound("model_not_found", fmt.Sprintf("the model %q is not served", t.model))
	}
	return &t, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// writeJSON sends a successful JSON answer.
func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	// A trailing newline, like the management API's answers, so that a curl in a terminal ends its line.
	w.Header().Set("Content-Length", itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(b)
	w.Write(newline)
}

var newline = []byte("\n")

// cors answers browsers calling endpoints from the origins the operator allowed (--edge-cors-origins).
// Off unless configured; it applies to edge routes only.
type cors struct {
	any     bool
	origins map[string]bool
}

func newCORS(origins []string) *cors {
	c := &cors{origins: map[string]bool{}}
	for _, o := range origins {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		switch o {
		case "":
		case "*":
			c.any = true
		default:
			c.origins[strings.ToLower(o)] = true
		}
	}
	if !c.any && len(c.origins) == 0 {
		return nil
	}
	return c
}

// exposed are the answer headers a browser script may read: ids and rate-limit state.
const exposed = "X-Request-Id, X-Upstream-Request-Id, Retry-After, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, " +
	"x-ratelimit-reset-requests, x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens"

// handle adds the CORS headers for an allowed origin and answers preflights; it reports whether the
// request was a preflight it answered.
func (c *cors) handle(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if c == nil || origin == "" || !(c.any || c.origins[strings.ToLower(origin)]) {
		return false
	}
	h := w.Header()
	if c.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Expose-Headers", exposed)
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	// Authorization is never covered by a "*" wildcard: the headers asked for are named back.
	if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
		h.Set("Access-Control-Allow-Headers", asked)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}
