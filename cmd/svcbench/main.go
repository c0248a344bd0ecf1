// Command svcbench measures the edge's overhead: the same load sent to a mock upstream directly,
// through a bare httputil.ReverseProxy, through `svc server` (key auth and run recording on), and
// through an `svc edge` process in front of that server (docs/DEPLOY.md), in the same run.
//
// It is built to be read on a small, shared machine. Every scenario (non-streamed and streamed answers,
// at -conns connections and at 1) runs in -rounds rounds; in a round, each row (direct, bare proxy, edge,
// edge variants) gets -duration of load in slices of at most 500ms that take turns, in an order that
// rotates from slice to slice, so that noise from elsewhere on the machine (and the work a row leaves
// behind for the next) weighs on all rows alike, and each edge row is compared with the bare proxy
// of the same round. It prints the min / median / max of those per-round ratios, absolute figures
// (medians over rounds; on Linux, the CPU time of the serving process per request too), and the issue's
// budget checks, which are informative only: the exit code does not depend on them. All traffic stays
// on loopback. The run is bounded in time: it prints how long it expects to take, a watchdog ends it at
// twice that plus two minutes, and its helper processes end with it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// The budget of the edge's overhead, as the issue states it. The checks are informative only.
const (
	budgetThroughput = 0.85                   // median edge/bare throughput at -conns connections, at least
	budgetP50        = 1.2                    // median edge/bare p50 latency, at most
	budgetTTFB       = 300 * time.Microsecond // median streamed time-to-first-byte, edge − bare, at most
)

const (
	warmup        = 300 * time.Millisecond // untimed load of each row before a scenario's first round
	sliceOverhead = 20 * time.Millisecond  // finishing the requests under way at the end of a slice (an estimate)
)

type options struct {
	duration  time.Duration
	rounds    int
	conns     int
	tokens    int
	usage     bool
	retention string
}

func main() {
	role := flag.String("role", "", "internal: run as the mock upstream (mock) or the bare proxy (proxy)")
	target := flag.String("target", "", "internal: the bare proxy's upstream")
	duration := flag.Duration("duration", 1500*time.Millisecond, "measurement time of each row in each round (in slices of at most 500ms)")
	rounds := flag.Int("rounds", 5, "interleaved rounds of each scenario (min / median / max need at least 5 to mean much)")
	conns := flag.Int("conns", 16, "concurrent connections of the loaded scenarios (the others use 1)")
	tokens := flag.Int("tokens", 16, "completion tokens of each answer")
	usage := flag.Bool("usage", false, "ask for stream usage (stream_options.include_usage) in streamed requests to every target")
	retention := flag.String("retention", "days", "run retention of the benchmarked deployment (the edge row): days, unlimited or none")
	flag.Parse()
	var err error
	switch *role {
	case "mock":
		exitWithBench()
		err = serve(mockupstream.New(mockupstream.Config{Model: "mock-model", Tokens: *tokens}, false))
	case "proxy":
		exitWithBench()
		err = runProxy(*target)
	case "":
		switch {
		case *rounds < 1:
			err = fmt.Errorf("-rounds must be at least 1")
		case *duration <= 0:
			err = fmt.Errorf("-duration must be positive")
		case *conns < 1:
			err = fmt.Errorf("-conns must be at least 1")
		default:
			err = run(options{duration: *duration, rounds: *rounds, conns: *conns, tokens: *tokens, usage: *usage, retention: *retention})
		}
	default:
		err = fmt.Errorf("unknown role %q", *role)
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "svcbench: interrupted")
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "svcbench:", err)
		os.Exit(1)
	}
}

