package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// recording is a Tracer whose spans stay in memory.
func recording() (*Tracer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	p := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return &Tracer{provider: p, tracer: p.Tracer("test"), prop: propagation.TraceContext{}}, rec
}

// An upstream call made outside any span (adapters loaded in the background) is neither traced nor
// given a traceparent; one made under a span is, and its span ends once, when its answer is closed,
// however many times and from however many goroutines Close is called (a stream's drain timer).
func TestTransport(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Traceparent"))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	tr, rec := recording()
	rt := tr.Transport(http.DefaultTransport)

	req, _ := http.NewRequest("POST", up.URL+"/v1/load_lora_adapter", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	ctx, parent := tr.tracer.Start(context.Background(), "edge")
	req, _ = http.NewRequestWithContext(ctx, "POST", up.URL+"/v1/chat/completions", nil)
	resp, err = rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Ended()) != 0 {
		t.Fatal("the upstream span ended before its answer was read")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { resp.Body.Close() })
	}
	wg.Wait()
	parent.End()

	if req.Header.Get("Traceparent") != "" {
		t.Error("the transport changed the request it was given")
	}
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "POST /v1/chat/completions" || ended[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %v, want the upstream call's (a child of the edge's), then the edge's", ended)
	}
	if len(got) != 2 || got[0] != "" || got[1] != "00-"+ended[0].SpanContext().TraceID().String()+"-"+ended[0].SpanContext().SpanID().String()+"-01" {
		t.Errorf("traceparents the upstream received: %q", got)
	}
}

func TestNilTracerIsOff(t *testing.T) {
	var tr *Tracer
	if tr.Transport(http.DefaultTransport) != http.DefaultTransport || tr.Shutdown(context.Background()) != nil ||
		tr.ForceFlush(context.Background()) != nil || TraceID(nil) != "" {
		t.Fatal("a nil Tracer did something")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
	if !(Config{}).Enabled() {
		t.Error("OTEL_EXPORTER_OTLP_ENDPOINT does not turn tracing on")
	}
}
