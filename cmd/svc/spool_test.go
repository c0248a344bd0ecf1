package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/poll"
)

// freeAddr returns a loopback address with a port free now, so that a process can be restarted on it;
// never one it returned before (a port let go is often the next one handed out: two servers of one
// test were given the same port).
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, given := freeAddrsGiven.LoadOrStore(addr, true); !given {
			return addr
		}
	}
}

// freeAddrsGiven holds the addresses freeAddr returned.
var freeAddrsGiven sync.Map

// TestSIGKILLedEdgeLosesNoRunsAnsweredBeforeItsLastFlush runs the real binaries: a control plane and an
// edge with a spool folder. With the control plane down, the edge serves from its snapshots under load
// and is SIGKILLed; started again on the same spool, still without a control plane, it serves its
// endpoint again (from the snapshots it saved); once the control plane is back, every request answered
// more than 200 ms before the kill (and every one after the restart) is a run in the store, exactly
// once, and no run is there twice.
func TestSIGKILLedEdgeLosesNoRunsAnsweredBeforeItsLastFlush(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	data, spool := filepath.Join(home, "data"), filepath.Join(home, "spool")
	env := svcEnv(home)
	cpAddr := freeAddr(t)
	api := "http://" + cpAddr
	startCP := func() *devProcess {
		p, _ := startProcess(t, dir, env, apiLine, "server", "--addr", cpAddr, "--data", data)
		return p
	}
	cp := startCP()
	created := runSvc(t, dir, env, "edge-tokens", "create", "edge-1", "--data", data)
	token := strings.TrimSpace(created.stdout)
	edgeAddr := freeAddr(t)
	startEdge := func() *devProcess {
		p, _ := startEdge(t, dir, home, token, api, "--addr", edgeAddr, "--spool-dir", spool, "--max-stale", "5m")
		return p
	}
	edge := startEdge()

	sdk, d, key := multiModelEndpoint(t, api, "spooled")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, edgeAddr)
	}}}
	chat := func(content string) (int, error) {
		req, _ := http.NewRequest("POST", "http://spooled.edge.test/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"`+content+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if st, err := chat("warm"); st != 200 {
		t.Fatalf("through the edge: %d %v\n%s", st, err, edge.stderr.String())
	}
	// The edge saves its snapshot of the endpoint within a second: serving it with the control plane
	// down below needs it.
	saved := regexp.MustCompile(`"slug":"spooled","changeId":\d+,"confirmed":"[^"]*","snapshot":\{`)
	poll.Until(t, 10*time.Second, "the edge's saved snapshot of the endpoint", func() bool {
		b, _ := os.ReadFile(filepath.Join(spool, "snapshots.json"))
		return saved.Match(b)
	})
	if code := cp.interrupt(t); code != 0 {
		t.Fatalf("svc server exited %d", code)
	}

	// Load with the control plane down; the edge is SIGKILLed in the middle of it.
	var mu sync.Mutex
	answered := map[string]time.Time{} // content → when its 200 arrived
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				content := fmt.Sprintf("w%d-%d", w, i)
				if st, err := chat(content); err == nil && st == 200 {
					mu.Lock()
					answered[content] = time.Now()
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond) // on purpose: the load runs a while before the kill
	killedAt := time.Now()
	if err := edge.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-edge.done
	stop.Store(true)
	wg.Wait()
	var must []string
	mu.Lock()
	for content, at := range answered {
		if at.Before(killedAt.Add(-200 * time.Millisecond)) {
			must = append(must, content)
		}
	}
	mu.Unlock()
	if len(must) < 20 {
		t.Fatalf("only %d requests answered before the kill: the load did not run", len(must))
	}

	// Restarted without a control plane, the edge serves the endpoint from what it saved.
	edge = startEdge()
	for i := 0; i < 3; i++ {
		content := fmt.Sprintf("after-%d", i)
		if st, err := chat(content); st != 200 {
			t.Fatalf("the restarted edge, control plane down: %d %v\n%s", st, err, edge.stderr.String())
		}
		must = append(must, content)
	}

	cp = startCP()
	want := map[string]bool{}
	for _, c := range must {
		want[c] = true
	}
	var got map[string]int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got = runsByContent(t, sdk, d.ID)
		missing := 0
		for c := range want {
			if got[c] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs answered more than 200 ms before the kill (or after the restart) never reached the store\nedge stderr:\n%s",
				missing, len(want), edge.stderr.String())
		}
	}
	time.Sleep(500 * time.Millisecond) // a duplicate, if one were coming
	got = runsByContent(t, sdk, d.ID)
	for c, n := range got {
		if n != 1 {
			t.Fatalf("run %q stored %d times", c, n)
		}
		if _, ok := answered[c]; !ok && !want[c] && c != "warm" {
			t.Fatalf("a run nobody asked for: %q", c)
		}
	}
	t.Logf("%d requests answered before the kill, %d of them more than 200 ms before; %d runs stored", len(answered), len(must)-3, len(got))
	if code := edge.interrupt(t); code != 0 {
		t.Fatalf("svc edge exited %d on Ctrl-C", code)
	}
}