// exitWithBench ends a helper process when the bench that started it goes away, however it went
// (its stdin, a pipe from the bench, then closes).
func exitWithBench() {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
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

// proxyStatsPath answers the bare proxy's body counters (proxyStats) instead of being proxied.
const proxyStatsPath = "/_svcbench/proxy-stats"

// proxyStats is what the bare proxy saw of the request bodies it streamed through to the upstream.
type proxyStats struct {
	Requests     int64 `json:"requests"`
	EarlyAnswers int64 `json:"earlyAnswers"` // the upstream's answer began before the Transport was done with the body
	LateReads    int64 `json:"lateReads"`    // body reads after the proxy's handler had returned
	ReadErrors   int64 `json:"readErrors"`   // body reads that failed (other than io.EOF)
}

type proxyCounters struct{ requests, early, late, readErrors atomic.Int64 }

// runProxy is the baseline: a default httputil.ReverseProxy, as a Go developer would write one.
//
// FlushInterval is left at 0 (ReverseProxy flushes text/event-stream answers at once by itself), and
// the request body is streamed through to the upstream, not buffered. The proxy's one change is its
// transport: a copy of http.DefaultTransport that keeps up to 512 idle connections per host. The
// default keeps 2, so at 16 connections the proxy would dial the mock again for most requests and be
// handicapped against the edge, whose upstream transport keeps 512 (internal/inference/openai.go).
//
// Streaming the body runs into golang/go#40747, and the bench saw it happen (Go 1.26): without the
// fix below, 2 to 9 of every 5,000 to 9,500 requests hit it, and the first streamed one to do so ended
// the bench ("ReverseProxy read error during body copy: use of closed network connection", a cut
// answer). The bench's bodies are small and complete, but not in the Transport's eyes: the inbound
// body is no in-memory reader, so the Transport flushes the headers first, then copies the body
// straight to the socket (its write buffer is empty, so bufio hands the copy to the connection), and
// only then reads the body once more, to check that it is at its end. In between, the mock can read the
// request and answer, ReverseProxy starts the answer, and Go's HTTP/1 server, which does not let a
// handler read a request body once its answer has begun, consumes and closes the inbound body. The
// Transport's last read then fails ("http: invalid Read on closed Body"), and the Transport closes the
// upstream connection, under the answer being streamed.
//
// The fix keeps the body streamed: http.ResponseController.EnableFullDuplex (Go 1.21, golang/go#57786)
// tells the server that the handler reads the body while it answers, so the server leaves the body
// alone until the handler returns. watchedBody and watchTransport check what happens
// rather than assume it: they count answers that began before the Transport was done with the body
// (the window, which harms no one now), body reads after the handler returned and body read errors
// (both expected 0), and the bench prints them at the end. A failure would also show loudly: the client
// would see a cut answer and the bench would stop with an error.
func runProxy(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 512 // the only tuning; see above
	c := &proxyCounters{}
	p.Transport = watchTransport{tr, c}
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == proxyStatsPath {
			json.NewEncoder(w).Encode(proxyStats{Requests: c.requests.Load(), EarlyAnswers: c.early.Load(),
				LateReads: c.late.Load(), ReadErrors: c.readErrors.Load()})
			return
		}
		c.requests.Add(1)
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		b := &watchedBody{ReadCloser: r.Body, c: c}
		r.Body = b
		p.ServeHTTP(w, r)
		b.returned.Store(true)
	}))
}

// watchedBody passes an inbound request body through unchanged, counting reads that come too late or
// fail.
type watchedBody struct {
	io.ReadCloser
	c        *proxyCounters
	returned atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.returned.Load() {
		b.c.late.Add(1)
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.c.readErrors.Add(1)
	}
	return n, err
}

// watchTransport counts answers that began before the Transport had written the whole request (its
// last read of the body included).
type watchTransport struct {
	http.RoundTripper
	c *proxyCounters
}

func (t watchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
		GotFirstResponseByte: func() {
			if !wrote.Load() {
				t.c.early.Add(1)
			}
		},
	}
	return t.RoundTripper.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
}

// child is a process started by the bench.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it ends the bench's own helpers (exitWithBench)
	url   string
}

// start runs a command whose first line of output is its URL (or waits for ready when given).
func start(name string, args []string, ready string, stderr io.Writer) (*child, error) {
	return startWith(name, args, nil, ready, stderr)
}

// startWith is start with more environment variables for the command.
func startWith(name string, args, env []string, ready string, stderr io.Writer) (*child, error) {
	cmd := exec.Command(name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = stderr
	orphanGuard(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: in}
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
	c.stdin.Close()
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

// configureLimits puts non-binding limits on a deployment (the "edge + limits" rows) and on each of its keys:
// generous enough that the bench never reaches them, so that the row measures the cost of checking
// and charging token buckets on every request, not of refusing requests.
func configureLimits(ctx context.Context, client *cloudapi.Client, deploymentID string) error {
	const many = 100_000_000
	lim := cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(many), TokensPerMinute: cloudapi.LimitTo(many)}
	if _, err := client.UpdateDeployment(ctx, deploymentID, cloudapi.UpdateDeploymentRequest{Limits: lim}); err != nil {
		return err
	}
	keys, err := client.ListDeploymentKeys(ctx, deploymentID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := client.UpdateDeploymentKey(ctx, deploymentID, k.ID, cloudapi.UpdateKeyRequest{Limits: lim}); err != nil {
			return err
		}
	}
	return nil
}

// startEdgeProcess makes an edge token on the server's data folder (`svc edge-tokens create`, as an
// operator would on the control-plane host) and starts `svc edge` in front of the server with it.
func startEdgeProcess(ctx context.Context, svcBin, tmp, base, models string, logFile io.Writer) (*child, error) {
	create := exec.CommandContext(ctx, svcBin, "edge-tokens", "create", "bench-edge", "--data", filepath.Join(tmp, "data"))
	create.Stderr = logFile
	out, err := create.Output()
	if err != nil {
		return nil, fmt.Errorf("svc edge-tokens create: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := []string{"edge", "--control-plane", base, "--addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--endpoint-domain", fmt.Sprintf("localhost:%d", port), "--models", models}
	// The token goes in the environment, never on the command line.
	env := []string{"SVC_BENCH_EDGE_TOKEN=" + strings.TrimSpace(string(out))}
	edge, err := startWith(svcBin, append(cmd, "--edge-token-env", "SVC_BENCH_EDGE_TOKEN"), env, url, logFile)
	if err != nil {
		return nil, err
	}
	// Ready once synced with the server (its change feed said hello).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := opsClient.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return edge, nil
			}
		}
		if time.Now().After(deadline) {
			edge.stop()
			return nil, fmt.Errorf("svc edge did not sync with the server")
		}
	}
}

