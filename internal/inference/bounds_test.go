package inference

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svcdev/svc/internal/sse"
)

// hostileUpstream serves a stream that starts with one good chunk and then sends what send writes; it
// counts the bytes send wrote.
func hostileUpstream(t *testing.T, send func(w io.Writer, flush func()) int64) (*httptest.Server, *atomic.Int64) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"ok"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		sent.Store(send(w, w.(http.Flusher).Flush))
	}))
	t.Cleanup(srv.Close)
	return srv, &sent
}

func hostileStream(t *testing.T, url string) Stream {
	t.Helper()
	reg, err := NewRegistry([]ModelConfig{{Name: "up", Runtime: "openai", UpstreamURL: url + "/v1", Public: true}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := reg.Runtime("up").Stream(context.Background(), &Call{Model: "up", Served: "up", Stream: true,
		Body: map[string]json.RawMessage{"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// An upstream that streams a line without end (a crashed server, a proxy's error page) ends the stream
// with a 502 upstream_error once the line passes sse.MaxLine, having read little more than that: it
// is not held whole.
func TestStreamLineBound(t *testing.T) {
	srv, sent := hostileUpstream(t, func(w io.Writer, flush func()) int64 {
		n, _ := io.WriteString(w, "data: ")
		block := []byte(strings.Repeat("B", 64<<10))
		total := int64(n)
		for total < 256<<20 { // 256 MiB at most: the edge must stop long before
			m, err := w.Write(block)
			total += int64(m)
			if err != nil {
				break
			}
		}
		return total
	})
	st := hostileStream(t, srv.URL)
	defer st.Close()
	if ch, err := st.Next(); err != nil || ch.Choices[0].Content != "ok" {
		t.Fatalf("first chunk: %v", err)
	}
	_, err := st.Next()
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusBadGateway || e.Code != CodeUpstreamError || !strings.Contains(e.Message, "longer than 16 MiB") {
		t.Fatalf("an endless line: %v, want a 502 upstream_error naming the bound", err)
	}
	st.Close()
	srv.CloseClientConnections()
	srv.Close() // waits for the handler, whose write fails once the edge has gone
	if n := sent.Load(); n > sse.MaxLine+16<<20 {
		t.Fatalf("the upstream wrote %d MiB before the stream ended; the bound is %d MiB", n>>20, sse.MaxLine>>20)
	}
}
