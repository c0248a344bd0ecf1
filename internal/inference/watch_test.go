package inference

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const goodChunk = `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"ok"}}]}` + "\n\n"

// healthyUpstream answers every stream in full and /health; it counts the streams it answered.
func healthyUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return // /health, /metrics
		}
		n.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, goodChunk+"data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// hangingListener accepts connections and never answers on them (nor on /health).
func hangingListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

func registryOf(t *testing.T, m ModelConfig) Runtime {
	t.Helper()
	reg, err := NewRegistry([]ModelConfig{m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg.Runtime(m.Name)
}

// readStream reads a stream to its end and returns its text and the error that ended it (nil for a
// stream that ended with its last event).
func readStream(st Stream) (string, error) {
	defer st.Close()
	text := ""
	for {
		ch, err := st.Next()
		if err == io.EOF {
			return text, nil
		}
		if err != nil {
			return text, err
		}
		for _, c := range ch.Choices {
			text += c.Content
		}
	}
}

func wantTimeout(t *testing.T, err error, what string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusGatewayTimeout || e.Code != CodeUpstreamTimeout || !strings.Contains(e.Message, what) {
		t.Fatalf("err %v, want 504 upstream_timeout saying %q", err, what)
	}
}

// An upstream that accepts a streamed call and never answers is given up after firstByteTimeoutMs,
// not the whole-call timeoutMs; one that sends its headers (and a first event) and then nothing, or a
// byte now and then slower than idleTimeoutMs, is ended after idleTimeoutMs of silence: 504
// upstream_timeout, after what the caller already got.
func TestUpstreamTimeBounds(t *testing.T) {
	hang := hangingListener(t)
	rt := registryOf(t, ModelConfig{Name: "hang", Runtime: RuntimeOpenAI, UpstreamURL: hang + "/v1", FirstByteTimeoutMs: 200, IdleTimeoutMs: 5000})
	t0 := time.Now()
	_, err := rt.Stream(context.Background(), fleetCall("s", 1, true))
	wantTimeout(t, err, "no answer within 200ms")
	if took := time.Since(t0); took > 3*time.Second {
		t.Fatalf("gave up after %v, want about 200ms", took)
	}

	for name, trickle := range map[string]time.Duration{"headers then silence": time.Hour, "a byte every 600ms": 600 * time.Millisecond} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, goodChunk)
			w.(http.Flusher).Flush()
			for range 20 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(trickle):
				}
				io.WriteString(w, ":")
				w.(http.Flusher).Flush()
			}
		}))
		rt := registryOf(t, ModelConfig{Name: "slow", Runtime: RuntimeOpenAI, UpstreamURL: srv.URL + "/v1", FirstByteTimeoutMs: 1000, IdleTimeoutMs: 300})
		st, err := rt.Stream(context.Background(), fleetCall("s", 1, true))
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		text, err := readStream(st)
		if text != "ok" {
			t.Errorf("%s: read %q before the end", name, text)
		}
		wantTimeout(t, err, "nothing sent for 300ms")
		if took := time.Since(t0); took > 3*time.Second {
			t.Errorf("%s: ended after %v, want about 300ms", name, took)
		}
		srv.CloseClientConnections()
		srv.Close()
	}
}

// A replica that hangs after accepting, and one that answers 200 and then cuts its answer, are ejected
// at their first failure while the healthy replica takes the calls: the hanging one's calls are
// retried on the healthy one (nothing reached the caller), the cut one's are not (the caller has part
// of the answer) but the replica takes no further call while it is out.
func TestReplicaThatHangsOrCutsIsEjected(t *testing.T) {
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return // /health: it looks healthy, only its answers show it is not
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, goodChunk)
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // mid-answer
	}))
	t.Cleanup(cut.Close)
	for name, bad := range map[string]string{"hangs": hangingListener(t), "cuts": cut.URL} {
		good, answered := healthyUpstream(t)
		rt := registryOf(t, ModelConfig{Name: "fleet", Runtime: RuntimeOpenAI, Routing: "round-robin", FirstByteTimeoutMs: 300,
			Replicas: &Replicas{URLs: []string{bad + "/v1", good.URL + "/v1"}}})
		o := rt.(*openAI)
		failed := 0
		const calls = 10
		for range calls {
			st, err := rt.Stream(context.Background(), fleetCall("s", 1, true))
			if err == nil {
				_, err = readStream(st)
			}
			if err != nil {
				failed++
			}
		}
		var ejections uint64
		for _, s := range o.fleet.States() {
			if strings.HasPrefix(bad, "http://"+s.Addr) {
				ejections = s.Ejections
			}
		}
		wantFailed := map[string]int{"hangs": 0, "cuts": 1}[name]
		if failed != wantFailed || ejections < 1 || answered.Load() != calls-int64(wantFailed) {
			t.Errorf("a replica that %s: %d of %d calls failed (want %d), %d ejections (want >= 1), the healthy replica answered %d",
				name, failed, calls, wantFailed, ejections, answered.Load())
		}
	}
}
