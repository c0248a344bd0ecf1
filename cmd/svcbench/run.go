package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/bench"
)

// sliceOverhead is the time it takes to finish the requests under way at the end of a slice (an
// estimate, for the expected duration of the run).
const sliceOverhead = 20 * time.Millisecond

// run starts the processes, makes the deployments through the management API, measures every scenario
// and prints the report.
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

	if onlyFleet(o.rows) {
		logFile, err := os.Create(filepath.Join(tmp, "svc.log"))
		if err != nil {
			return err
		}
		defer logFile.Close()
		if strings.Contains(o.rows, "fleet") {
			if err := fleetRows(ctx, svcBin, tmp, logFile); err != nil {
				return err
			}
		}
		if strings.Contains(o.rows, "lanes") {
			if err := lanesRows(ctx, svcBin, tmp, logFile); err != nil {
				return err
			}
		}
		if strings.Contains(o.rows, "kv") {
			return kvRows(ctx, svcBin, tmp, logFile)
		}
		return nil
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

	// The shadow canary's upstream: in production a server of its own, here a second mock on the same
	// CPUs, at the lowest priority (nice 19) where there is one, so that it takes only the CPU time the
	// callers' processes leave, as another machine would take none. What the copies cost svc itself
	// stays in the row.
	canaryName, canaryArgs := self, []string{"-role", "mock", "-tokens", fmt.Sprint(o.tokens)}
	if nice, err := exec.LookPath("nice"); err == nil {
		canaryName, canaryArgs = nice, append([]string{"-n", "19", self}, canaryArgs...)
	}
	canaryMock, err := start(canaryName, canaryArgs, "", os.Stderr)
	if err != nil {
		return err
	}
	defer canaryMock.stop()
	models := filepath.Join(tmp, "models.yaml")
	// An openai model served on /v1/messages (supportsMessages) and, as every model, on /v1/responses,
	// whose upstream serves neither (no upstreamMessages, no supportsResponses): the edge translates
	// both to chat completions, which the translated rows measure. bench-canary is the shadow canary.
	yaml := fmt.Sprintf("models:\n  - name: bench-llama\n    runtime: openai\n    upstreamUrl: %s/v1\n    upstreamModel: mock-model\n    public: true\n    default: true\n    supportsMessages: true\n  - name: bench-canary\n    runtime: openai\n    upstreamUrl: %s/v1\n    upstreamModel: mock-model\n    public: true\n", mock.url, canaryMock.url)
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
	cl, err := cloudapi.New(base, "").AnonymousProject(ctx)
	if err != nil {
		return err
	}
	edgeURL := base + "/v1/chat/completions"
	deploy := func(name, slug, retention string) (*bench.Row, string, error) {
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
		return &bench.Row{Name: name, URL: edgeURL, Host: fmt.Sprintf("%s.localhost:%d", slug, port), Key: key.Plaintext, Edge: true,
			Records: retention != "none", PID: svc.cmd.Process.Pid}, d.ID, nil
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
		limits.Skip = "configureLimits: " + err.Error()
	}
	// The budget's own configuration: metrics, request ids, usage aggregation and non-binding limits,
	// without transcripts (run recording is measured by the rows above).
	limitsNoRuns, limitsNoRunsID, err := deploy("edge + limits, no runs", "bench-limits-noruns", "none")
	if err != nil {
		return err
	}
	if err := configureLimits(ctx, cl, limitsNoRunsID); err != nil {
		limitsNoRuns.Skip = "configureLimits: " + err.Error()
	}
	// The edge row's configuration with a shadow canary: every call copied, after its answer, to the
	// canary (bench-canary, the second mock). The callers' time to first byte is judged against the edge
	// row's, within that row's noise (Quiet; docs/API.md, "Canary").
	shadow, shadowID, err := deploy("edge + shadow canary", "bench-shadow", o.retention)
	if err != nil {
		return err
	}
	shadow.Feature, shadow.Quiet = "a shadow canary copying every call", edge
	if _, err := cl.SetCanary(ctx, shadowID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "bench-canary"},
		Percent: 1, Mode: cloudapi.CanaryShadow}); err != nil {
		shadow.Skip = "SetCanary: " + err.Error()
	}
	edgeProc, err := startEdgeProcess(ctx, svcBin, tmp, base, models, logFile, "bench-edge")
	if err != nil {
		return err
	}
	defer edgeProc.stop()
	// The same again with tracing on: every request a span (and its upstream call one), exported over
	// OTLP/HTTP to a sink that reads and drops them.
	sink, err := start(self, []string{"-role", "otlp"}, "", os.Stderr)
	if err != nil {
		return err
	}
	defer sink.stop()
	tracedProc, err := startEdgeProcess(ctx, svcBin, tmp, base, models, logFile, "bench-edge-traced", "--otlp-endpoint", sink.url)
	if err != nil {
		return err
	}
	defer tracedProc.stop()
	// The same again without its spool (--spool-dir none: runs wait in memory only): what writing them
	// to disk before shipping costs.
	memProc, err := startEdgeProcess(ctx, svcBin, tmp, base, models, logFile, "bench-edge-memory", "--spool-dir", "none")
	if err != nil {
		return err
	}
	defer memProc.stop()
	// The same deployment and key as the edge row, served by the edge process from its snapshot; its
	// runs are shipped to the server.
	edgeProcessRow := func(name string, p *child) *bench.Row {
		return &bench.Row{Name: name, URL: p.url + "/v1/chat/completions", Host: "bench.localhost" + strings.TrimPrefix(p.url, "http://127.0.0.1"),
			Key: edge.Key, Edge: true, Records: o.retention != "none", PID: p.cmd.Process.Pid, Ops: p.url}
	}
	remote := edgeProcessRow("edge process", edgeProc)
	memory := edgeProcessRow("edge process, no spool", memProc)
	traced := edgeProcessRow("edge process, traced", tracedProc)
	traced.Feature = "tracing every request"
	// The translated streams: the "edge, retention none" row's deployment and key on /v1/messages and
	// /v1/responses, judged against that row (no run recording on either side, so that the ratio is the
	// translation's).
	translated := func(name string, s bench.Surface) *bench.Row {
		return &bench.Row{Name: name, URL: base + s.Path(), Host: noRuns.Host, Key: noRuns.Key, Edge: true,
			PID: svc.cmd.Process.Pid, Surface: s, Chat: noRuns}
	}
	rows := []*bench.Row{
		{Name: "direct", URL: mock.url + "/v1/chat/completions", PID: mock.cmd.Process.Pid},
		{Name: "bare proxy", URL: proxy.url + "/v1/chat/completions", PID: proxy.cmd.Process.Pid},
		edge, noRuns, limits, limitsNoRuns, shadow, remote, memory, traced,
		translated("edge, messages", bench.SurfaceMessages), translated("edge, responses", bench.SurfaceResponses),
	}
	agents, err := agentRows(noRuns)
	if err != nil {
		return err
	}
	rows = append(rows, agents...)
	// The "edge + limits" deployment served by two more edge processes, one counting its limits itself
	// and one in Redis (--redis, redis-server's CPU time counted with the row's): what shared limits
	// cost, judged (BudgetSharedCPU, BudgetSharedThroughput).
	localProc, err := startEdgeProcess(ctx, svcBin, tmp, base, models, logFile, "bench-edge-local")
	if err != nil {
		return err
	}
	defer localProc.stop()
	limitsRow := func(name string, p *child) *bench.Row {
		return &bench.Row{Name: name, URL: p.url + "/v1/chat/completions", Host: "bench-limits.localhost" + strings.TrimPrefix(p.url, "http://127.0.0.1"),
			Key: limits.Key, Edge: true, Records: o.retention != "none", PID: p.cmd.Process.Pid, Ops: p.url}
	}
	localLimits := limitsRow("edge process + limits", localProc)
	localLimits.Feature = "limits counted in the process"
	rows = append(rows, localLimits)
	shared := &bench.Row{Name: "edge process + Redis", Skip: "redis-server is not installed (make test-deps)", Against: localLimits}
	if rds, err := startRedis(tmp); err == nil {
		defer rds.stop()
		redisEdge, err := startEdgeProcess(ctx, svcBin, tmp, base, models, logFile, "bench-edge-redis", "--redis", rds.url)
		if err != nil {
			return err
		}
		defer redisEdge.stop()
		shared = limitsRow(shared.Name, redisEdge)
		shared.Feature, shared.Also, shared.Against = "limits counted in Redis", []int{rds.cmd.Process.Pid}, localLimits
	}
	rows = append(rows, shared)
	bare := rows[1]
	rows = bench.SelectRows(rows, o.rows, bare)
	scenarios := []bench.Scenario{{Stream: false, Conns: o.conns}, {Stream: false, Conns: 1}, {Stream: true, Conns: o.conns}, {Stream: true, Conns: 1}}
	if o.conns == 1 {
		scenarios = []bench.Scenario{{Stream: false, Conns: 1}, {Stream: true, Conns: 1}}
	}
	if slices.ContainsFunc(rows, func(r *bench.Row) bool { return r.Quiet != nil }) {
		// Where the shadow row is judged: its copies' work beside CPUs with room (bench.PacedPause).
		scenarios = append(scenarios, bench.Scenario{Stream: true, Conns: 1, Pause: bench.PacedPause})
	}
	nSlices, _ := bench.Slicing(o.duration)
	var expected time.Duration
	for _, sc := range scenarios {
		active, recording := 0, 0
		for _, r := range bench.ScenarioRows(sc, rows) {
			if r.Skip == "" {
				active++
				if r.Records {
					recording++
				}
			}
		}
		perRound := time.Duration(active)*o.duration + time.Duration(nSlices)*(time.Duration(active)*sliceOverhead+time.Duration(recording)*recorderCatchUp)
		expected += time.Duration(active)*bench.Warmup + time.Duration(o.rounds)*perRound
	}
	if o.rows == "" || strings.Contains(o.rows, "fleet") {
		expected += fleetRowsTime
	}
	if o.rows == "" || strings.Contains(o.rows, "lanes") {
		expected += lanesRowsTime
	}
	if o.rows == "" || strings.Contains(o.rows, "kv") {
		expected += kvRowsTime
	}
	// The watchdog: whatever happens, the bench ends.
	ctx, cancel := context.WithTimeout(ctx, 2*expected+2*time.Minute)
	defer cancel()

	limitsNote := "measured"
	if limits.Skip != "" {
		limitsNote = "skipped (" + limits.Skip + ")"
	}
	fmt.Printf("\nsvcbench: the edge's overhead on loopback; %d CPUs (GOMAXPROCS %d), %s %s/%s; load generator, mock, proxy and edge share them\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("  load       chat completions, %d tokens per answer, non-streamed and streamed (stream usage asked: %v), at %d connections and at 1\n", o.tokens, o.usage, o.conns)
	_, sliceLen := bench.Slicing(o.duration)
	fmt.Printf("  rounds     %d per scenario, %v per row in each, in slices of %v that take turns, the order rotating (%s)\n", o.rounds, o.duration, sliceLen, bench.RowNames(rows))
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
	fmt.Printf("  no spool   the edge process again with --spool-dir none (runs wait for shipping in memory only, not on disk)\n")
	fmt.Printf("  traced     the edge process again with tracing on (--otlp-endpoint): a span per request and per upstream call,\n")
	fmt.Printf("             exported in batches over OTLP/HTTP to a sink that drops them; compare with the edge process row\n")
	fmt.Printf("  translated edge, messages and edge, responses: the edge, retention none row's deployment and key on /v1/messages\n")
	fmt.Printf("             (x-api-key) and /v1/responses, the same conversation, translated to chat completions; streamed scenarios\n")
	fmt.Printf("             only; their cpu per upstream chunk is set against that chat row's, round by round (budget ≤ %.1f×)\n", bench.BudgetTranslated)
	fmt.Printf("  + limits   an edge process serving the \"edge + limits\" deployment, its limits counted in the process\n")
	fmt.Printf("  + Redis    the same with --redis (a local redis-server): leases of the limits' budgets and token charges summed\n")
	fmt.Printf("             every 50 ms; its cpu/req includes redis-server's, judged against + limits (≤ %.2f× CPU, ≥ %.2f× req/s)\n",
		bench.BudgetSharedCPU, bench.BudgetSharedThroughput)
	fmt.Printf("  shadow     edge + shadow canary: the edge row's configuration with a shadow canary copying every call, after its\n")
	fmt.Printf("             answer, to a second mock at nice 19 (the canary's upstream, a server of its own in production); its\n")
	fmt.Printf("             streamed TTFB at 1 connection, paced (%v between an answer and the next request, so that the CPUs\n", bench.PacedPause)
	fmt.Printf("             have room beside the requests), judged against the edge row's, within that row's noise over the rounds\n")
	fmt.Printf("  recorder   after each slice of a row that records runs, the bench waits %v for the recorder's last batch, so that\n", recorderCatchUp)
	fmt.Printf("             writing it does not weigh on the next row (its CPU time counts for the row that left it)\n")
	fmt.Printf("  figures    medians over rounds of req/s, p50 and p99 latency, ttfb (time to the first body byte) and cpu/req (CPU time\n")
	fmt.Printf("             of the row's server process per request: mock, proxy or svc; Linux only); busy: the machine's CPUs busy\n")
	fmt.Printf("             during the row's slices, every process's work (Linux only); ×bare: per-round ratios to the\n")
	fmt.Printf("             bare proxy of the same round, min/med/max; Δttfb: edge − bare in the same round, median (min..max)\n")
	if o.rounds < 5 {
		fmt.Printf("  note       fewer than 5 rounds: min / median / max say little\n")
	}
	fmt.Printf("  expected   about %v from now (ends about %s)\n", expected.Round(time.Second), time.Now().Add(expected).Format("15:04:05"))

	// What every streamed answer is made of upstream, whatever its surface: CPU per chunk divides by it.
	chunks, err := bench.UpstreamChunks(ctx, mock.url+"/v1/chat/completions")
	if err != nil {
		return err
	}
	figures := bench.Figures{}
	for _, sc := range scenarios {
		fmt.Printf("\n%s\n", sc.Title())
		scRows := bench.ScenarioRows(sc, rows)
		res, err := bench.Measure(ctx, bench.Plan{Scenario: sc, Body: bench.RequestBody(sc.Stream, o.usage), Rounds: o.rounds, Duration: o.duration,
			CPUTime: bench.CPUTime, Settle: func(ctx context.Context, r *bench.Row) {
				ops := base
				if r.Ops != "" {
					ops = r.Ops
				}
				settle(ctx, ops)
			}}, scRows)
		if err != nil {
			return err
		}
		bench.PrintScenario(os.Stdout, sc, scRows, res, slices.Index(scRows, bare), figures)
		if sc.Stream {
			bench.PrintTranslated(os.Stdout, sc, scRows, res, chunks, figures)
		}
	}

	// What the bare proxy and the edge saw: the proof that the streamed bodies were safe, and whether
	// the run recorder kept up.
	fmt.Println()
	var ps bench.ProxyStats
	if err := getJSON(ctx, proxy.url+bench.ProxyStatsPath, &ps); err != nil {
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

	var exports struct{ Requests, Bytes int64 }
	if err := getJSON(ctx, sink.url+"/stats", &exports); err != nil {
		fmt.Printf("otlp sink: unavailable (%v)\n", err)
	} else {
		fmt.Printf("otlp sink: %d exports, %d bytes of spans received from the traced edge process\n", exports.Requests, exports.Bytes)
	}

	if o.rows == "" || strings.Contains(o.rows, "postgres") {
		if err := pgIngestRow(ctx, svcBin, tmp, models, logFile, o.conns, 5*time.Second, o.pgOutage); err != nil {
			return err
		}
	}
	if o.rows == "" || strings.Contains(o.rows, "fleet") {
		if err := fleetRows(ctx, svcBin, tmp, logFile); err != nil {
			return err
		}
	}
	if o.rows == "" || strings.Contains(o.rows, "lanes") {
		if err := lanesRows(ctx, svcBin, tmp, logFile); err != nil {
			return err
		}
	}
	if o.rows == "" || strings.Contains(o.rows, "kv") {
		if err := kvRows(ctx, svcBin, tmp, logFile); err != nil {
			return err
		}
	}
	bench.PrintBudget(os.Stdout, o.conns, rows, scenarios, figures)
	return nil
}

// onlyFleet reports whether -rows asks for the fleet, lanes or KV-events rows alone: they need none of the other
// rows' processes.
func onlyFleet(rows string) bool {
	any := false
	for _, w := range strings.Split(rows, ",") {
		switch strings.TrimSpace(w) {
		case "":
		case "fleet", "lanes", "kv":
			any = true
		default:
			return false
		}
	}
	return any
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
