package edge_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/tracing"
)

// collector is an OTLP/HTTP receiver in the test's process: it decodes the protobuf export requests
// an exporter posts to /v1/traces and keeps their spans.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	res   []*commonpb.KeyValue // the resource of the last export
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		c.res = rs.GetResource().GetAttributes()
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// inTrace returns the spans received of one trace.
func (c *collector) inTrace(traceID string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			out = append(out, s)
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var l []string
			for _, e := range v.ArrayValue.Values {
				l = append(l, e.GetStringValue())
			}
			out[kv.Key] = strings.Join(l, ",")
		}
	}
	return out
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// With tracing on, each edge request is one span in the caller's trace (its traceparent honoured),
// with the GenAI attributes; its upstream call is a child span whose traceparent the upstream
// receives; the run and the log line carry the trace id; management API calls are spans too.
func TestTracesOfEdgeRequestsReachTheCollector(t *testing.T) {
	col := &collector{}
	cs := httptest.NewServer(col)
	defer cs.Close()
	tracer, err := tracing.New(context.Background(), tracing.Config{Endpoint: cs.URL, Service: "svc", Version: "test"})
	if err != nil || tracer == nil {
		t.Fatalf("tracing.New: %v, %v", tracer, err)
	}
	defer tracer.Shutdown(context.Background())

	var mu sync.Mutex
	upstreamSaw := map[string]string{} // X-Request-Id → traceparent, as the upstream received them
	var log syncBuffer
	e := newEnvWith(t, envOptions{tracer: tracer, logTo: &log, logLevel: -4, upstreamSaw: func(r *http.Request) {
		mu.Lock()
		upstreamSaw[r.Header.Get("X-Request-Id")] = r.Header.Get("Traceparent")
		mu.Unlock()
	}})
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 5})
	d, key := e.deploy("traced", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)

	type call struct {
		stream           bool
		traceID, spanID  string
		requestID        string
		prompt, complete int64
	}
	calls := []*call{{stream: false}, {stream: true}}
	for _, c := range calls {
		c.traceID, c.spanID = randomHex(t, 16), randomHex(t, 8)
		r := e.doHeaders("POST", "traced", "/v1/chat/completions", chatBody("Hello there", "model", "asked-model", "stream", c.stream),
			map[string]string{"Authorization": bearer(key), "Traceparent": "00-" + c.traceID + "-" + c.spanID + "-01"})
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		c.requestID = r.header.Get("X-Request-Id")
	}
	// A management API call: listing the runs, which also shows their trace ids.
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	e.srv.Flush()
	page, err := api.ListRuns(context.Background(), d.ID, cloudapi.ListRunsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tracer.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	for _, c := range calls {
		spans := col.inTrace(c.traceID)
		var edgeSpan, upstreamSpan *tracepb.Span
		for _, s := range spans {
			switch s.Kind {
			case tracepb.Span_SPAN_KIND_SERVER:
				if edgeSpan != nil {
					t.Errorf("trace %s: two server spans for one edge request", c.traceID)
				}
				edgeSpan = s
			case tracepb.Span_SPAN_KIND_CLIENT:
				upstreamSpan = s
			}
		}
		if edgeSpan == nil || upstreamSpan == nil {
			t.Fatalf("trace %s (stream %v): spans %v, want the edge request's and its upstream call's", c.traceID, c.stream, spans)
		}
		if got := hex.EncodeToString(edgeSpan.ParentSpanId); got != c.spanID {
			t.Errorf("the edge span's parent is %s, want the caller's span %s", got, c.spanID)
		}
		if !bytes.Equal(upstreamSpan.ParentSpanId, edgeSpan.SpanId) {
			t.Errorf("the upstream span is not a child of the edge span")
		}
		a := attrs(edgeSpan.Attributes)
		for k, want := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "asked-model",
			"gen_ai.response.model": "up", "gen_ai.response.finish_reasons": "stop", "http.response.status_code": int64(200),
			"http.route": "/v1/chat/completions", "svc.deployment": "traced"} {
			if a[k] != want {
				t.Errorf("edge span (stream %v): %s = %v, want %v", c.stream, k, a[k], want)
			}
		}
		// The upstream call's span names where it went: host and port (a fleet's replica).
		ua := attrs(upstreamSpan.Attributes)
		if u, _ := url.Parse(e.mockURL); ua["server.address"] != u.Hostname() || fmt.Sprint(ua["server.port"]) != u.Port() {
			t.Errorf("upstream span: server.address %v, server.port %v; want %s", ua["server.address"], ua["server.port"], u.Host)
		}
		if edgeSpan.Name != "chat asked-model" {
			t.Errorf("edge span named %q, want the GenAI name \"chat asked-model\"", edgeSpan.Name)
		}
		in, out := a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]
		for _, run := range page.Runs {
			if run.RequestID == c.requestID {
				c.prompt, c.complete = run.PromptTokens, run.CompletionTokens
				if run.TraceID != c.traceID {
					t.Errorf("the run's traceId is %q, want the caller's %s", run.TraceID, c.traceID)
				}
			}
		}
		if c.prompt == 0 || in != c.prompt || out != c.complete {
			t.Errorf("span tokens %v in, %v out; the run says %d, %d", in, out, c.prompt, c.complete)
		}
		var firstToken bool
		for _, ev := range edgeSpan.Events {
			firstToken = firstToken || ev.Name == "gen_ai.first_token"
		}
		if firstToken != c.stream {
			t.Errorf("stream %v: first-token event %v", c.stream, firstToken)
		}
		mu.Lock()
		tp := upstreamSaw[c.requestID]
		mu.Unlock()
		if want := "00-" + c.traceID + "-" + hex.EncodeToString(upstreamSpan.SpanId) + "-01"; tp != want {
			t.Errorf("the upstream received traceparent %q, want %q (the trace, from the upstream call's span)", tp, want)
		}
		if !strings.Contains(log.b.String(), `"request_id":"`+c.requestID+`"`) ||
			!strings.Contains(log.b.String(), `"trace_id":"`+c.traceID+`"`) {
			t.Errorf("no log line with request %s and trace %s", c.requestID, c.traceID)
		}
	}

	// The API call's span: named by its route pattern, in a trace of its own.
	var apiSpan *tracepb.Span
	col.mu.Lock()
	for _, s := range col.spans {
		if s.Name == "GET /v1/orgs/:org/projects/:project/deployments/:id/runs" {
			apiSpan = s
		}
	}
	res := attrs(col.res)
	col.mu.Unlock()
	if apiSpan == nil || attrs(apiSpan.Attributes)["http.response.status_code"] != int64(200) {
		t.Errorf("no span of the runs listing with status 200: %v", apiSpan)
	}
	if res["service.name"] != "svc" || res["service.version"] != "test" {
		t.Errorf("resource %v, want service.name svc, service.version test", res)
	}
}

// Tracing off is a nil *Tracer: no exporter, and the edge serves as before.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := tracing.New(context.Background(), tracing.Config{})
	if tr != nil || err != nil {
		t.Fatalf("tracing.New without an endpoint: %v, %v; want nil, nil", tr, err)
	}
	if _, err := tracing.New(context.Background(), tracing.Config{Endpoint: "otel-collector:4318"}); err == nil {
		t.Error("an endpoint without a scheme was taken")
	}
}
