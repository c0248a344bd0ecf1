package bodydeadline

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestDrippedBodyIsCutButLongAnswersAreNot(t *testing.T) {
	h := Wrap(300*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body too slow", http.StatusRequestTimeout)
			return
		}
		// After the body, an answer that takes longer than the deadline, flushed in pieces.
		for i := 0; i < 6; i++ {
			io.WriteString(w, "tick\n")
			http.NewResponseController(w).Flush()
			time.Sleep(150 * time.Millisecond)
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("a whole body"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || strings.Count(string(b), "tick") != 6 {
		t.Fatalf("a 900 ms answer after a prompt body was cut: %v %q", err, b)
	}

	// A client that sends its headers and then drips the body, a byte every 200 ms.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	start := time.Now()
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		done <- string(b)
	}()
	for i := 0; i < 20; i++ {
		if _, err := conn.Write([]byte("x")); err != nil {
			break
		}
		select {
		case out := <-done:
			if !strings.Contains(out, "408") || time.Since(start) > 2*time.Second {
				t.Fatalf("dripped body: %q after %v", out, time.Since(start))
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatal("a body dripped for 4 s was never cut")
}
