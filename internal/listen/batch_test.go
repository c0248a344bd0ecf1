package listen

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svcdev/svc/internal/sse"
)

// countingListener counts the writes of every connection it accepted.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// A stream's batch of large events (a Responses stream's response.created and .in_progress, 5 KB each
// with an agent's tools) leaves the server in one write of the socket, not one per 4 KiB Go's server
// buffers; an event written with more to follow and no flush after it leaves when the handler ends;
// the connection then serves its next request as usual.
func TestAStreamsBatchLeavesInOneWrite(t *testing.T) {
	big := strings.Repeat("x", 5000)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := sse.NewWriter(w)
		if r.URL.Query().Get("batch") != "off" {
			out.Batch = sse.BatchOf(r)
		}
		out.Event([]byte("response.created"), []byte(`"`+big+`"`), true)
		out.Event([]byte("response.in_progress"), []byte(`"`+big+`"`), true)
		out.Event([]byte("response.output_item.added"), []byte(`{}`), false)
		out.Event([]byte("response.completed"), []byte(`"`+big+`"`), true) // as relay does with the last event
		out.Unhold()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingListener{Listener: ln}
	srv := NewHTTPServer(handler, 0, slog.New(slog.DiscardHandler))
	go srv.Serve(NewGuardedListener(counted, 0, nil))
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	get := func(query string) (events []string, writes int64) {
		t.Helper()
		before := counted.writes.Load()
		if _, err := io.WriteString(conn, "GET /?"+query+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				events = append(events, name)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && data != `{}` && data != `"`+big+`"` {
				t.Errorf("event data %.40q... is not what was written", data)
			}
		}
		return events, counted.writes.Load() - before
	}
	want := "response.created response.in_progress response.output_item.added response.completed"
	for _, query := range []string{"batch=on", "batch=on", "batch=off"} {
		events, writes := get(query)
		if strings.Join(events, " ") != want {
			t.Fatalf("%s: events %v, want %s", query, events, want)
		}
		t.Logf("%s: %d writes", query, writes)
		// Held: the first batch (headers included) in one write, the last event when the handler
		// ends, the end of the chunked answer after it. Not held: 3 writes for the first batch alone.
		if query == "batch=on" && writes > 3 {
			t.Errorf("the answer left in %d writes, want 3", writes)
		}
		if query == "batch=off" && writes <= 3 {
			t.Errorf("without a batcher the answer left in %d writes: the test no longer tells", writes)
		}
	}
}
