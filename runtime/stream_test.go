package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// streamUpstream serves a short chat stream whose end of answer (the last chunk of the chunked
// encoding) leaves after "data: [DONE]", after linger; it counts the connections it accepts.
func streamUpstream(t *testing.T, linger time.Duration) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"Hello", " there"} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", tok)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(linger) // the chunked answer's end comes apart from [DONE]
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func streamOnce(t *testing.T, rt Runtime) (string, time.Duration) {
	t.Helper()
	st, err := rt.Stream(context.Background(), &Call{Model: "up", Served: "up", Stream: true,
		Body: map[string]json.RawMessage{"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for {
		ch, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			text += c.Content
		}
	}
	t0 := time.Now()
	st.Close()
	return text, time.Since(t0)
}

// A finished stream leaves its upstream connection reusable: streams one after the other use one
// connection, even when the end of the HTTP answer arrives apart from [DONE].
func TestStreamsReuseUpstreamConnection(t *testing.T) {
	srv, conns := streamUpstream(t, 5*time.Millisecond)
	reg, err := NewRegistry([]ModelConfig{{Name: "up", Runtime: "openai", UpstreamURL: srv.URL + "/v1", Public: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if text, _ := streamOnce(t, reg.Runtime("up")); text != "Hello there" {
			t.Fatalf("stream %d read %q", i, text)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 streams in a row opened %d upstream connections, want 1", n)
	}
}

// An upstream that keeps its answer open after [DONE] does not hold the stream's Close (and so the
// client's answer) for longer than drainWait.
func TestStreamCloseDoesNotWaitForLingeringUpstream(t *testing.T) {
	srv, _ := streamUpstream(t, time.Second)
	reg, err := NewRegistry([]ModelConfig{{Name: "up", Runtime: "openai", UpstreamURL: srv.URL + "/v1", Public: true}})
	if err != nil {
		t.Fatal(err)
	}
	text, took := streamOnce(t, reg.Runtime("up"))
	if text != "Hello there" {
		t.Fatalf("read %q", text)
	}
	if took > drainWait+500*time.Millisecond {
		t.Fatalf("Close took %v with an upstream lingering 1s after [DONE], want about %v", took, drainWait)
	}
	if took < drainWait/2 {
		t.Fatalf("Close took %v: it did not wait for the end of the answer at all", took)
	}
}
