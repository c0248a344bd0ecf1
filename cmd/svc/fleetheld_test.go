package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// heldTotal sums svc_fleet_held_total (calls held in svc for an adapter slot) over the replicas of an
// edge's /metrics page.
func heldTotal(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^svc_fleet_held_total\{[^}]*\} (\S+)$`).FindAllSubmatch(b, -1) {
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		sum += v
	}
	return sum
}

// TestTwoEdgesHoldAdapterCallsForSlots runs two `svc edge` processes (and their control plane) in
// front of two fake vLLM replicas of one adapter slot each (--max-loras 1; in this process, on
// loopback), one model with maxLoras 1 routed by affinity, and an endpoint per adapter of four.
//
// First, both edges under load at once (4 callers each, every call an adapter drawn at random, 3 s):
// each edge holds some calls in svc until a slot frees (svc_fleet_held_total) and releases them; no
// call fails, none is lost (the replicas answered exactly the calls sent), and no replica ever ran
// more adapters at once than its slots.
//
// Then one edge's calls hold both slots, back to back, while the other edge gets calls of the two
// other adapters: it cannot see those slots free (only its scrapes name them), so it must not hold
// its calls (they would wait for as long as the first edge keeps the slots busy) but send them to
// wait on a replica, which admits them when a call of the first edge ends. Each is answered within
// 2 s while the first edge keeps calling.
func TestTwoEdgesHoldAdapterCallsForSlots(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	var fakes []*mockupstream.Engine
	var urls []string
	for range 2 {
		f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", MaxLoras: 1, PrefillTime: time.Microsecond,
			ITL: 20 * time.Millisecond, Tokens: 4, LoraLoadTime: 5 * time.Millisecond})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		fakes, urls = append(fakes, f), append(urls, "http://"+ln.Addr().String()+"/v1")
	}
	if err := os.MkdirAll(filepath.Join(data, "artifacts"), 0o700); err != nil {
		t.Fatal(err)
	}
	api, edges := fleetProcesses(t, dir, home, data, urls, "    lora: vllm\n    maxLoras: 1\n")

	// An endpoint per adapter: the final adapter of a completed job on the fleet's model.
	ctx := context.Background()
	sdk, err := cloudapi.New(api, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for a := range 4 {
		slug, path := fmt.Sprintf("held-a%d", a), fmt.Sprintf("adapter-%d", a)
		if err := os.WriteFile(filepath.Join(data, "artifacts", path), []byte("adapter"), 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := sdk.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "fleet", Status: "completed", FinalAdapter: &path})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, AuthMode: cloudapi.AuthNone,
			Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: j.ID}, RunRetentionMode: cloudapi.RetentionNone}); err != nil {
			t.Fatal(err)
		}
		slugs = append(slugs, slug)
	}
	for _, addr := range edges {
		waitReadyz(t, addr)
	}

	clientOf := func(addr string) *http.Client {
		return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}}
	}
	// call sends one streamed chat completion for the adapter behind slug: nil once it ended with [DONE].
	call := func(client *http.Client, slug, content string) error {
		body := `{"model":"fleet","stream":true,"messages":[{"role":"user","content":"` + content + `"}]}`
		req, _ := http.NewRequest("POST", "http://"+slug+".edge.test/v1/chat/completions", strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		rest, err := io.ReadAll(bufio.NewReader(resp.Body))
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 || !strings.Contains(string(rest), "[DONE]") {
			return fmt.Errorf("%d %.300s", resp.StatusCode, rest)
		}
		return nil
	}
	clients := []*http.Client{clientOf(edges[0]), clientOf(edges[1])}
	// The endpoints reach each edge (its snapshot of the control plane's deployments).
	for e := range edges {
		for _, slug := range slugs {
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				err := call(clients[e], slug, "warm")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("edge %d, %s: %v", e, slug, err)
				}
			}
		}
	}
	answered := func() int64 { return fakes[0].Requests.Load() + fakes[1].Requests.Load() }
	metricsOf := func(e int) string { return "http://" + edges[e] + "/metrics" }

	// Both edges under load at once.
	base := answered()
	var mu sync.Mutex
	sent := 0
	var failed []string
	end := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for e := range edges {
		for c := range 4 {
			wg.Go(func() {
				for i := 0; time.Now().Before(end); i++ {
					err := call(clients[e], slugs[(e*7+c*3+i*5)%len(slugs)], fmt.Sprintf("edge %d caller %d call %d", e, c, i))
					mu.Lock()
					sent++
					if err != nil {
						failed = append(failed, err.Error())
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d calls failed; first: %s", len(failed), sent, failed[0])
	}
	if got := answered() - base; got != int64(sent) {
		t.Errorf("the replicas answered %d calls, %d were sent", got, sent)
	}
	for e := range edges {
		if h := heldTotal(t, metricsOf(e)); h == 0 {
			t.Errorf("edge %d held no call in svc for a slot (%d calls through 2 edges)", e, sent)
		} else {
			t.Logf("edge %d held %v calls for a slot", e, h)
		}
	}
	for i, f := range fakes {
		if p := f.PeakAdapters.Load(); p > 1 {
			t.Errorf("replica %d ran %d adapters at once, with 1 slot", i, p)
		}
	}
	t.Logf("%d calls through 2 edges, all answered; %d waited for a slot on their replica", sent,
		fakes[0].SlotWaits.Load()+fakes[1].SlotWaits.Load())

	// Edge 0's calls hold both slots, back to back; edge 1 sees them only through its scrapes (about
	// once a second).
	stop := make(chan struct{})
	var busy sync.WaitGroup
	var busyErr error
	for c := range 2 {
		busy.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := call(clients[0], slugs[c], fmt.Sprintf("busy %d %d", c, i)); err != nil {
					mu.Lock()
					busyErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	time.Sleep(2500 * time.Millisecond) // two scrapes on edge 1
	held, waits := heldTotal(t, metricsOf(1)), fakes[0].SlotWaits.Load()+fakes[1].SlotWaits.Load()
	for i, slug := range []string{slugs[2], slugs[3], slugs[2], slugs[3]} {
		t0 := time.Now()
		err := call(clients[1], slug, fmt.Sprintf("other edge %d", i))
		took := time.Since(t0)
		if err != nil {
			t.Fatalf("edge 1, %s while edge 0 holds the slots: %v", slug, err)
		}
		if took > 2*time.Second {
			t.Errorf("edge 1's call of %s took %v while edge 0 kept both slots busy: held for slots it cannot see free", slug, took.Round(time.Millisecond))
		} else {
			t.Logf("edge 1's call of %s answered in %v", slug, took.Round(time.Millisecond))
		}
	}
	close(stop)
	busy.Wait()
	if busyErr != nil {
		t.Fatalf("edge 0's calls: %v", busyErr)
	}
	if h := heldTotal(t, metricsOf(1)); h != held {
		t.Errorf("edge 1 held %v calls for slots only edge 0's calls held", h-held)
	}
	if w := fakes[0].SlotWaits.Load() + fakes[1].SlotWaits.Load() - waits; w == 0 {
		t.Errorf("no call waited for a slot on a replica while edge 0 held both: the case was not exercised")
	}
	for i, f := range fakes {
		if p := f.PeakAdapters.Load(); p > 1 {
			t.Errorf("replica %d ran %d adapters at once, with 1 slot", i, p)
		}
	}
}
