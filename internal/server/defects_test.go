package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgeproc"
	"github.com/svcdev/svc/internal/edgewire"
)

// dripped sends head (a request line and headers announcing a 100-byte body) on a fresh connection,
// then drips the body a byte every 100 ms, and returns the answer the listener gives once the body
// deadline passes.
func dripped(t *testing.T, addr, head string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head+"Content-Length: 100\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp *http.Response
		body string
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		a := answer{resp: resp, err: err}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a.body = string(b)
		}
		answers <- a
	}()
	for i := 0; ; i++ {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Fatalf("%q: no answer to a dripped body: %v", head[:strings.IndexByte(head, '\r')], a.err)
			}
			return a.resp, a.body
		case <-time.After(100 * time.Millisecond):
			if i == 40 {
				t.Fatalf("%q: a body dripped for 4 s was never cut", head[:strings.IndexByte(head, '\r')])
			}
			conn.Write([]byte(" "))
		}
	}
}

// TestDrippedBodiesAre408OnEveryListener: a body that does not arrive within the body deadline is
// answered 408, in the error shape of the surface it was sent to, on svc server and svc edge alike;
// never 200 with an empty body (the edge did that) nor 400.
func TestDrippedBodiesAre408OnEveryListener(t *testing.T) {
	// The control plane starts with its body deadline: a restart would leave the SDK's and the edge's
	// kept-alive connections pointing at the stopped one (the cause of a flake).
	c := newCluster(t, func(cfg *Config) { cfg.BodyReadTimeout = 500 * time.Millisecond })
	d, key := c.deploy("drip", "fixed_api_key")
	e := c.edge("", func(cfg *edgeproc.Config) { cfg.BodyReadTimeout = 500 * time.Millisecond })
	within(t, e, "drip", key, 200, 5*time.Second, "edge warm")

	chat := func(host, path string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key + "\r\nContent-Type: application/json\r\n"
	}
	openAIShape := func(t *testing.T, body string) {
		var env struct {
			Error struct{ Type, Code, Message string } `json:"error"`
		}
		if json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != "request_timeout" || env.Error.Message == "" {
			t.Fatalf("not OpenAI's error shape with code request_timeout: %q", body)
		}
	}
	anthropicShape := func(t *testing.T, body string) {
		var env struct {
			Type  string                         `json:"type"`
			Error struct{ Type, Message string } `json:"error"`
		}
		if json.Unmarshal([]byte(body), &env) != nil || env.Type != "error" || env.Error.Type == "" || env.Error.Message == "" {
			t.Fatalf("not Anthropic's error shape: %q", body)
		}
	}
	cpHost := strings.TrimPrefix(c.cp.BaseURL, "http://")
	cases := []struct {
		name, addr, head string
		shape            func(*testing.T, string)
	}{
		{"edge of svc server, chat", c.cp.Addr.String(), chat("drip."+c.cp.EndpointDomain, "/v1/chat/completions"), openAIShape},
		{"edge of svc server, messages (path form)", c.cp.Addr.String(), chat(cpHost, "/e/drip/v1/messages"), anthropicShape},
		{"svc edge, chat", e.Addr.String(), chat("drip."+edgeDomain, "/v1/chat/completions"), openAIShape},
		{"svc edge, messages", e.Addr.String(), chat("drip."+edgeDomain, "/v1/messages"), anthropicShape},
		{"internal API, run batch", c.cp.Addr.String(), "POST " + edgewire.RunsPath + " HTTP/1.1\r\nHost: " + cpHost + "\r\nAuthorization: Bearer " + c.token + "\r\n",
			func(t *testing.T, body string) { envelope(t, body) }},
		{"OAuth token endpoint", c.cp.Addr.String(), "POST /oauth/token HTTP/1.1\r\nHost: " + cpHost + "\r\nContent-Type: application/x-www-form-urlencoded\r\n",
			func(t *testing.T, body string) {
				var env struct {
					Error            string `json:"error"`
					ErrorDescription string `json:"error_description"`
				}
				if json.Unmarshal([]byte(body), &env) != nil || env.Error != "invalid_request" || env.ErrorDescription == "" {
					t.Fatalf("not RFC 6749's error shape: %q", body)
				}
			}},
		{"OAuth sign-in form", c.cp.Addr.String(), "POST /oauth/authorize HTTP/1.1\r\nHost: " + cpHost + "\r\nContent-Type: application/x-www-form-urlencoded\r\n",
			func(t *testing.T, body string) {
				if !strings.Contains(body, "did not arrive in time") {
					t.Fatalf("the sign-in page does not say what happened: %q", body)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := dripped(t, tc.addr, tc.head)
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("dripped body: %d %q; want 408", resp.StatusCode, body)
			}
			if !resp.Close {
				t.Errorf("a 408 must close the connection (the rest of the body is on its way); headers %v", resp.Header)
			}
			tc.shape(t, body)
		})
	}

	// The runs of the cut requests say 408, not 499 (a client that went away).
	c.cp.Flush()
	for _, ed := range []*edgeproc.Edge{e} {
		if got := edgeMetric(t, ed, `svc_edge_requests_total{code="408",deployment="drip",route="/v1/chat/completions"}`); got != 1 {
			t.Errorf("svc edge counted %v chat requests as 408, want 1", got)
		}
	}
	resp, text := fetch(t, "GET", c.cp.BaseURL+"/metrics", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(text, `svc_edge_requests_total{code="408",deployment="drip",route="/v1/chat/completions"} 1`) ||
		strings.Contains(text, `code="499"`) {
		t.Errorf("svc server metrics do not count the dripped chat request as 408")
	}
	waitRunStatuses(t, c, d.ID, 4)
}

// waitRunStatuses waits for n failed runs of the deployment and checks that each recorded the 408.
func waitRunStatuses(t *testing.T, c *cluster, deploymentID string, n int) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := c.sdk.ListRuns(ctx, deploymentID, cloudapi.ListRunsOptions{Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		failed := 0
		for _, r := range page.Runs {
			if r.Status != "error" {
				continue
			}
			failed++
			run, err := c.sdk.GetRun(ctx, deploymentID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(run.Response), "did not arrive in time") {
				t.Fatalf("run %s of a dripped body recorded %s", r.ID, run.Response)
			}
		}
		if failed == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d failed runs, want %d", failed, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOversizedAPIBodiesGetAReadable413: a management API body over 1 MiB sent without "Expect:
// 100-continue" by a client that writes it all before reading (as simple clients do) gets the 413 in
// the envelope, not a connection reset; so does one that reads while it writes a much larger body.
func TestOversizedAPIBodiesGetAReadable413(t *testing.T) {
	srv, sdk := started(t, Config{})
	head := func(length string) string {
		return "POST /v1/orgs/" + sdk.OrgSlug + "/projects/" + sdk.ProjectSlug + "/deployments HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " +
			sdk.Token + "\r\nContent-Type: application/json\r\n" + length + "\r\n"
	}
	chunked := func(n int) string {
		chunk := strings.Repeat("x", 64<<10)
		var b strings.Builder
		for i := 0; i < n/len(chunk); i++ {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(chunk), chunk)
		}
		b.WriteString("0\r\n\r\n")
		return b.String()
	}
	for _, tc := range []struct {
		name, head, body string
		concurrent       bool
	}{
		{"10 MiB, written whole first", head("Content-Length: " + fmt.Sprint(10<<20) + "\r\n"), strings.Repeat("x", 10<<20), false},
		{"10 MiB chunked, written whole first", head("Transfer-Encoding: chunked\r\n"), chunked(10 << 20), false},
		{"40 MiB, read while writing", head("Content-Length: " + fmt.Sprint(40<<20) + "\r\n"), strings.Repeat("x", 40<<20), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			written := make(chan error, 1)
			go func() {
				_, err := io.WriteString(conn, tc.head+tc.body)
				written <- err
			}()
			if !tc.concurrent {
				if err := <-written; err != nil {
					t.Fatalf("writing the body: %v (the server reset the connection)", err)
				}
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no readable answer: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("the answer was cut: %v", err)
			}
			if resp.StatusCode != 413 || envelope(t, string(b)).Code != "body_too_large" {
				t.Fatalf("%d %s; want 413 body_too_large", resp.StatusCode, b)
			}
		})
	}
}

// TestTrailingDotHostsAreServed: "slug.domain." (a fully qualified name, as some clients and resolvers
// send it) reaches the endpoint on svc server and on svc edge, with or without a port.
func TestTrailingDotHostsAreServed(t *testing.T) {
	c := newCluster(t)
	c.deploy("fqdn", "none")
	e := c.edge("", nil)
	cpPort := c.cp.Addr.(*net.TCPAddr).Port
	for _, tc := range []struct{ name, addr, host string }{
		{"svc server", c.cp.Addr.String(), fmt.Sprintf("fqdn.localhost.:%d", cpPort)},
		{"svc edge", e.Addr.String(), "fqdn." + edgeDomain + "."},
		{"svc edge, with a port", e.Addr.String(), "fqdn." + edgeDomain + ".:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deadline := time.Now().Add(5 * time.Second)
			for {
				const msg = `{"messages":[{"role":"user","content":"hi"}]}`
				status, _, body := rawTo(t, tc.addr, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n"+
					"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tc.host, len(msg), msg))
				if status == 200 && strings.Contains(body, "chat.completion") {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("Host %s: %d %s", tc.host, status, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// rawTo sends bytes to addr on a fresh connection and returns the status, headers and body.
func rawTo(t *testing.T, addr, request string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
