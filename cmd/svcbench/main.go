// Command svcbench measures the edge's overhead: the same load sent to a mock upstream directly,
// through a bare httputil.ReverseProxy, and through `svc server` (key auth and run recording on).
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

func main() {
	role := flag.String("role", "", "internal: run as the mock upstream (mock) or the bare proxy (proxy)")
	target := flag.String("target", "", "internal: the bare proxy's upstream")
	duration := flag.Duration("duration", 3*time.Second, "measurement time of each scenario")
	conns := flag.Int("conns", 16, "concurrent connections")
	tokens := flag.Int("tokens", 16, "completion tokens of each answer")
	usage := flag.Bool("usage", false, "ask for stream usage (stream_options.include_usage) in streamed requests to every target")
	retention := flag.String("retention", "days", "run retention of the benchmarked deployment: days, unlimited or none")
	flag.Parse()
	var err error
	switch *role {
	case "mock":
		err = serve(mockupstream.New(mockupstream.Config{Model: "mock-model", Tokens: *tokens}, false))
	case "proxy":
		err = runProxy(*target)
	case "":
		err = run(*duration, *conns, *tokens, *retention, *usage)
	default:
		err = fmt.Errorf("unknown role %q", *role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "svcbench:", err)
		os.Exit(1)
	}
}

// serve listens on a free loopback port, prints its URL on the first line, and serves.
func serve(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("http://%s\n", ln.Addr())
	return (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

// runProxy is the baseline: a bare reverse proxy with the same transport tuning as the edge.
func runProxy(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	// ReverseProxy flushes text/event-stream answers at once by itself (FlushInterval is ignored for them).
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Buffer the request body, as the edge does. Streaming it through makes Go's Transport read the
		// inbound body after the server has closed it (once the answer starts), and drop the upstream
		// connection mid-stream (golang/go#40747).
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		p.ServeHTTP(w, r)
	}))
}

// child is a process started by the bench.
type child struct {
	cmd *exec.Cmd
	url string
}

