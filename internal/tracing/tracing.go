// Package tracing exports OpenTelemetry traces over OTLP/HTTP when an endpoint is configured, and
// costs nothing when not: a nil *Tracer is off (docs/OPERATIONS.md, "Tracing"). It makes the spans of
// edge requests (with the GenAI semantic conventions), of upstream calls (whose requests carry
// traceparent) and of management API calls.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Config says where traces go.
type Config struct {
	// Endpoint is the OTLP/HTTP base URL (--otlp-endpoint), e.g. http://otel-collector:4318; spans go to
	// its /v1/traces. Empty: the OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) variable, and when
	// that is unset too, tracing is off.
	Endpoint string
	// Service and Version name this process in the traces (service.name, service.version);
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES add to or override them.
	Service, Version string
}

// Enabled reports whether c turns tracing on: an endpoint given, or one in the environment.
func (c Config) Enabled() bool {
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracer makes svc's spans and exports them in batches. A nil *Tracer is tracing off: every method
// is safe to call on it and does nothing, so callers keep one branch (t != nil) on their hot paths.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
}

// New starts the exporter when c turns tracing on, and returns nil (off) when it does not.
func New(ctx context.Context, c Config) (*Tracer, error) {
	if !c.Enabled() {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--otlp-endpoint %q: want an http:// or https:// URL, such as http://otel-collector:4318", c.Endpoint)
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(c.Endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(c.Service), semconv.ServiceVersion(c.Version)))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	// The default sampler follows the caller's sampled flag and samples every root; OTEL_TRACES_SAMPLER
	// changes it.
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{
		provider: provider,
		tracer:   provider.Tracer("github.com/svcdev/svc"),
		prop:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}, nil
}

// Shutdown exports the spans still held and stops the exporter (at most until ctx ends).
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// ForceFlush exports the spans ended so far.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// StartServer starts the span of a request svc serves, as a child of the caller's traceparent when
// it sent one, and returns the request carrying it.
func (t *Tracer) StartServer(r *http.Request, name string) (*http.Request, trace.Span) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method)))
	return r.WithContext(ctx), span
}

// TraceID is the trace id of span as 32 hex digits, "" when span is nil or not recording a trace.
func TraceID(span trace.Span) string {
	if span == nil || !span.SpanContext().HasTraceID() {
		return ""
	}
	return span.SpanContext().TraceID().String()
}

// Edge is what an edge request's span says when it ends.
type Edge struct {
	Run               bool // an inference request (chat completions, Messages); else /v1/models or refused
	Method            string
	Route, Deployment string
	Status            int
	Code              string // the error code answered, "" on success
	// The GenAI semantic conventions (gen_ai.*): the model the client asked for and the one that
	// answered, the token counts, why the answer ended.
	RequestModel, ResponseModel string
	InputTokens, OutputTokens   int
	FinishReason                string
	// Start and TTFT place the first token's event (streams).
	Start time.Time
	TTFT  time.Duration
	// Replica is the replica (host:port) that answered, when the model has replicas (svc.replica).
	Replica string
	// RetriedFrom is the replica that failed before answering when the call was retried on Replica
	// (svc.retried_from).
	RetriedFrom string
}

