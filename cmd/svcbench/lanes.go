package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/bench"
	"github.com/svcdev/svc/internal/mockupstream"
)

// The lanes rows (-rows lanes): a replay eval beside callers (docs/OPERATIONS.md, "Lanes rows"). One
// model of four replicas with maxConcurrency (so that the edge's admission holds calls beyond it),
// an endpoint whose stored runs an eval replays against its own target: the callers' TTFT with the
// eval running against the same callers alone, then with a shadow canary copying every call as well
// (the shadow lane) beside the replay, and the eval's pace with no callers against the
// callers' own at full load, as ratios within the run. The replicas are internal/mockupstream's Engine's, or
// llm-d-inference-sim processes when LLMD_SIM names its binary.

// Budgets of the lanes rows (issues 41 and 42), informative like the others.
const (
	budgetLanesP95  = 1.10 // callers' TTFT p95 with a replay running (and with a shadow canary too) ≤ 1.1× alone
	budgetLanesTput = 0.8  // a replay with no callers ≥ 0.8× the fleet's throughput
	lanesReplicas   = 4
	lanesSeqs       = 4    // each replica's --max-num-seqs, and the model's maxConcurrency
	lanesRuns       = 2000 // stored runs an eval replays
	lanesCallers    = 6    // concurrent callers of the latency phases: under the capacity, as a steady load
	lanesPhase      = 6 * time.Second
	lanesTokens     = 32
	// lanesEvalConcurrency is the evals' concurrency: the most the API takes, more than the capacity, so
	// that the replay is held by admission rather than by its own bound.
	lanesEvalConcurrency = 64
)

// lanesRowsTime is about how long the lanes rows take: the seeding, six latency phases, two
// throughput phases.
const lanesRowsTime = 120 * time.Second

