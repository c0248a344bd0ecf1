package studio

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDrippedBodiesAre408: a body that does not arrive within the body deadline is answered 408 (and
// the connection closed), in JSON for programmatic callers and as the error fragment for htmx, never as a
// 400 about invalid JSON or empty fields.
func TestDrippedBodiesAre408(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BodyReadTimeout = 400 * time.Millisecond })
	h.writeCreds("user")
	h.writeState()
	for _, tc := range []struct{ name, contentType, extra, drip string }{
		{"JSON", "application/json", "", " "},
		{"htmx form", "application/x-www-form-urlencoded", "HX-Request: true\r\n", "s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", h.host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(conn, "POST /api/deployments HTTP/1.1\r\nHost: "+h.host+"\r\n"+csrfHeader+": "+h.studio.CSRFToken()+"\r\n"+
				"Content-Type: "+tc.contentType+"\r\n"+tc.extra+"Content-Length: 100\r\n\r\n")
			answers := make(chan *http.Response, 1)
			var body string
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					body = string(b)
				}
				answers <- resp
			}()
			var resp *http.Response
			for i := 0; resp == nil; i++ {
				select {
				case resp = <-answers:
				case <-time.After(100 * time.Millisecond):
					if i == 40 {
						t.Fatal("a body dripped for 4 s was never cut")
					}
					conn.Write([]byte(tc.drip))
				}
			}
			status := resp.StatusCode
			if s := resp.Header.Get(svcStatus); s != "" { // htmx gets its error fragment with 200 and the status here
				status, _ = strconv.Atoi(s)
			}
			if status != http.StatusRequestTimeout || !resp.Close {
				t.Fatalf("dripped body: %d (close %v) %q; want 408 and the connection closed", status, resp.Close, body)
			}
			if tc.contentType == "application/json" {
				var env envelope
				if json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != "request_timeout" {
					t.Fatalf("not the envelope with request_timeout: %q", body)
				}
			} else if !strings.Contains(body, "did not arrive in time") {
				t.Fatalf("the htmx alert does not say what happened: %q", body)
			}
		})
	}
}
