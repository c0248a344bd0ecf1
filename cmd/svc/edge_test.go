package main

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// startProcess starts the svc binary and waits until its stdout matches ready; it returns the process
// and the first submatch.
func startProcess(t *testing.T, dir string, env []string, ready *regexp.Regexp, args ...string) (*devProcess, string) {
	t.Helper()
	cmd := exec.Command(svcBin, args...)
	cmd.Dir, cmd.Env = dir, env
	p := &devProcess{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		if m := ready.FindStringSubmatch(p.stdout.String()); m != nil {
			return p, m[1]
		}
		select {
		case err := <-p.done:
			t.Fatalf("svc %s exited early (%v)\nstdout:\n%s\nstderr:\n%s", args[0], err, p.stdout.String(), p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc %s did not start:\n%s\nstderr:\n%s", args[0], p.stdout.String(), p.stderr.String())
		}
	}
}

// edgeReady matches the line svc edge prints once it listens; its group is the address.
var edgeReady = regexp.MustCompile(`svc edge listening on (\S+)`)

// startEdge starts `svc edge` in front of the control plane at api, for *.edge.test, with token in its
// environment (SVC_EDGE_TOKEN) and args after those; it returns once the edge listens, with its address.
func startEdge(t *testing.T, dir, home, token, api string, args ...string) (*devProcess, string) {
	t.Helper()
	return startProcess(t, dir, svcEnv(home, "SVC_EDGE_TOKEN="+token), edgeReady,
		append([]string{"edge", "--control-plane", api, "--endpoint-domain", "edge.test"}, args...)...)
}

// TestEdgeProcessInFrontOfServerProcess runs the real binaries: `svc server`, `svc edge-tokens create`
// on its data folder, and `svc edge` with the token in its environment. The edge serves an endpoint
// made through the server, refuses its key within a second of the revoke, ships its runs when it is
// stopped with Ctrl-C (exit 0), and never prints the token.
func TestEdgeProcessInFrontOfServerProcess(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	env := svcEnv(home)
	_, api := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", data)

	created := runSvc(t, dir, env, "edge-tokens", "create", "edge-1", "--data", data)
	token := strings.TrimSpace(created.stdout)
	if created.code != 0 || !strings.HasPrefix(token, "svc-edge-") {
		t.Fatalf("edge-tokens create: exit %d\n%s%s", created.code, created.stdout, created.stderr)
	}
	if r := runSvc(t, dir, env, "edge", "--control-plane", api); r.code != 2 || !strings.Contains(r.stderr, "SVC_EDGE_TOKEN") {
		t.Fatalf("svc edge without a token: exit %d\n%s", r.code, r.stderr)
	}
	edge, edgeAddr := startProcess(t, dir, svcEnv(home, "EDGE_SECRET="+token), regexp.MustCompile(`svc edge listening on (\S+)`),
		"edge", "--control-plane", api, "--edge-token-env", "EDGE_SECRET", "--addr", "127.0.0.1:0", "--endpoint-domain", "edge.test",
		"--log-level", "debug", "--max-stale", "1m")

	ctx := context.Background()
	sdk, err := cloudapi.New(api, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "far", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, edgeAddr)
	}}}
	served := 0 // answers of 200: each is a run
	chat := func() int {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://far.edge.test/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			served++
		}
		return resp.StatusCode
	}
	for i := 0; i < 3; i++ {
		if st := chat(); st != 200 {
			t.Fatalf("call %d through the edge: %d\nedge stderr:\n%s", i, st, edge.stderr.String())
		}
	}
	if resp, err := http.Get("http://" + edgeAddr + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("edge /readyz: %v %v", resp, err)
	}
	if _, err := sdk.RevokeDeploymentKey(ctx, d.ID, key.Key.ID); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); chat() != 401; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > time.Second {
			t.Fatal("the edge process still takes the revoked key after 1 s")
		}
	}

	if code := edge.interrupt(t); code != 0 {
		t.Fatalf("svc edge exited %d on Ctrl-C\n%s", code, edge.stderr.String())
	}
	page, err := sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
	if err != nil || len(page.Runs) != served {
		t.Fatalf("runs on the control plane after the edge stopped: %+v %v; want %d", page, err, served)
	}
	if strings.Contains(edge.stdout.String()+edge.stderr.String(), token) || strings.Contains(edge.stderr.String(), key.Plaintext) {
		t.Fatal("the edge printed a secret")
	}
	if r := runSvc(t, dir, env, "edge-tokens", "list", "--data", data); r.code != 0 || !strings.Contains(r.stdout, "edge-1") {
		t.Fatalf("edge-tokens list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
