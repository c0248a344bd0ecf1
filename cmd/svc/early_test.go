package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestEdgeProcessAnswersBeforeTheBody: an `svc edge` answers a request for an unknown endpoint as soon
// as its headers arrive (the announced body never comes), with Connection: close, and closes the
// connection, as `svc server` does (handlers/edge TestAnswersBeforeTheBody).
func TestEdgeProcessAnswersBeforeTheBody(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	env := svcEnv(home)
	_, api := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", data)
	created := runSvc(t, dir, env, "edge-tokens", "create", "edge-1", "--data", data)
	token := strings.TrimSpace(created.stdout)
	if created.code != 0 {
		t.Fatalf("edge-tokens create: exit %d\n%s", created.code, created.stderr)
	}
	_, edgeAddr := startProcess(t, dir, svcEnv(home, "SVC_EDGE_TOKEN="+token), regexp.MustCompile(`svc edge listening on (\S+)`),
		"edge", "--control-plane", api, "--addr", "127.0.0.1:0", "--endpoint-domain", "edge.test")

	conn, err := net.DialTimeout("tcp", edgeAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: no-such-ep.edge.test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // well below the 60 s body deadline
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body was missing (after %v): %v", time.Since(start), err)
	}
	body, _ := io.ReadAll(resp.Body)
	t.Logf("%d after %v", resp.StatusCode, time.Since(start))
	if resp.StatusCode != 404 || !resp.Close {
		t.Fatalf("status %d, Connection: close %v: %s", resp.StatusCode, resp.Close, body)
	}
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection still open after the answer: read %d, %v", n, err)
	}
}