func lanesRows(ctx context.Context, svcBin, tmp string, logFile io.Writer) error {
	urls, model, label, stop, err := lanesReplicaSet(ctx, tmp, logFile)
	if err != nil {
		return err
	}
	defer stop()
	yaml := fmt.Sprintf("models:\n  - name: lanes\n    runtime: openai\n    upstreamModel: %s\n    public: true\n    default: true\n    replicas: [%s]\n    maxConcurrency: %d\n",
		model, strings.Join(urls, ", "), lanesSeqs)
	models := filepath.Join(tmp, "lanes-models.yaml")
	if err := os.WriteFile(models, []byte(yaml), 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	svc, err := start(svcBin, []string{"server", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", filepath.Join(tmp, "lanesdata"),
		"--models", models, "--base-url", base}, base, logFile)
	if err != nil {
		return err
	}
	defer svc.stop()
	cl, err := cloudapi.New(base, "").AnonymousProject(ctx)
	if err != nil {
		return err
	}
	target := cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "lanes"}
	dep, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "lanes", Target: target, AuthMode: cloudapi.AuthNone,
		RunRetentionMode: cloudapi.RetentionDays, RunRetentionDays: 7})
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128, Proxy: nil}}
	host := fmt.Sprintf("lanes.localhost:%d", port)
	call := func(ctx context.Context, rng *rand.Rand) (time.Duration, error) {
		return fleetCall(ctx, client, base, host, chatBody(msg("system", "You answer questions about a codebase."), msg("user", text(rng, 1<<10))))
	}

	loadavg, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nLanes rows (%d replicas of %d sequences, %s; maxConcurrency %d each: capacity %d; load average %s)\n",
		lanesReplicas, lanesSeqs, label, lanesSeqs, lanesReplicas*lanesSeqs, strings.TrimSpace(string(loadavg)))

	// The stored runs: callers' calls at full load until lanesRuns are answered.
	t0 := time.Now()
	var sent atomic.Int64
	seedFor := func(ctx context.Context) {
		closedLoopOf(ctx, 2*lanesReplicas*lanesSeqs, 0, func(rng *rand.Rand) bool {
			if sent.Add(1) > lanesRuns {
				return false
			}
			call(ctx, rng)
			return true
		})
	}
	seedFor(ctx)
	if err := lanesStored(ctx, cl, dep.ID, lanesRuns); err != nil {
		return err
	}
	fmt.Printf("  %d runs stored in %s\n", lanesRuns, time.Since(t0).Round(100*time.Millisecond))

	// Latency: callers alone, beside a replay, and beside a replay and a shadow canary copying every
	// call, twice, alternating.
	var alone, beside, shadowed []time.Duration
	fmt.Printf("  %-40s %9s %9s %8s %s\n", "callers", "ttft p50", "ttft p95", "failed", "replayed meanwhile")
	// startEval starts a replay of the stored runs against the endpoint's own target and returns it once
	// it is at its steady pace.
	startEval := func() (*cloudapi.Eval, error) {
		ev, err := cl.CreateEval(ctx, dep.ID, cloudapi.CreateEvalRequest{Candidate: target, Runs: cloudapi.EvalRuns{Limit: lanesRuns},
			Concurrency: lanesEvalConcurrency})
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		return ev, evalUnderWay(ctx, cl, dep.ID, ev.ID, 2*lanesSeqs)
	}
	besideEval := func(label string) ([]time.Duration, error) {
		ev, err := startEval()
		if err != nil {
			return nil, err
		}
		before, _ := cl.GetEval(ctx, dep.ID, ev.ID)
		ttft, failed, first := lanesCallersFor(ctx, call, lanesCallers, lanesPhase)
		after, _ := cl.GetEval(ctx, dep.ID, ev.ID)
		n := after.Progress.Done - before.Progress.Done
		// The callers' first calls (one each) come back from their pause while the eval may hold the
		// callers' reserve: the slowest of them is what preemption of borrowed places shortens.
		fmt.Printf("  %-40s %9s %9s %8d %d runs (%.0f/s); first %d calls: max %s%s\n", label, bench.Ms(pct(ttft, 0.5)), bench.Ms(pct(ttft, 0.95)), failed,
			n, float64(n)/lanesPhase.Seconds(), lanesCallers, bench.Ms(first), doneNote(after))
		if _, err := cl.CancelEval(ctx, dep.ID, ev.ID); err != nil && !after.Finished() {
			return nil, err
		}
		return ttft, nil
	}
	for round := 0; round < 2; round++ {
		ttft, failed, _ := lanesCallersFor(ctx, call, lanesCallers, lanesPhase)
		alone = append(alone, ttft...)
		fmt.Printf("  %-40s %9s %9s %8d\n", "alone", bench.Ms(pct(ttft, 0.5)), bench.Ms(pct(ttft, 0.95)), failed)
		ttft, err := besideEval("beside a replay (eval lane)")
		if err != nil {
			return err
		}
		beside = append(beside, ttft...)
		// A shadow canary on the same model: every caller's call is copied (shadow lane), and a replay
		// runs (eval lane), both behind the callers in the same admission.
		if _, err := cl.SetCanary(ctx, dep.ID, cloudapi.Canary{Target: target, Percent: 99, Mode: cloudapi.CanaryShadow}); err != nil {
			return fmt.Errorf("shadow canary: %w", err)
		}
		ttft, err = besideEval("beside a shadow canary (100%) and a replay")
		if err != nil {
			return err
		}
		shadowed = append(shadowed, ttft...)
		if _, err := cl.EndCanary(ctx, dep.ID); err != nil {
			return fmt.Errorf("end canary: %w", err)
		}
	}
	// The copies still queued or being recorded: counted once their number stops growing (at most 5 s).
	copies := -1
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); sleepCtx(ctx, 500*time.Millisecond) {
		n, err := lanesCopies(ctx, cl, dep.ID)
		if err != nil {
			return err
		}
		if n == copies {
			break
		}
		copies = n
	}
	fmt.Printf("  %-40s %d stored, %s dropped (queue full or yielded), of %d callers' calls answered in the shadowed phases\n", "shadow copies",
		copies, metricValue(ctx, base, "svc_edge_shadow_dropped_total"), len(shadowed))

	// Throughput: the callers at full load, then a replay alone; each with the calls the model's gate
	// held in flight, on average over the phase.
	// svc's CPU time per call in each (the eval worker's store work is in the replay's) against the
	// machine's busy share: on a starved VM what one process spends the others lack.
	pid := svc.cmd.Process.Pid
	simsCPU := func() (sum time.Duration) {
		for _, p := range lanesSimPids {
			c, _ := bench.CPUTime(p)
			sum += c
		}
		return sum
	}
	cpuOf := func() func(calls int) string {
		c0, _ := bench.CPUTime(pid)
		s0 := simsCPU()
		b0, t0, _ := bench.MachineCPU()
		return func(calls int) string {
			c1, _ := bench.CPUTime(pid)
			s1 := simsCPU()
			b1, t1, _ := bench.MachineCPU()
			busy := 0.0
			if t1 > t0 {
				busy = float64(b1-b0) / float64(t1-t0)
			}
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(max(calls, 1)) }
			sims := ""
			if len(lanesSimPids) > 0 {
				sims = fmt.Sprintf(", the simulators %.2f ms", per(s1-s0))
			}
			return fmt.Sprintf("svc %.2f ms CPU a call%s, machine %.0f%% busy", per(c1-c0), sims, 100*busy)
		}
	}
	inflight := inFlightSampler(ctx, base)
	cpu := cpuOf()
	ttft, failed, _ := lanesCallersFor(ctx, call, 4*lanesReplicas*lanesSeqs, lanesPhase)
	callersTput := float64(len(ttft)) / lanesPhase.Seconds()
	fmt.Printf("  %-30s %8.1f calls/s (%d failed; %.1f in flight; %s)\n", "callers at full load", callersTput, failed, inflight(), cpu(len(ttft)))
	ev, err := startEval()
	if err != nil {
		return err
	}
	// "No callers": the gate lends the callers' reserve to the replay once none has been about for its
	// lending delay (internal/admission's DefaultLendAfter windows after the last caller's call, 5-6 s);
	// the phase starts after it.
	sleepCtx(ctx, 7*time.Second)
	before, _ := cl.GetEval(ctx, dep.ID, ev.ID)
	inflight = inFlightSampler(ctx, base)
	cpu = cpuOf()
	sleepCtx(ctx, lanesPhase)
	after, err := cl.GetEval(ctx, dep.ID, ev.ID)
	if err != nil {
		return err
	}
	replayTput := float64(after.Progress.Done-before.Progress.Done) / lanesPhase.Seconds()
	fmt.Printf("  %-30s %8.1f runs/s (%.1f in flight; %s)%s\n", "a replay alone", replayTput, inflight(), cpu(after.Progress.Done-before.Progress.Done), doneNote(after))
	cl.CancelEval(ctx, dep.ID, ev.ID)

	slices.Sort(alone)
	slices.Sort(beside)
	p95 := float64(pct(beside, 0.95)) / float64(pct(alone, 0.95))
	slices.Sort(shadowed)
	p95Shadow := float64(pct(shadowed, 0.95)) / float64(pct(alone, 0.95))
	tput := replayTput / callersTput
	fmt.Printf("\n  Lanes budget (issues 41, 42; informative):\n")
	fmt.Printf("    callers' TTFT p95 beside a replay: %.2f× alone (%s against %s)  budget ≤ %.2f×  %s\n", p95,
		bench.Ms(pct(beside, 0.95)), bench.Ms(pct(alone, 0.95)), budgetLanesP95, verdict(p95 <= budgetLanesP95))
	fmt.Printf("    callers' TTFT p95 beside a shadow canary at 100%% and a replay: %.2f× alone (%s against %s)  budget ≤ %.2f×  %s\n", p95Shadow,
		bench.Ms(pct(shadowed, 0.95)), bench.Ms(pct(alone, 0.95)), budgetLanesP95, verdict(p95Shadow <= budgetLanesP95))
	fmt.Printf("    a replay with no callers: %.2f× the callers' throughput  budget ≥ %.2f×  %s\n", tput, budgetLanesTput, verdict(tput >= budgetLanesTput))
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "OVER"
}