// EndEdge names and ends the span of an edge request. An inference request is "chat <model>", as the
// GenAI conventions name an inference operation, with their attributes and the first token as an
// event; anything else is "<method> <route>".
func EndEdge(span trace.Span, e Edge) {
	attrs := []attribute.KeyValue{
		semconv.HTTPRouteKey.String(e.Route),
		semconv.HTTPResponseStatusCodeKey.Int(e.Status),
		attribute.String("svc.deployment", e.Deployment),
	}
	if !e.Run {
		span.SetName(e.Method + " " + e.Route)
		if e.Status >= 500 {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(e.Code, e.Status)))
			span.SetStatus(codes.Error, e.Code)
		}
		span.SetAttributes(attrs...)
		span.End()
		return
	}
	model := e.RequestModel
	if model == "" {
		model = e.ResponseModel // pinned endpoints take requests that name no model
	}
	span.SetName("chat " + model)
	attrs = append(attrs, semconv.GenAIOperationNameChat, semconv.GenAIRequestModelKey.String(model))
	if e.ResponseModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModelKey.String(e.ResponseModel))
	}
	if e.InputTokens > 0 || e.OutputTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageInputTokensKey.Int(e.InputTokens), semconv.GenAIUsageOutputTokensKey.Int(e.OutputTokens))
	}
	if e.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(e.FinishReason))
	}
	if e.Replica != "" {
		attrs = append(attrs, attribute.String("svc.replica", e.Replica))
	}
	if e.RetriedFrom != "" {
		attrs = append(attrs, attribute.String("svc.retried_from", e.RetriedFrom))
	}
	if e.Status >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(e.Code, e.Status)))
		span.SetStatus(codes.Error, e.Code)
	}
	span.SetAttributes(attrs...)
	if e.TTFT > 0 {
		span.AddEvent("gen_ai.first_token", trace.WithTimestamp(e.Start.Add(e.TTFT)),
			trace.WithAttributes(attribute.Float64("gen_ai.server.time_to_first_token", e.TTFT.Seconds())))
	}
	span.End()
}

func errorType(code string, status int) string {
	if code != "" {
		return code
	}
	return fmt.Sprint(status)
}

// Transport wraps the transport of upstream calls: a call made under an edge request's span gets a
// child span (kind client) and carries its traceparent, so that vLLM and gateways join the trace. The
// span ends when the answer's body is closed (streams: at their end). Calls made outside any span
// (adapter loading in the background) pass through as they are.
func (t *Tracer) Transport(base http.RoundTripper) http.RoundTripper {
	if t == nil {
		return base
	}
	return &transport{t: t, base: base}
}

type transport struct {
	t    *Tracer
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return tr.base.RoundTrip(req)
	}
	ctx, span := tr.t.tracer.Start(ctx, req.Method+" "+req.URL.Path, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.ServerAddress(req.URL.Hostname()),
			semconv.ServerPort(port(req.URL)), semconv.URLPath(req.URL.Path)))
	req = req.Clone(ctx) // a RoundTripper must not change the request it was given
	tr.t.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "upstream unreachable")
		span.SetAttributes(semconv.ErrorTypeKey.String(errorKind(err)))
		span.End()
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCodeKey.Int(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, resp.Status)
		span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprint(resp.StatusCode)))
	}
	resp.Body = &endOnClose{ReadCloser: resp.Body, span: span}
	return resp, nil
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "connection"
}

// endOnClose ends the upstream call's span when its answer has been read and closed.
type endOnClose struct {
	io.ReadCloser
	span trace.Span
	done atomic.Bool // Close may come twice, and from two goroutines (a stream's drain timer)
}

func (b *endOnClose) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.span.End()
	}
	return err
}

// Echo is the middleware of the management API: a span per call, named by its route pattern (never
// its path, which holds ids), with the status answered. An error is written here (c.Error), as the
// access log does, so that the span carries the status sent.
func (t *Tracer) Echo() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if route == "" {
				route = "(no route)"
			}
			r, span := t.StartServer(c.Request(), c.Request().Method+" "+route)
			defer span.End()
			c.SetRequest(r)
			if err := next(c); err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			span.SetAttributes(semconv.HTTPRouteKey.String(route), semconv.HTTPResponseStatusCodeKey.Int(status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			return nil
		}
	}
}

// TraceIDFrom is the trace id of the span ctx carries, "" when none.
func TraceIDFrom(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// port is a URL's port, or its scheme's: a client span names the upstream (a fleet's replica) by
// server.address and server.port, one span per attempt, so that a retry shows as a second span.
func port(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}
