package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/poll"
)

// slowModels serves a simulated model whose answers stream for well over a second.
const slowModels = `models:
  - name: sim-slow
    runtime: simulator
    public: true
    default: true
    simulator: {mode: lorem, loremTokens: 40, ttftMs: 10, itlMs: 40}
`

func startGuarded(t *testing.T, cfg Config) *Server {
	t.Helper()
	dir := t.TempDir()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", filepath.Join(dir, "data")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.ModelsFile == "" {
		cfg.ModelsFile = filepath.Join(dir, "models.yaml")
		if err := os.WriteFile(cfg.ModelsFile, []byte(slowModels), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// raw sends bytes on a fresh connection and returns the status and body of the answer.
func raw(t *testing.T, srv *Server, request string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Addr.String())
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
		t.Fatalf("reading the answer to %q: %v", request[:min(len(request), 40)], err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// envelope reads the API's error envelope.
func envelope(t *testing.T, body string) cloudapi.ErrorBody {
	t.Helper()
	var env struct {
		Error cloudapi.ErrorBody `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("not the API's error envelope: %q", body)
	}
	return env.Error
}

func TestGoHTTPErrorsComeInTheAPIEnvelope(t *testing.T) {
	srv := startGuarded(t, Config{})
	cases := []struct {
		name, request string
		status        int
		code          string
	}{
		{"control character in a header", "GET /v1/me HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer a\x01b\r\n\r\n", 400, "invalid_request"},
		{"header line without a colon", "GET /v1/me HTTP/1.1\r\nHost: localhost\r\nnonsense\r\n\r\n", 400, "invalid_request"},
		{"missing Host in HTTP/1.1", "GET /v1/me HTTP/1.1\r\n\r\n", 400, "invalid_request"},
		{"empty Host", "GET /v1/me HTTP/1.1\r\nHost:\r\n\r\n", 400, "invalid_request"},
		{"HTTP/1.0 without Host", "GET /v1/me HTTP/1.0\r\n\r\n", 400, "invalid_request"},
		{"huge header", "GET /v1/me HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("a", 200<<10) + "\r\n\r\n", 431, "header_too_large"},
		{"unknown HTTP version", "GET /v1/me HTTP/2.5\r\nHost: localhost\r\n\r\n", 505, "http_version_not_supported"},
		{"unknown transfer encoding", "POST /v1/me HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := raw(t, srv, tc.request)
			e := envelope(t, body)
			if status != tc.status || e.Status != tc.status || e.Code != tc.code || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %s %q (%s), want %d %s", status, e.Code, e.Message, hdr.Get("Content-Type"), tc.status, tc.code)
			}
		})
	}
	// A good request on the same listener is untouched.
	if status, _, body := raw(t, srv, "GET /v1/me HTTP/1.1\r\nHost: localhost\r\n\r\n"); status != 401 || envelope(t, body).Code != "unauthorized" {
		t.Fatalf("plain request: %d %s", status, body)
	}
}

func TestSlowBodiesAreCutButLongAnswersStream(t *testing.T) {
	srv := startGuarded(t, Config{BodyReadTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	c, err := cloudapi.New(srv.BaseURL, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "slow", AuthMode: "none", Target: cloudapi.Target{Kind: "multi_model"}}); err != nil {
		t.Fatal(err)
	}

	// A body dripped one byte at a time is cut once the body deadline passes: 408 in the envelope.
	conn, err := net.Dial("tcp", srv.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/orgs/%s/projects/%s/deployments HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n", c.OrgSlug, c.ProjectSlug, c.Token)
	type answer struct {
		status int
		body   string
		err    error
		after  time.Duration
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		a := answer{err: err, after: time.Since(start)}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a.status, a.body = resp.StatusCode, string(b)
		}
		answers <- a
	}()
	var a answer
drip:
	for i := 0; ; i++ {
		select {
		case a = <-answers:
			break drip
		case <-time.After(100 * time.Millisecond):
			if i == 40 {
				t.Fatal("a body dripped for 4 s was never cut")
			}
			conn.Write([]byte(" "))
		}
	}
	if a.err != nil || a.status != http.StatusRequestTimeout || envelope(t, a.body).Code != "request_timeout" || a.after > 3*time.Second {
		t.Fatalf("dripped body: %d %q %v after %v; want 408 request_timeout within 3 s", a.status, a.body, a.err, a.after)
	}

	// An answer that streams for longer than the body deadline runs to its end.
	req, _ := http.NewRequest("POST", srv.BaseURL+"/e/slow/v1/chat/completions",
		strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	all, err := io.ReadAll(resp.Body)
	took := time.Since(began)
	if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(strings.TrimSpace(string(all)), "data: [DONE]") {
		t.Fatalf("stream: %d %v, ends %q", resp.StatusCode, err, string(all)[max(0, len(all)-40):])
	}
	if took < 3*500*time.Millisecond {
		t.Fatalf("the stream took %v: too short to show that the body deadline spares it", took)
	}
}

func TestConnectionsPerAddressAreCapped(t *testing.T) {
	srv := startGuarded(t, Config{MaxConnsPerAddr: 3})
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", srv.Addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Once the server has accepted the three, a fourth is refused.
	var status int
	var hdr http.Header
	var body string
	poll.Until(t, 5*time.Second, "a fourth connection refused", func() bool {
		status, hdr, body = raw(t, srv, "GET /v1/me HTTP/1.1\r\nHost: localhost\r\n\r\n")
		return status == 429
	})
	if envelope(t, body).Code != "too_many_requests" || hdr.Get("Retry-After") == "" {
		t.Fatalf("fourth connection: %d %s", status, body)
	}
	// Closing one makes room again.
	held[0].Close()
	poll.Until(t, 5*time.Second, "a connection served once one of the three closed", func() bool {
		status, _, _ := raw(t, srv, "GET /v1/me HTTP/1.1\r\nHost: localhost\r\n\r\n")
		return status == 401
	})
}