func doneNote(e *cloudapi.Eval) string {
	if e.Finished() {
		return " (the eval finished within the phase: the figure is a floor)"
	}
	return ""
}

func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// lanesCallersFor runs n closed-loop callers for d and returns their calls' TTFTs and failures, and
// the slowest TTFT of their first calls (begun as the phase starts).
func lanesCallersFor(ctx context.Context, call func(context.Context, *rand.Rand) (time.Duration, error), n int, d time.Duration) (ttft []time.Duration, failed int, first time.Duration) {
	var mu sync.Mutex
	begin := time.Now()
	end := begin.Add(d)
	closedLoopOf(ctx, n, 0, func(rng *rand.Rand) bool {
		now := time.Now()
		if now.After(end) {
			return false
		}
		t, err := call(ctx, rng)
		mu.Lock()
		if err != nil {
			failed++
		} else {
			ttft = append(ttft, t)
			if now.Sub(begin) < 5*time.Millisecond { // a caller's first call
				first = max(first, t)
			}
		}
		mu.Unlock()
		return true
	})
	return ttft, failed, first
}

// closedLoopOf runs n clients, each sending its next call when the last is answered, while one says so.
func closedLoopOf(ctx context.Context, n int, seed uint64, one func(rng *rand.Rand) bool) {
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed+5, uint64(c)+uint64(time.Now().UnixNano())))
			for ctx.Err() == nil && one(rng) {
			}
		})
	}
	wg.Wait()
}

