package edge_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// TestAnswersBeforeTheBody sends headers that announce a body and then sends nothing: an
// answer the headers alone decide (unknown or disabled endpoint, wrong key, wrong method) must come
// back while the body is still missing, with "Connection: close", and the server must then close the
// connection rather than wait for a body it will not read. Before, the client waited for the
// listener's body deadline (60 s). A call with the right key is the control: it waits for its body.
func TestAnswersBeforeTheBody(t *testing.T) {
	e := newEnv(t)
	_, key := e.deploy("early-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	dis, disKey := e.deploy("early-off", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	off := false
	e.update(dis.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off})

	addr := e.srv.Addr.String()
	cases := []struct {
		name, method, path, key string
		status                  int
	}{
		{"unknown slug", "POST", "/e/no-such-early/v1/chat/completions", "", 404},
		{"disabled endpoint", "POST", "/e/early-off/v1/chat/completions", disKey, 404},
		{"wrong key", "POST", "/e/early-ep/v1/chat/completions", "sk-wrong", 401},
		{"missing key", "POST", "/e/early-ep/v1/messages", "", 401},
		{"wrong method", "GET", "/e/early-ep/v1/chat/completions", key, 405},
		{"unknown route", "POST", "/e/early-ep/v1/chat/completion", key, 404},
	}
	// Announced bodies of 1000 bytes and of 300 KiB (which net/http itself never drains).
	for _, n := range []int{1000, 300 << 10} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s, %d bytes announced", c.name, n), func(t *testing.T) {
				conn, br := rawRequest(t, addr, c.method, c.path, c.key, n)
				start := time.Now()
				// Bounded well below the 60 s body deadline: an answer within it came without the body.
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("no answer while the body was missing (after %v): %v", time.Since(start), err)
				}
				t.Logf("%d after %v", resp.StatusCode, time.Since(start))
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != c.status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
				}
				if !resp.Close { // set by a "Connection: close" header (which ReadResponse then removes)
					t.Fatal("no Connection: close on the answer")
				}
				// The server closes its end without waiting for the body.
				if got, err := br.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("connection still open after the answer: read %d, %v", got, err)
				}
			})
		}
	}

	// A client that sends its whole body at once (as SDKs do) still reads the refusal, whatever the
	// body's size: the connection is not reset under an answer it has not read.
	for _, size := range []int{1 << 10, 100 << 10, 200 << 10, 255 << 10, 256 << 10, 1 << 20} {
		t.Run(fmt.Sprintf("wrong key, %d KiB sent at once", size>>10), func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", size) + `"}]}`
			for i := 0; i < 5; i++ {
				req, _ := http.NewRequest("POST", "http://early-ep."+e.srv.EndpointDomain+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk-wrong")
				resp, err := e.client.Do(req)
				if err != nil {
					t.Fatalf("try %d: %v", i, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 401 || !strings.Contains(string(b), "invalid_api_key") {
					t.Fatalf("try %d: %d %s", i, resp.StatusCode, b)
				}
			}
		})
	}

	t.Run("right key waits for its body", func(t *testing.T) {
		conn, br := rawRequest(t, addr, "POST", "/e/early-ep/v1/chat/completions", key, 1000)
		conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("answered before the body of an accepted call arrived")
		}
		body := `{"messages":[{"role":"user","content":"hi"}]}`
		body += strings.Repeat(" ", 1000-len(body))
		if _, err := io.WriteString(conn, body); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("status %d, close %v: %s", resp.StatusCode, resp.Close, b)
		}
	})
}

// rawRequest opens a loopback connection and sends the headers of a request announcing a body of n
// bytes, and no body.
func rawRequest(t *testing.T, addr, method, path, key string, n int) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	auth := ""
	if key != "" {
		auth = "Authorization: Bearer " + key + "\r\n"
	}
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", method, path, addr, auth, n)
	return conn, bufio.NewReader(conn)
}