// start runs a command whose first line of output is its URL (or waits for ready when given).
func start(name string, args []string, ready string) (*child, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd}
	if ready != "" {
		go io.Copy(io.Discard, out)
		c.url = ready
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get(ready + "/")
			if err == nil {
				resp.Body.Close()
				return c, nil
			}
			if time.Now().After(deadline) {
				c.stop()
				return nil, fmt.Errorf("%s did not start: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	go io.Copy(io.Discard, out)
	c.url = strings.TrimSpace(line)
	return c, nil
}

func (c *child) stop() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func run(duration time.Duration, conns, tokens int, retention string, usage bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "svcbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	fmt.Println("building svc ...")
	svcBin := filepath.Join(tmp, "svc")
	build := exec.Command("go", "build", "-o", svcBin, "./cmd/svc")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/svc (run from the repository root): %w", err)
	}

	mock, err := start(self, []string{"-role", "mock", "-tokens", fmt.Sprint(tokens)}, "")
	if err != nil {
		return err
	}
	defer mock.stop()
	proxy, err := start(self, []string{"-role", "proxy", "-target", mock.url}, "")
	if err != nil {
		return err
	}
	defer proxy.stop()

	models := filepath.Join(tmp, "models.yaml")
	yaml := fmt.Sprintf("models:\n  - name: bench-llama\n    runtime: openai\n    upstreamUrl: %s/v1\n    upstreamModel: mock-model\n    public: true\n    default: true\n", mock.url)
	if err := os.WriteFile(models, []byte(yaml), 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	svc, err := start(svcBin, []string{"server", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", filepath.Join(tmp, "data"),
		"--models", models, "--base-url", base}, base)
	if err != nil {
		return err
	}
	defer svc.stop()

	// A deployment with key auth and run recording, made through the management API like a user would.
	ctx := context.Background()
	anon, err := cloudapi.New(base, "").MintAnonymous(ctx)
	if err != nil {
		return err
	}
	cl := cloudapi.New(base, anon.Token)
	scope, err := cl.AnonymousScope(ctx)
	if err != nil {
		return err
	}
	cl = cl.WithProject(scope.OrgSlug, scope.ProjectSlug)
	d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "bench",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "bench-llama"}, AuthMode: cloudapi.AuthFixedAPIKey,
		RunRetentionMode: retention, RunRetentionDays: 7})
	if err != nil {
		return err
	}
	key, err := cl.IssueDeploymentKey(ctx, d.ID, "bench")
	if err != nil {
		return err
	}

	targets := []struct {
		name, url, host, key string
	}{
		{"direct", mock.url + "/v1/chat/completions", "", ""},
		{"bare proxy", proxy.url + "/v1/chat/completions", "", ""},
		{"edge", base + "/v1/chat/completions", fmt.Sprintf("bench.localhost:%d", port), key.Plaintext},
	}
	fmt.Printf("load: %d connections, %v per scenario, %d tokens per answer, loopback, %d CPUs; edge: key auth, run retention %s; stream usage asked: %v\n\n",
		conns, duration, tokens, numCPU(), retention, usage)
	fmt.Printf("%-8s %-11s %10s %10s %10s\n", "mode", "target", "req/s", "p50", "p99")
	for _, stream := range []bool{false, true} {
		mode := "plain"
		body := `{"model":"mock-model","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
		if stream {
			mode = "stream"
			body = `{"model":"mock-model","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
			if usage {
				body = strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
			}
		}
		// Rounds alternate between the targets, so that a burst of load from elsewhere on the machine
		// hits them all alike rather than skewing one.
		res := make([]result, len(targets))
		for _, t := range targets {
			if _, err := load(t.url, t.host, t.key, []byte(body), conns, 500*time.Millisecond); err != nil {
				return fmt.Errorf("%s %s warm-up: %w", mode, t.name, err)
			}
		}
		for round := 0; round < rounds; round++ {
			for i, t := range targets {
				r, err := load(t.url, t.host, t.key, []byte(body), conns, duration/time.Duration(rounds))
				if err != nil {
					return fmt.Errorf("%s %s: %w", mode, t.name, err)
				}
				res[i].add(r)
			}
		}
		byName := map[string]result{}
		for i, t := range targets {
			r := res[i].summary()
			byName[t.name] = r
			fmt.Printf("%-8s %-11s %10.0f %10s %10s\n", mode, t.name, r.rps, ms(r.p50), ms(r.p99))
		}
		e, b := byName["edge"], byName["bare proxy"]
		fmt.Printf("%-8s edge/bare: throughput %.0f%% (target >= 80%%), p50 %.2fx (target <= 1.25x)\n\n", mode, 100*e.rps/b.rps, float64(e.p50)/float64(b.p50))
	}
	return nil
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
}

const rounds = 3

type result struct {
	rps      float64
	p50, p99 time.Duration

	n       int
	elapsed time.Duration
	lat     []time.Duration
}

// add pools the requests of one round into r.
func (r *result) add(o result) {
	r.n += o.n
	r.elapsed += o.elapsed
	r.lat = append(r.lat, o.lat...)
}

// summary computes throughput and percentiles over the pooled rounds.
func (r *result) summary() result {
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	return result{rps: float64(r.n) / r.elapsed.Seconds(), p50: r.lat[len(r.lat)/2], p99: r.lat[len(r.lat)*99/100]}
}

// load sends requests from conns goroutines for the given time and returns the latencies of the
// complete answers.
func load(u, host, key string, body []byte, conns int, duration time.Duration) (result, error) {
	tr := &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	one := func() error {
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if host != "" {
			req.Host = host // Go cannot resolve *.localhost; the connection goes to loopback anyway
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	phase := func(d time.Duration, keep bool) ([]time.Duration, error) {
		var (
			mu       sync.Mutex
			lat      []time.Duration
			firstErr error
			wg       sync.WaitGroup
		)
		end := time.Now().Add(d)
		for i := 0; i < conns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for time.Now().Before(end) {
					t0 := time.Now()
					if err := one(); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
					if keep {
						mine = append(mine, time.Since(t0))
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return lat, firstErr
	}
	t0 := time.Now()
	lat, err := phase(duration, true)
	if err != nil {
		return result{}, err
	}
	elapsed := time.Since(t0)
	if len(lat) == 0 {
		return result{}, fmt.Errorf("no request completed")
	}
	return result{n: len(lat), elapsed: elapsed, lat: lat}, nil
}

func numCPU() int { return runtime.NumCPU() }