// lanesStored waits until the deployment's recorder has stored n runs.
func lanesStored(ctx context.Context, cl *cloudapi.Client, depID string, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		got := 0
		cursor := ""
		for {
			page, err := cl.ListRuns(ctx, depID, cloudapi.ListRunsOptions{Limit: 100, Cursor: cursor})
			if err != nil {
				return err
			}
			got += len(page.Runs)
			if cursor = page.NextCursor; cursor == "" || got >= n {
				break
			}
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d runs stored after a minute, want %d", got, n)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// metricValue is the server's unlabelled series name as scraped now, "?" when it cannot be read.
func metricValue(ctx context.Context, base, name string) string {
	if m, err := scrape(ctx, base); err == nil {
		if v, ok := m[name]; ok {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return "?"
}

// inFlightSampler reads the server's svc_admission_in_flight every 200 ms from now on; the function it
// returns stops it and gives the mean of the readings (NaN when none could be read).
func inFlightSampler(ctx context.Context, base string) func() float64 {
	ctx, cancel := context.WithCancel(ctx)
	var sum, n float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sleepCtx(ctx, 200*time.Millisecond) {
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(b), "\n") {
				if rest, ok := strings.CutPrefix(line, "svc_admission_in_flight{"); ok {
					var v float64
					if _, err := fmt.Sscan(rest[strings.LastIndexByte(rest, ' ')+1:], &v); err == nil {
						sum, n = sum+v, n+1
					}
				}
			}
		}
	}()
	return func() float64 {
		cancel()
		<-done
		return sum / n
	}
}

// lanesCopies is how many shadow copies the deployment stored (runs of arm shadow; usage's copies
// count the evals' replays too).
func lanesCopies(ctx context.Context, cl *cloudapi.Client, depID string) (int, error) {
	n, cursor := 0, ""
	for {
		page, err := cl.ListRuns(ctx, depID, cloudapi.ListRunsOptions{Limit: 200, Cursor: cursor, Arm: cloudapi.ArmShadow})
		if err != nil {
			return 0, err
		}
		n += len(page.Runs)
		if cursor = page.NextCursor; cursor == "" {
			return n, nil
		}
	}
}

// evalUnderWay waits until the eval has replayed at least n runs: it is at its steady pace.
func evalUnderWay(ctx context.Context, cl *cloudapi.Client, depID, evalID string, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err := cl.GetEval(ctx, depID, evalID)
		if err != nil {
			return err
		}
		if e.Progress.Done >= n {
			return nil
		}
		if e.Finished() || time.Now().After(deadline) {
			return fmt.Errorf("eval %s: %s with %d of %d replayed %s", evalID, e.State, e.Progress.Done, e.Progress.Total, e.Error)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// lanesSimPids are the llm-d-inference-sim processes' ids, for their CPU time.
var lanesSimPids []int

// lanesReplicaSet starts the replicas: llm-d-inference-sim processes when LLMD_SIM names its binary,
// else fake vLLM replicas in this process. It returns their URLs, the model name they serve, and a stop.
func lanesReplicaSet(ctx context.Context, tmp string, logFile io.Writer) (urls []string, model, label string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if sim := os.Getenv("LLMD_SIM"); sim != "" {
		model = "meta-llama/Llama-3.1-8B-Instruct"
		for i := 0; i < lanesReplicas; i++ {
			port, err := freePort()
			if err != nil {
				stop()
				return nil, "", "", nil, err
			}
			c, err := startWith(sim, []string{"--port", fmt.Sprint(port), "--model", model, "--force-dummy-tokenizer", "--mode", "echo",
				"--max-num-seqs", fmt.Sprint(lanesSeqs), "--max-model-len", "8192", "--prefill-overhead", "2ms", "--prefill-time-per-token", "50us",
				"--inter-token-latency", "2ms"}, []string{"POD_IP=127.0.0.1"}, fmt.Sprintf("http://127.0.0.1:%d", port), logFile)
			if err != nil {
				stop()
				return nil, "", "", nil, fmt.Errorf("llm-d-inference-sim: %w", err)
			}
			stops = append(stops, c.stop)
			lanesSimPids = append(lanesSimPids, c.cmd.Process.Pid)
			urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/v1", port))
		}
		return urls, model, "llm-d-inference-sim", stop, nil
	}
	for i := 0; i < lanesReplicas; i++ {
		s := mockupstream.NewEngine(mockupstream.EngineConfig{MaxNumSeqs: lanesSeqs, PrefillTime: fleetPrefillPerTok, TTFTBase: 2 * time.Millisecond,
			ITL: fleetITL, Tokens: lanesTokens})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, "", "", nil, err
		}
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		stops = append(stops, func() { srv.Close() })
		urls = append(urls, "http://"+ln.Addr().String()+"/v1")
	}
	return urls, "fake-model", "internal/mockupstream's Engine", stop, nil
}