// row is one target of the load: a line of every scenario's table.
type row struct {
	name      string
	url, host string // host, when set, names the deployment (the connection still goes to url's address)
	key       string
	edge      bool   // compared with the bare proxy of the same round
	records   bool   // the deployment records runs (the bench lets the recorder catch up after its slices)
	ops       string // base URL of the process whose recorder (or run shipper) settles; "" for the server's
	pid       int    // the process that serves the row, whose CPU time is measured
	skip      string // why the row is not measured, or ""
}

type scenario struct {
	stream bool
	conns  int
}

func (s scenario) String() string {
	mode := "plain"
	if s.stream {
		mode = "stream"
	}
	return fmt.Sprintf("%s×%d", mode, s.conns)
}

func (s scenario) title() string {
	mode := "non-streamed"
	if s.stream {
		mode = "streamed"
	}
	unit := "connections"
	if s.conns == 1 {
		unit = "connection"
	}
	return fmt.Sprintf("%s, %d %s", mode, s.conns, unit)
}

func requestBody(stream, usage bool) []byte {
	body := `{"model":"mock-model","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	if stream {
		body = `{"model":"mock-model","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
		if usage {
			body = strings.Replace(body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
		}
	}
	return []byte(body)
}

// edgeFigures are the medians over rounds of one edge row in one scenario, for the budget checks.
type edgeFigures struct {
	thr, p50, cpu float64       // edge/bare ratios (cpu: 0 when not measured)
	ttfb          time.Duration // edge − bare
}

func run(o options) (err error) {
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
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
	build := exec.CommandContext(ctx, "go", "build", "-o", svcBin, "./cmd/svc")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/svc (run from the repository root): %w", err)
	}

	mock, err := start(self, []string{"-role", "mock", "-tokens", fmt.Sprint(o.tokens)}, "", os.Stderr)
	if err != nil {
		return err
	}
	defer mock.stop()
	proxy, err := start(self, []string{"-role", "proxy", "-target", mock.url}, "", os.Stderr)
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
	// The server runs as configured by default (log level info); its log goes to a file, shown if the
	// bench fails, so that its lines (one per /metrics read, for instance) do not interleave the tables.
	logPath := filepath.Join(tmp, "svc.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	defer func() {
		if err != nil && !errors.Is(err, context.Canceled) {
			showTail(logPath, 30)
		}
	}()
	svc, err := start(svcBin, []string{"server", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", filepath.Join(tmp, "data"),
		"--models", models, "--base-url", base}, base, logFile)
	if err != nil {
		return err
	}
	defer svc.stop()

	// Deployments with key auth, made through the management API like a user would: one per edge row.
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
	edgeURL := base + "/v1/chat/completions"
	deploy := func(name, slug, retention string) (*row, string, error) {
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug,
			Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "bench-llama"}, AuthMode: cloudapi.AuthFixedAPIKey,
			RunRetentionMode: retention, RunRetentionDays: 7})
		if err != nil {
			return nil, "", fmt.Errorf("deployment %s: %w", slug, err)
		}
		key, err := cl.IssueDeploymentKey(ctx, d.ID, "bench")
		if err != nil {
			return nil, "", fmt.Errorf("key of deployment %s: %w", slug, err)
		}
		return &row{name: name, url: edgeURL, host: fmt.Sprintf("%s.localhost:%d", slug, port), key: key.Plaintext, edge: true,
			records: retention != "none", pid: svc.cmd.Process.Pid}, d.ID, nil
	}
	edge, _, err := deploy("edge", "bench", o.retention)
	if err != nil {
		return err
	}
	noRuns, _, err := deploy("edge, retention none", "bench-noruns", "none")
	if err != nil {
		return err
	}
	limits, limitsID, err := deploy("edge + limits", "bench-limits", o.retention)
	if err != nil {
		return err
	}
	if err := configureLimits(ctx, cl, limitsID); err != nil {
		limits.skip = "configureLimits: " + err.Error()
	}
	// The budget's own configuration: metrics, request ids, usage aggregation and non-binding limits,
	// without transcripts (run recording is measured by the rows above).
	limitsNoRuns, limitsNoRunsID, err := deploy("edge + limits, no runs", "bench-limits-noruns", "none")
	if err != nil {
		return err
	}
	if err := configureLimits(ctx, cl, limitsNoRunsID); err != nil {
		limitsNoRuns.skip = "configureLimits: " + err.Error()
	}
	edgeProc, err := startEdgeProcess(ctx, svcBin, tmp, base, models, logFile)
	if err != nil {
		return err
	}
	defer edgeProc.stop()
	// The same deployment and key as the edge row, served by the edge process from its snapshot; its
	// runs are shipped to the server.
	remote := &row{name: "edge process", url: edgeProc.url + "/v1/chat/completions", host: "bench.localhost" + strings.TrimPrefix(edgeProc.url, "http://127.0.0.1"),
		key: edge.key, edge: true, records: o.retention != "none", pid: edgeProc.cmd.Process.Pid, ops: edgeProc.url}
	rows := []*row{
		{name: "direct", url: mock.url + "/v1/chat/completions", pid: mock.cmd.Process.Pid},
		{name: "bare proxy", url: proxy.url + "/v1/chat/completions", pid: proxy.cmd.Process.Pid},
		edge, noRuns, limits, limitsNoRuns, remote,
	}
	const bare = 1 // index of the bare proxy in rows
	active, recording := 0, 0
	for _, r := range rows {
		if r.skip == "" {
			active++
			if r.records {
				recording++
			}
		}
	}
	scenarios := []scenario{{false, o.conns}, {false, 1}, {true, o.conns}, {true, 1}}
	if o.conns == 1 {
		scenarios = []scenario{{false, 1}, {true, 1}}
	}
	slices, _ := slicing(o.duration)
	perRound := time.Duration(active)*o.duration + time.Duration(slices)*(time.Duration(active)*sliceOverhead+time.Duration(recording)*recorderCatchUp)
	expected := time.Duration(len(scenarios)) * (time.Duration(active)*warmup + time.Duration(o.rounds)*perRound)
	// The watchdog: whatever happens, the bench ends.
	ctx, cancel := context.WithTimeout(ctx, 2*expected+2*time.Minute)
	defer cancel()

	limitsNote := "measured"
	if limits.skip != "" {
		limitsNote = "skipped (" + limits.skip + ")"
	}
	fmt.Printf("\nsvcbench: the edge's overhead on loopback; %d CPUs (GOMAXPROCS %d), %s %s/%s; load generator, mock, proxy and edge share them\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("  load       chat completions, %d tokens per answer, non-streamed and streamed (stream usage asked: %v), at %d connections and at 1\n", o.tokens, o.usage, o.conns)
	_, sliceLen := slicing(o.duration)
	fmt.Printf("  rounds     %d per scenario, %v per row in each, in slices of %v that take turns, the order rotating (%s)\n", o.rounds, o.duration, sliceLen, rowNames(rows))
	fmt.Printf("  direct     the mock upstream (internal/mockupstream), no proxy\n")
	fmt.Printf("  bare proxy a default httputil.ReverseProxy (request body streamed, FlushInterval 0), only with 512 idle connections per host\n")
	recordingNote := "run recording (retention " + o.retention + ")"
	if o.retention == "none" {
		recordingNote = "no run recording (retention none)"
	}
	fmt.Printf("  edge       `svc server`, a deployment with key auth (fixed API key) and %s;\n", recordingNote)
	fmt.Printf("             metrics (/metrics) and request ids are always on in the server, so every edge row includes them\n")
	fmt.Printf("  variants   edge, retention none: the same without run recording; edge + limits: %s; edge + limits, no runs:\n", limitsNote)
	fmt.Printf("             the budget's configuration (metrics, request ids, usage aggregation, non-binding limits; retention none)\n")
	fmt.Printf("  edge process `svc edge` in front of that server (the edge row's deployment and key, from its snapshot; runs\n")
	fmt.Printf("             shipped to the server in batches); its cpu/req is the edge process's alone, not the server's writes\n")
	fmt.Printf("  recorder   after each slice of a row that records runs, the bench waits %v for the recorder's last batch, so that\n", recorderCatchUp)
	fmt.Printf("             writing it does not weigh on the next row (its CPU time counts for the row that left it)\n")
	fmt.Printf("  figures    medians over rounds of req/s, p50 and p99 latency, ttfb (time to the first body byte) and cpu/req (CPU time\n")
	fmt.Printf("             of the row's server process per request: mock, proxy or svc; Linux only); ×bare: per-round ratios to the\n")
	fmt.Printf("             bare proxy of the same round, min/med/max; Δttfb: edge − bare in the same round, median (min..max)\n")
	if o.rounds < 5 {
		fmt.Printf("  note       fewer than 5 rounds: min / median / max say little\n")
	}
	fmt.Printf("  expected   about %v from now (ends about %s)\n", expected.Round(time.Second), time.Now().Add(expected).Format("15:04:05"))

	figures := map[string]map[scenario]edgeFigures{} // edge row name -> scenario -> medians
	for _, sc := range scenarios {
		fmt.Printf("\n%s\n", sc.title())
		res, err := measure(ctx, o, sc, rows, base)
		if err != nil {
			return err
		}
		printScenario(sc, rows, res, bare, figures)
	}

	// What the bare proxy and the edge saw: the proof that the streamed bodies were safe, and whether
	// the run recorder kept up.
	fmt.Println()
	var ps proxyStats
	if err := getJSON(ctx, proxy.url+proxyStatsPath, &ps); err != nil {
		fmt.Printf("bare proxy body check: unavailable (%v)\n", err)
	} else {
		fmt.Printf("bare proxy body check (golang/go#40747): %d request bodies streamed through (full duplex); answers begun before the\n", ps.Requests)
		fmt.Printf("  Transport was done with the body: %d (harmless with full duplex); body reads after the handler returned: %d (expected 0);\n", ps.EarlyAnswers, ps.LateReads)
		fmt.Printf("  body read errors: %d (expected 0)\n", ps.ReadErrors)
	}
	if m, err := scrape(ctx, base); err != nil {
		fmt.Printf("edge run recorder: unavailable (%v)\n", err)
	} else {
		fmt.Printf("edge run recorder: %.0f runs dropped because its buffer was full (0 means every edge request was recorded)\n", m["svc_recorder_runs_dropped_total"])
	}
	if m, err := scrape(ctx, edgeProc.url); err != nil {
		fmt.Printf("edge process run shipper: unavailable (%v)\n", err)
	} else {
		fmt.Printf("edge process run shipper: %.0f runs shipped, %.0f dropped because its buffer was full, %.0f batches retried\n",
			m["svc_edge_sync_runs_shipped_total"], m["svc_recorder_runs_dropped_total"], m["svc_edge_sync_ship_retries_total"])
	}

	printBudget(o, rows, scenarios, figures)
	return nil
}