// runsByContent counts the runs of a deployment by the content of their user message.
func runsByContent(t *testing.T, sdk *cloudapi.Client, deploymentID string) map[string]int {
	t.Helper()
	ctx := context.Background()
	out := map[string]int{}
	re := regexp.MustCompile(`"content":"([^"]*)"`)
	for cursor := ""; ; {
		page, err := sdk.ListRuns(ctx, deploymentID, cloudapi.ListRunsOptions{Limit: 200, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			run, err := sdk.GetRun(ctx, deploymentID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if m := re.FindSubmatch(run.Request); m != nil {
				out[string(m[1])]++
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// TestEdgeProcessOnAFullSpoolDisk runs the real binaries: `svc edge` with its --spool-dir on a 256 KiB
// tmpfs (mounted for the test: it needs root), filled once the edge runs. Calls are still answered and
// their runs stored (shipped from memory); /readyz says degraded, svc_spool_write_errors_total moves,
// and the log has one line for the failures, not one a seal. Once the disk has room, /readyz is ok.
func TestEdgeProcessOnAFullSpoolDisk(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	spool := filepath.Join(home, "spool")
	if err := os.Mkdir(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", spool).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for the edge's spool (%v: %s); internal/server's TestFullEdgeSpoolDisk* need it too", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", spool).Run() })
	env := svcEnv(home)
	_, api := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", filepath.Join(home, "data"))
	token := strings.TrimSpace(runSvc(t, dir, env, "edge-tokens", "create", "edge-1", "--data", filepath.Join(home, "data")).stdout)
	edge, edgeAddr := startEdge(t, dir, home, token, api, "--addr", "127.0.0.1:0", "--spool-dir", spool)
	sdk, d, key := multiModelEndpoint(t, api, "fulldisk")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, edgeAddr)
	}}}
	var sent []string
	chat := func(content string) {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://fulldisk.edge.test/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"`+content+`"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d\n%s", content, resp.StatusCode, edge.stderr.String())
		}
		sent = append(sent, content)
	}
	ops := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + edgeAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	chat("before")

	filler, err := os.Create(filepath.Join(spool, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4<<10); ; {
		if _, err := filler.Write(chunk); err != nil {
			break // the disk is full
		}
	}
	filler.Close()
	for i := range 6 {
		chat(fmt.Sprintf("full-%d", i))
		time.Sleep(200 * time.Millisecond) // on purpose: a seal (every 150 ms), so a failed append, for each run
	}
	poll.Until(t, 5*time.Second, "/readyz degraded with the spool's disk full", func() bool {
		body := ops("/readyz")
		return strings.Contains(body, `"status":"degraded"`) && strings.Contains(body, `"recorder":"spool write failing"`)
	})
	m := regexp.MustCompile(`(?m)^svc_spool_write_errors_total (\d+)`).FindStringSubmatch(ops("/metrics"))
	if m == nil || m[1] == "0" {
		t.Fatalf("svc_spool_write_errors_total: %v", m)
	}
	if n := strings.Count(edge.stderr.String()+edge.stdout.String(), "writing the spool failed"); n != 1 {
		t.Fatalf("%d log lines for %s failed appends, want 1:\n%s", n, m[1], edge.stderr.String())
	}

	os.Remove(filepath.Join(spool, "filler"))
	chat("room")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		body := ops("/readyz")
		if strings.Contains(body, `"status":"ok"`) && strings.Contains(body, `"recorder":"ok"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the disk has room: %s", body)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got := runsByContent(t, sdk, d.ID)
		missing := 0
		for _, c := range sent {
			if got[c] != 1 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs not stored once: %v", missing, len(sent), got)
		}
	}
	t.Logf("%d runs stored once each; %s appends failed while the disk was full, one log line", len(sent), m[1])
	if code := edge.interrupt(t); code != 0 {
		t.Fatalf("svc edge exited %d on Ctrl-C", code)
	}
}
