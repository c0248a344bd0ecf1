package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// fakeReplicaEnv, when set to an address, makes the test binary a fake vLLM replica listening there
// (TestMain): a process of its own, which a test can SIGKILL and start again on the same address.
const fakeReplicaEnv = "SVC_TEST_FAKE_VLLM_ADDR"

func serveFakeReplica(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("replica listening on", ln.Addr())
	srv := &http.Server{Handler: mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: time.Microsecond,
		ITL: 2 * time.Millisecond, Tokens: 6}), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, srv.Serve(ln))
	os.Exit(1)
}

// startReplica starts a fake vLLM replica process on addr and waits until it listens.
func startReplica(t *testing.T, addr string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fakeReplicaEnv+"="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "replica listening") {
		t.Fatalf("replica on %s did not start: %q %v", addr, line, err)
	}
	go io.Copy(io.Discard, out)
	return cmd
}

// fleetMetric reads a fleet gauge or counter of one replica from a /metrics page (-1 when absent),
// summed over its other labels (the picks' reasons).
func fleetMetric(url, name, replica string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum, found := 0.0, false
	for _, m := range regexp.MustCompile(`(?m)^`+name+`\{([^}]*)\} (\S+)$`).FindAllSubmatch(b, -1) {
		if strings.Contains(string(m[1]), `replica="`+replica+`"`) {
			v, _ := strconv.ParseFloat(string(m[2]), 64)
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return sum
}

// TestFleetReplicaSIGKILLedUnderLoad runs the real binaries: three fake vLLM replicas, each a process
// of its own, a control plane and two `svc edge` processes, all three routing one model over the
// replicas with their own pickers (the models file's replicas, routing affinity). Under a bounded load
// of streamed calls through both edges, one replica is SIGKILLed, then started again on its address
// 2 s later: no call fails that had not begun its answer (a call cut mid-stream by the kill may); each
// edge takes the replica out within 1 s of the kill (healthy 0, no more picks) and back within 3 s of
// its restart (healthy 1, picked again); the runs of the calls retried elsewhere name it in retriedFrom.
func TestFleetReplicaSIGKILLedUnderLoad(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	var addrs, urls []string
	var replicas []*exec.Cmd
	for range 3 {
		addr := freeAddr(t)
		replicas = append(replicas, startReplica(t, addr))
		addrs, urls = append(addrs, addr), append(urls, "http://"+addr+"/v1")
	}
	api, edges := fleetProcesses(t, dir, home, data, urls, "")
	sdk, d, key := multiModelEndpoint(t, api, "fleet")
	for _, addr := range edges {
		waitReadyz(t, addr)
	}

	type outcome struct {
		begun, ok bool
		err       string
	}
	// call sends one streamed chat completion through an edge: begun once the answer's first byte
	// arrived with status 200, ok once it ended with [DONE].
	call := func(client *http.Client, content string) outcome {
		body := `{"model":"fleet","stream":true,"messages":[{"role":"user","content":"` + content + `"}]}`
		req, _ := http.NewRequest("POST", "http://fleet.edge.test/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		resp, err := client.Do(req)
		if err != nil {
			return outcome{err: err.Error()}
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if _, err := br.Peek(1); err != nil || resp.StatusCode != 200 {
			b, _ := io.ReadAll(br)
			return outcome{err: fmt.Sprintf("%d %v %s", resp.StatusCode, err, b)}
		}
		rest, err := io.ReadAll(br)
		return outcome{begun: true, ok: err == nil && strings.Contains(string(rest), "[DONE]")}
	}
	clientOf := func(addr string) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}}
	}
	for i, addr := range edges {
		if o := call(clientOf(addr), "warm"); !o.ok {
			t.Fatalf("edge %d: %+v", i, o)
		}
	}

	// The load: 4 callers per edge, each prompt new (so that every replica is picked), at most 600
	// calls per caller and 8 s in all.
	var mu sync.Mutex
	var sent, cut int
	var failed []string
	stop := make(chan struct{})
	stopLoad := sync.OnceFunc(func() { close(stop) })
	var wg sync.WaitGroup
	for e, addr := range edges {
		client := clientOf(addr)
		for w := range 4 {
			wg.Go(func() {
				for i := 0; i < 600; i++ {
					select {
					case <-stop:
						return
					default:
					}
					o := call(client, fmt.Sprintf("edge %d caller %d call %d %s", e, w, i, strings.Repeat("x", 300)))
					mu.Lock()
					sent++
					switch {
					case !o.begun:
						failed = append(failed, o.err)
					case !o.ok:
						cut++
					}
					mu.Unlock()
				}
			})
		}
	}
	time.AfterFunc(8*time.Second, stopLoad)

	killed := addrs[0]
	metricsOf := func(e int) string { return "http://" + edges[e] + "/metrics" }
	time.Sleep(1500 * time.Millisecond)
	for e := range edges {
		if p := fleetMetric(metricsOf(e), "svc_fleet_picks_total", killed); p <= 0 {
			t.Fatalf("edge %d never picked %s before the kill (%v)", e, killed, p)
		}
	}
	killedAt := time.Now()
	replicas[0].Process.Signal(syscall.SIGKILL)
	replicas[0].Wait()

	// Out within 1 s on each edge: healthy 0, and its picks stop.
	outPicks := make([]float64, len(edges))
	for e := range edges {
		for {
			if fleetMetric(metricsOf(e), "svc_fleet_replica_healthy", killed) == 0 {
				break
			}
			if time.Since(killedAt) > time.Second {
				t.Fatalf("edge %d still counts %s healthy %v after its SIGKILL", e, killed, time.Since(killedAt))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("edge %d: %s out %v after the kill", e, killed, time.Since(killedAt).Round(time.Millisecond))
		outPicks[e] = fleetMetric(metricsOf(e), "svc_fleet_picks_total", killed)
	}
	time.Sleep(2*time.Second - time.Since(killedAt))
	for e := range edges {
		if p := fleetMetric(metricsOf(e), "svc_fleet_picks_total", killed); p != outPicks[e] {
			t.Errorf("edge %d picked %s %v times while it was down", e, killed, p-outPicks[e])
		}
	}
	restartedAt := time.Now()
	startReplica(t, killed)
	for e := range edges {
		for {
			if fleetMetric(metricsOf(e), "svc_fleet_replica_healthy", killed) == 1 &&
				fleetMetric(metricsOf(e), "svc_fleet_picks_total", killed) > outPicks[e] {
				break
			}
			if time.Since(restartedAt) > 3*time.Second {
				t.Fatalf("edge %d has not taken %s back %v after its restart", e, killed, time.Since(restartedAt))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("edge %d: %s back and picked %v after its restart", e, killed, time.Since(restartedAt).Round(time.Millisecond))
	}
	stopLoad()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d calls through 2 edges; %d cut mid-stream by the kill; %d failed before their answer began", sent, cut, len(failed))
	if len(failed) > 0 {
		t.Errorf("%d calls failed before their answer began (want 0); first: %s", len(failed), failed[0])
	}

	// Every call answered (0 failed before their answer began, above) and every one shipped its run. A
	// call the kill failed before any byte was retried elsewhere, and its run names the killed replica
	// in retriedFrom; since a cut answer takes the replica out at once (6-10 ms after the kill), often
	// no call reaches it dead, so such runs are counted, not required (the retry's record is judged by
	// TestRunsNameTheReplicaARetryLeft). A run naming it must have been answered by another replica.
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		retried, total := 0, 0
		for cursor := ""; ; {
			page, err := sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 200, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				total++
				if r.RetriedFrom == killed {
					retried++
					if r.Replica == killed || r.Status != "ok" {
						t.Errorf("run %s retried from %s: replica %s, status %s", r.ID, killed, r.Replica, r.Status)
					}
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if total >= sent {
			t.Logf("%d of %d runs name %s in retriedFrom", retried, total, killed)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs shipped of %d calls", total, sent)
		}
	}
}

// fleetProcesses starts a control plane and two `svc edge` processes whose models file has one model,
// fleet, routed by affinity over the replicas at urls (more of its lines in extra), and returns the
// control plane's address and the edges'.
func fleetProcesses(t *testing.T, dir, home, data string, urls []string, extra string) (api string, edges []string) {
	t.Helper()
	models := filepath.Join(home, "models.yaml")
	if err := os.WriteFile(models, []byte("models:\n  - name: fleet\n    runtime: openai\n    upstreamModel: fake-model\n    public: true\n    replicas: ["+
		strings.Join(urls, ", ")+"]\n    routing: affinity\n"+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	env := svcEnv(home)
	_, api = startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", data, "--models", models)
	token := strings.TrimSpace(runSvc(t, dir, env, "edge-tokens", "create", "edges", "--data", data).stdout)
	for i := range 2 {
		_, addr := startEdge(t, dir, home, token, api, "--addr", "127.0.0.1:0", "--models", models,
			"--spool-dir", filepath.Join(home, "spool"+strconv.Itoa(i)))
		edges = append(edges, addr)
	}
	return api, edges
}