// showTail prints the last lines of the server's log to stderr, but for the bench's own /metrics reads.
func showTail(path string, lines int) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return
	}
	var all []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.Contains(l, "route=/metrics ") {
			all = append(all, l)
		}
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	fmt.Fprintf(os.Stderr, "last lines of the svc server's log:\n%s\n", strings.Join(all, "\n"))
}

func rowNames(rows []*row) string {
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	return strings.Join(names, ", ")
}

// printBudget states the issue's budget checks, per edge row, with the medians they were judged on.
func printBudget(o options, rows []*row, scenarios []scenario, figures map[string]map[scenario]edgeFigures) {
	fmt.Printf("\nbudget checks (informative only: the exit code is 0 whatever they say; figures are medians over rounds, * = over budget)\n")
	type check struct {
		title string
		only  func(scenario) bool
		cell  func(edgeFigures) (string, bool)
		info  bool // no budget: shown for reference
	}
	checks := []check{
		{fmt.Sprintf("median throughput ≥ %.2f× bare at %d connections", budgetThroughput, o.conns),
			func(s scenario) bool { return s.conns == o.conns },
			func(f edgeFigures) (string, bool) { return fmt.Sprintf("%.2f×", f.thr), f.thr >= budgetThroughput }, false},
		{fmt.Sprintf("p50 ≤ %.1f× bare", budgetP50),
			func(scenario) bool { return true },
			func(f edgeFigures) (string, bool) { return fmt.Sprintf("%.2f×", f.p50), f.p50 <= budgetP50 }, false},
		// TTFB is the latency the edge adds where the CPUs have room. Where the load saturates them, a
		// request's latency is connections / throughput (Little's law), so TTFB there is the throughput
		// ratio in other units (0.85× the bare proxy's throughput, within budget, adds ~0.9 ms at 5 ms):
		// shown, but judged by the throughput budget.
		{fmt.Sprintf("streamed TTFB adds ≤ %.1f ms (where the CPUs are not saturated)", budgetTTFB.Seconds()*1000),
			func(s scenario) bool { return s.stream && !saturated(s.conns) },
			func(f edgeFigures) (string, bool) { return signedMs(f.ttfb), f.ttfb <= budgetTTFB }, false},
		{fmt.Sprintf("for reference, no budget: streamed TTFB at %d connections, queueing for the saturated CPUs (tracks throughput)", o.conns),
			func(s scenario) bool { return s.stream && saturated(s.conns) },
			func(f edgeFigures) (string, bool) { return signedMs(f.ttfb), true }, true},
		{"for reference, no budget: CPU time per request ×bare (the figure least moved by other load on the machine)",
			func(scenario) bool { return true },
			func(f edgeFigures) (string, bool) {
				if f.cpu == 0 {
					return "-", true
				}
				return fmt.Sprintf("%.2f×", f.cpu), true
			}, true},
	}
	for _, c := range checks {
		if !slices.ContainsFunc(scenarios, c.only) {
			continue
		}
		fmt.Printf("  %s\n", c.title)
		for _, r := range rows {
			if !r.edge {
				continue
			}
			if r.skip != "" {
				fmt.Printf("    SKIP  %-22s %s\n", r.name, r.skip)
				continue
			}
			pass := true
			var cells []string
			for _, sc := range scenarios {
				if !c.only(sc) {
					continue
				}
				s, ok := c.cell(figures[r.name][sc])
				if !ok {
					s += "*"
					pass = false
				}
				cells = append(cells, fmt.Sprintf("%-10s %-8s", sc.String(), s))
			}
			verdict := "PASS"
			if c.info {
				verdict = "    "
			} else if !pass {
				verdict = "FAIL"
			}
			fmt.Printf("    %s  %-22s %s\n", verdict, r.name, strings.TrimSpace(strings.Join(cells, "  ")))
		}
	}
	if saturated(o.conns) {
		fmt.Printf("  note: at %d connections the load saturates the %d CPUs, so p50 and TTFB there grow with each row's CPU cost\n", o.conns, runtime.NumCPU())
		fmt.Printf("  per request (requests queue for the CPUs), not only with the latency the edge adds; 1 connection shows the latter\n")
	}
}

// saturated reports whether load at this many connections saturates the machine's CPUs: each
// connection keeps the load generator, the upstream and the proxy busy in turn.
func saturated(conns int) bool { return conns > runtime.NumCPU() }

// recorderCatchUp is how long the run recorder may hold a partial batch before it writes it (the
// default recorder.Options.FlushInterval, 200ms), plus time for the write.
const recorderCatchUp = 250 * time.Millisecond

// settle lets the edge write the runs a slice left behind, so that the work does not weigh on the next
// row's slice: it waits until the recorder's queue is empty (for at most 3 seconds), then for the
// recorder's partial batch, which /metrics does not show, to be written.
func settle(ctx context.Context, base string) {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m, err := scrape(ctx, base)
		if err != nil || m["svc_recorder_queue_depth"] == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(recorderCatchUp)
}

var opsClient = &http.Client{Timeout: 5 * time.Second}

// scrape reads the unlabelled series of the server's /metrics.
func scrape(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := opsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := opsClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d.Nanoseconds())/1e6)
}

func signedMs(d time.Duration) string {
	return fmt.Sprintf("%+.2fms", float64(d.Nanoseconds())/1e6)
}

// spread formats min/median/max.
func spread(v []float64, format string) string {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return fmt.Sprintf(format+"/"+format+"/"+format, s[0], median(s), s[len(s)-1])
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// roundResult is one row's load in one round.
type roundResult struct {
	rps              float64
	p50, p99, ttfb50 time.Duration
	cpuPerReq        time.Duration // of the row's server process; 0 when not measured
}

// medians are a row's figures in a scenario, each the median over rounds.
type medians struct {
	rps                       float64
	p50, p99, ttfb, cpuPerReq time.Duration
}

func medianRound(rs []roundResult) medians {
	var rps, p50, p99, ttfb, cpu []float64
	for _, r := range rs {
		rps = append(rps, r.rps)
		p50 = append(p50, float64(r.p50))
		p99 = append(p99, float64(r.p99))
		ttfb = append(ttfb, float64(r.ttfb50))
		cpu = append(cpu, float64(r.cpuPerReq))
	}
	return medians{rps: median(rps), p50: time.Duration(median(p50)), p99: time.Duration(median(p99)),
		ttfb: time.Duration(median(ttfb)), cpuPerReq: time.Duration(median(cpu))}
}

// printScenario prints a scenario's table, and keeps the edge rows' medians for the budget checks.
func printScenario(sc scenario, rows []*row, res [][]roundResult, bare int, figures map[string]map[scenario]edgeFigures) {
	var line strings.Builder
	printf := func(format string, a ...any) { fmt.Fprintf(&line, format, a...) }
	endLine := func() {
		fmt.Println(strings.TrimRight(line.String(), " "))
		line.Reset()
	}
	printf("  %-22s %7s %8s %8s", "row", "req/s", "p50", "p99")
	if sc.stream {
		printf(" %8s", "ttfb")
	}
	printf(" %8s   %-15s %-15s %-15s", "cpu/req", "req/s ×bare", "p50 ×bare", "cpu/req ×bare")
	if sc.stream {
		printf(" %s", "Δttfb")
	}
	endLine()
	for i, r := range rows {
		if r.skip != "" {
			printf("  %-22s skipped: %s", r.name, r.skip)
			endLine()
			continue
		}
		m := medianRound(res[i])
		printf("  %-22s %7.0f %8s %8s", r.name, m.rps, ms(m.p50), ms(m.p99))
		if sc.stream {
			printf(" %8s", ms(m.ttfb))
		}
		cpu := "-"
		if m.cpuPerReq > 0 {
			cpu = fmt.Sprintf("%.0fµs", float64(m.cpuPerReq.Nanoseconds())/1e3)
		}
		printf(" %8s", cpu)
		if r.edge {
			var thr, lat, cpuRatio, dt []float64
			for k, e := range res[i] {
				b := res[bare][k]
				thr = append(thr, e.rps/b.rps)
				lat = append(lat, float64(e.p50)/float64(b.p50))
				if e.cpuPerReq > 0 && b.cpuPerReq > 0 {
					cpuRatio = append(cpuRatio, float64(e.cpuPerReq)/float64(b.cpuPerReq))
				}
				dt = append(dt, float64(e.ttfb50-b.ttfb50))
			}
			cpuCell := "-"
			if len(cpuRatio) == len(thr) {
				cpuCell = spread(cpuRatio, "%.2f")
			}
			printf("   %-15s %-15s %-15s", spread(thr, "%.2f"), spread(lat, "%.2f"), cpuCell)
			f := edgeFigures{thr: median(thr), p50: median(lat), ttfb: time.Duration(median(dt))}
			if len(cpuRatio) == len(thr) {
				f.cpu = median(cpuRatio)
			}
			if sc.stream {
				sort.Float64s(dt)
				printf(" %s (%s..%s)", signedMs(f.ttfb), signedMs(time.Duration(dt[0])), signedMs(time.Duration(dt[len(dt)-1])))
			}
			if figures[r.name] == nil {
				figures[r.name] = map[scenario]edgeFigures{}
			}
			figures[r.name][sc] = f
		}
		endLine()
	}
}

// measure runs a scenario's rounds and returns each row's results, round by round.
func measure(ctx context.Context, o options, sc scenario, rows []*row, base string) ([][]roundResult, error) {
	body := requestBody(sc.stream, o.usage)
	loaders := make([]*loader, len(rows))
	for i, r := range rows {
		if r.skip != "" {
			continue
		}
		loaders[i] = newLoader(r, body, sc.stream, sc.conns)
		defer loaders[i].close()
		if _, err := loaders[i].slice(ctx, warmup); err != nil {
			return nil, fmt.Errorf("%s, %s, warm-up: %w", sc.title(), r.name, err)
		}
	}
	// Each round gives every row o.duration of load, in slices that take turns: a burst of load from
	// elsewhere on the machine then weighs on all rows alike, not on the one that was running.
	// The order of the turns rotates from slice to slice, so that no row always follows the same one: a
	// row can leave work behind (garbage to collect, after recording runs), which the next row pays for.
	nSlices, sliceLen := slicing(o.duration)
	res := make([][]roundResult, len(rows)) // row -> round
	turn := 0
	for round := 0; round < o.rounds; round++ {
		acc := make([]sliceResult, len(rows))
		for k := 0; k < nSlices; k++ {
			turn++
			for j := range rows {
				i := (turn + j) % len(rows)
				r := rows[i]
				if r.skip != "" {
					continue
				}
				cpu0, ok0 := cpuTime(r.pid)
				sr, err := loaders[i].slice(ctx, sliceLen)
				if err != nil {
					return nil, fmt.Errorf("%s, %s, round %d: %w", sc.title(), r.name, round+1, err)
				}
				if r.records {
					ops := base
					if r.ops != "" {
						ops = r.ops
					}
					settle(ctx, ops)
				}
				// The row's CPU time includes the runs its slice left to write, written while settling.
				cpu1, ok1 := cpuTime(r.pid)
				sr.cpu, sr.cpuOK = cpu1-cpu0, ok0 && ok1
				acc[i].add(sr)
			}
		}
		for i, r := range rows {
			if r.skip == "" {
				if len(acc[i].lat) == 0 {
					return nil, fmt.Errorf("%s, %s, round %d: no request completed", sc.title(), r.name, round+1)
				}
				res[i] = append(res[i], acc[i].summary())
			}
		}
	}
	return res, nil
}

// maxSlice is the longest stretch a row is loaded before the next row takes its turn.
const maxSlice = 500 * time.Millisecond

// slicing splits a row's time in a round into slices of at most maxSlice.
func slicing(d time.Duration) (int, time.Duration) {
	n := int((d + maxSlice - 1) / maxSlice)
	return n, d / time.Duration(n)
}

// sliceResult is what one or more slices of load on a row measured.
type sliceResult struct {
	lat, ttfb []time.Duration // of the requests completed within the slice
	window    time.Duration
	served    int           // requests completed, those finished after the slice's end included
	cpu       time.Duration // CPU time of the row's server process meanwhile
	cpuOK     bool
	slices    int
}

func (s *sliceResult) add(o sliceResult) {
	s.lat = append(s.lat, o.lat...)
	s.ttfb = append(s.ttfb, o.ttfb...)
	s.window += o.window
	s.served += o.served
	s.cpu += o.cpu
	s.cpuOK = o.cpuOK && (s.cpuOK || s.slices == 0)
	s.slices++
}

// summary turns a round's pooled slices into throughput and percentiles.
func (s *sliceResult) summary() roundResult {
	sortDurations(s.lat)
	sortDurations(s.ttfb)
	n := len(s.lat)
	r := roundResult{rps: float64(n) / s.window.Seconds(), p50: s.lat[n/2], p99: s.lat[n*99/100], ttfb50: s.ttfb[len(s.ttfb)/2]}
	if s.cpuOK && s.served > 0 {
		r.cpuPerReq = s.cpu / time.Duration(s.served)
	}
	return r
}

// loader loads one row with conns connections, kept open from one slice to the next.
type loader struct {
	r      *row
	body   []byte
	stream bool
	conns  int
	tr     *http.Transport
	client *http.Client
}

func newLoader(r *row, body []byte, stream bool, conns int) *loader {
	tr := &http.Transport{Proxy: nil, MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, DisableCompression: true}
	return &loader{r: r, body: body, stream: stream, conns: conns, tr: tr, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (l *loader) close() { l.tr.CloseIdleConnections() }

// slice sends requests from l.conns goroutines, each one after the other, for the given time. It counts
// the requests that complete within that time: throughput is their number over the time, latency
// runs to an answer's last byte and ttfb to its first body byte. Requests still under way at the end
// are finished (so that their connections stay usable) but not counted.
func (l *loader) slice(ctx context.Context, d time.Duration) (sliceResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		res      sliceResult
		firstErr error
		wg       sync.WaitGroup
	)
	t0 := time.Now()
	end := t0.Add(d)
	for i := 0; i < l.conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			tail := make([]byte, 0, 64)
			var lat, ttfb []time.Duration
			served := 0
			for ctx.Err() == nil && time.Now().Before(end) {
				s, err := one(ctx, l.client, l.r, l.body, l.stream, buf, tail)
				if err != nil {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				served++
				if s.done.After(end) {
					break
				}
				lat = append(lat, s.lat)
				ttfb = append(ttfb, s.ttfb)
			}
			mu.Lock()
			res.served += served
			res.lat = append(res.lat, lat...)
			res.ttfb = append(res.ttfb, ttfb...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return sliceResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return sliceResult{}, err
	}
	res.window = d // a slice in which no request completed (the machine stalled) counts as such
	return res, nil
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

type sample struct {
	lat, ttfb time.Duration
	done      time.Time
}

// one sends a request and reads its answer to the end; a streamed answer must end with [DONE].
func one(ctx context.Context, client *http.Client, r *row, body []byte, stream bool, buf, tail []byte) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return sample{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.host != "" {
		req.Host = r.host // Go cannot resolve *.localhost; the connection goes to loopback anyway
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return sample{}, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var s sample
	tail = tail[:0]
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if s.ttfb == 0 {
				s.ttfb = time.Since(t0)
			}
			tail = keepTail(tail, buf[:n])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return sample{}, err
		}
	}
	s.done = time.Now()
	s.lat = s.done.Sub(t0)
	if stream && !bytes.Contains(tail, []byte("data: [DONE]")) {
		return sample{}, fmt.Errorf("streamed answer does not end with data: [DONE] (ends %q)", tail)
	}
	return s, nil
}

// keepTail appends p to tail, keeping the last cap(tail) bytes.
func keepTail(tail, p []byte) []byte {
	max := cap(tail)
	if len(p) >= max {
		return append(tail[:0], p[len(p)-max:]...)
	}
	if over := len(tail) + len(p) - max; over > 0 {
		tail = append(tail[:0], tail[over:]...)
	}
	return append(tail, p...)
}
