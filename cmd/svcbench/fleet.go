package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/bench"
	"github.com/svcdev/svc/internal/mockupstream"
)

// The fleet rows: the same workload sent through `svc server`'s edge to a fleet of fake vLLM replicas
// (internal/mockupstream's Engine, in this process on loopback listeners) under each routing, each routing on fresh
// replicas (empty caches), judged as ratios within the run (docs/OPERATIONS.md, "Fleet rows").

// Budgets of the fleet rows (issue 28), informative like the others.
const (
	budgetAgentP50    = 0.3  // agent sessions: affinity TTFT p50 ≤ 0.3× round-robin's
	budgetAgentP95    = 0.5  // and p95 ≤ 0.5×
	budgetAgentCached = 0.9  // and cached prompt tokens ≥ 0.9× the ideal
	budgetAdaptersP95 = 0.5  // many adapters: affinity TTFT p95 ≤ 0.5× round-robin's
	budgetUniformTput = 0.97 // uniform prompts: affinity throughput ≥ 0.97× least-loaded's
	budgetUniformP95  = 1.1  // and p95 ≤ 1.1×
	budgetEdgesP50    = 0.5  // two edges alternating (issue 43): affinity TTFT p50 ≤ 0.5× round-robin's
	budgetEdgesP95    = 0.6  // and p95 ≤ 0.6×
	budgetEdgesCached = 0.95 // and cached prompt tokens ≥ 0.95× the ideal
	fleetReplicas     = 4
	fleetWorkers      = 16 // concurrent sessions or clients of each workload
	fleetAgentTurns   = 10
	fleetSessionGap   = 50 * time.Millisecond // between two agent sessions' first turns
	fleetLoadFor      = 10 * time.Second      // the adapters and uniform workloads' measured length
	// fleetWarmUp is the load of the adapters and uniform workloads before they are measured, the same
	// under every routing: the row judges a fleet in its steady state, not the first calls into empty
	// caches and adapter slots (16 calls at once, a quarter of affinity's slowest 5% of a cold 3 s run).
	fleetWarmUp         = time.Second
	fleetPrefillPerTok  = 50 * time.Microsecond
	fleetAnswerTokens   = 32 // each answer's tokens, fleetITL apart: a short answer of a fast model
	fleetITL            = 2 * time.Millisecond
	fleetAdapters       = 12 // against 4 replicas × maxLoras 2 = 8 slots
	fleetMaxLoras       = 2
	fleetLoraLoad       = 5 * time.Millisecond // an adapter into a GPU slot: rank 16 of an 8B model, 84 MB at 16 GB/s
	fleetAnonymousQuota = 5                    // live endpoints of an anonymous identity (core.AnonymousEndpointLimit)
)

// fleetRowsTime is about how long the fleet rows take (their server's start, 20 workloads of a few
// seconds), for the bench's expected duration.
const fleetRowsTime = 5 * time.Minute

// fleetModes are the routings each workload runs under. "pinned" is the ideal each is judged against
// in the same run: no picker, each session, client or adapter sent to one replica of its own (a model
// per replica, session or client i and adapter a on replica i or a mod 4).
var fleetModes = []string{"round-robin", "least-loaded", "affinity", "pinned"}

// fleetCallFunc sends one request of a workload to an endpoint through edge 0 (`svc server`'s own) or
// edge 1 (an `svc edge` process in front of it, with its own picker).
type fleetCallFunc func(ctx context.Context, slug string, edge int, body []byte) error

// fleetWorkload is one of the three workloads: its replicas' settings and its clients.
type fleetWorkload struct {
	name, short string
	engine      mockupstream.EngineConfig
	warmUp      time.Duration // the load before the calls are measured (fleetWarmUp; the agent sessions: none)
	adapters    int
	// run sends the workload's requests through call until done; worker i's requests are the same
	// under every routing. slugs has one endpoint per replica under "pinned" (per adapter in the
	// adapters workload, whatever the routing).
	run func(ctx context.Context, call fleetCallFunc, slugs []string)
	// twoEdges says the workload uses edge 1 too.
	twoEdges bool
	// modes are the routings it runs under (nil: fleetModes).
	modes []string
}

// fleetResult is what one workload measured under one routing.
type fleetResult struct {
	ttft                  []time.Duration
	elapsed               time.Duration
	failed                int
	firstErr              error
	prompt, cached, ideal int64
	slotWaits             int64
	loraLoads             int64
	slotWaitTime          time.Duration
	calls                 []fleetCallTime // adapters: each call's start and TTFT, for the breakdown
	// sent is every call of the adapters workload, the warm-up's too, by its start (minAdapterLoads).
	sent []sentCall
	// perReplica is the calls each replica served (the adapters workloads).
	perReplica []int64
}

// sentCall is a call's endpoint (its adapter) and when it was sent.
type sentCall struct {
	slug  string
	start time.Time
}

// minAdapterLoads is the fewest adapter loads that serve calls in the order they were sent with the
// fleet's slots as one cache (Belady's rule: the adapter needed again the latest leaves): the minimum
// the traffic needs when no call waits for another adapter's to be served first. No placement beats
// it; the internal/fleet model computes the same (minLoads).
func minAdapterLoads(sent []sentCall, slots int) int {
	seq := slices.Clone(sent)
	slices.SortStableFunc(seq, func(a, b sentCall) int { return a.start.Compare(b.start) })
	next := make([]int, len(seq))
	last := map[string]int{}
	for i := len(seq) - 1; i >= 0; i-- {
		next[i] = len(seq)
		if j, ok := last[seq[i].slug]; ok {
			next[i] = j
		}
		last[seq[i].slug] = i
	}
	in := map[string]int{} // adapter in a slot -> the index of its next call
	loads := 0
	for i, c := range seq {
		if _, ok := in[c.slug]; !ok {
			loads++
			if len(in) == slots {
				far, at := "", -1
				for a, n := range in {
					if n > at || n == at && a < far {
						far, at = a, n
					}
				}
				delete(in, far)
			}
		}
		in[c.slug] = next[i]
	}
	return loads
}

// fleetCallTime is one answered call as the client saw it, keyed by its prompt's last bytes.
type fleetCallTime struct {
	key        string
	start      time.Time
	ttft       time.Duration
	replicaPre time.Duration // from the call's start to its arrival at the replica (svc's hold and the edge)
	trace      *mockupstream.CallTrace
}

// traceKeyLen is how many of a prompt's last bytes (random words) identify its call.
const traceKeyLen = 48

// traces collects the replicas' CallTraces of one run by their prompts' last bytes.
type traces struct {
	mu sync.Mutex
	m  map[string]mockupstream.CallTrace
}

func (t *traces) add(c mockupstream.CallTrace) {
	p := strings.TrimSuffix(c.Prompt, "\"\n")
	if len(p) < traceKeyLen {
		return
	}
	t.mu.Lock()
	t.m[p[len(p)-traceKeyLen:]] = c
	t.mu.Unlock()
}

// bodyKey is the last bytes of the last message's content of a chatBody.
func bodyKey(body []byte) string {
	i := bytes.LastIndex(body, []byte(`","role":"user"}`)) // json.Marshal orders a message's keys
	if i < traceKeyLen {
		return ""
	}
	return string(body[i-traceKeyLen : i])
}

// printSlowest prints where the slowest 5% of calls (by TTFT) spent their time, against all calls.
func printSlowest(res *fleetResult, tr *traces) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var calls []fleetCallTime
	for _, c := range res.calls {
		if t, ok := tr.m[c.key]; ok {
			c.trace = &t
			c.replicaPre = t.Arrived.Sub(c.start)
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return
	}
	slices.SortFunc(calls, func(a, b fleetCallTime) int { return int(a.ttft - b.ttft) })
	line := func(what string, cs []fleetCallTime) {
		var pre, seq, slot, gpu, load, prefill, ttft time.Duration
		recached, loads := 0, 0
		for _, c := range cs {
			pre += c.replicaPre
			seq += c.trace.SeqWait
			slot += c.trace.SlotWait
			gpu += c.trace.GPUWait
			load += c.trace.Load
			prefill += c.trace.Prefill
			ttft += c.ttft
			if c.trace.Cached < c.trace.Tokens/2 {
				recached++ // its instructions (2 KB of 3) were not cached there
			}
			if c.trace.Load > 0 {
				loads++
			}
		}
		n := time.Duration(len(cs))
		rest := ttft - pre - seq - slot - gpu - load - prefill
		fmt.Printf("      %-12s %4d calls: ttft %s = before the replica %s + seq wait %s + slot wait %s + gpu wait %s + own load %s + own prefill %s + rest %s; %d instructions uncached, %d loads\n",
			what, len(cs), bench.Ms(ttft/n), bench.Ms(pre/n), bench.Ms(seq/n), bench.Ms(slot/n), bench.Ms(gpu/n), bench.Ms(load/n), bench.Ms(prefill/n), bench.Ms(rest/n), recached, loads)
	}
	line("all", calls)
	line("slowest 5%", calls[len(calls)-max(1, len(calls)/20):])
}

func (r fleetResult) p(q float64) time.Duration {
	if len(r.ttft) == 0 {
		return 0
	}
	return r.ttft[min(len(r.ttft)-1, int(q*float64(len(r.ttft))))]
}

func (r fleetResult) throughput() float64 { return float64(len(r.ttft)) / r.elapsed.Seconds() }

// fleetRows measures the three workloads under the three routings through one `svc server`.
func fleetRows(ctx context.Context, svcBin, tmp string, logFile io.Writer) error {
	workloads := []*fleetWorkload{agentWorkload(), adaptersWorkload(), uniformWorkload(), twoEdgesWorkload(), unevenWorkload(), oneAdapterWorkload()}
	// Replicas for every workload and routing, started up front (fresh caches for each).
	type fleetRun struct {
		w       *fleetWorkload
		mode    string
		model   string
		servers []*mockupstream.Engine
		ideal   *mockupstream.Ideal
		slugs   []string
		traces  *traces
		pinned  []string // the models of one replica each, under "pinned"
	}
	var runs []*fleetRun
	var yaml strings.Builder
	yaml.WriteString("models:\n")
	for wi, w := range workloads {
		modes := fleetModes
		if w.modes != nil {
			modes = w.modes
		}
		for mi, mode := range modes {
			fr := &fleetRun{w: w, mode: mode, model: fmt.Sprintf("fleet-%s-%s", w.short, mode), ideal: mockupstream.NewIdeal()}
			if w.adapters > 0 {
				fr.traces = &traces{m: map[string]mockupstream.CallTrace{}}
			}
			var urls []string
			for i := 0; i < fleetReplicas; i++ {
				cfg := w.engine
				cfg.Ideal = fr.ideal
				if fr.traces != nil {
					cfg.Trace = fr.traces.add
				}
				s := mockupstream.NewEngine(cfg)
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
				go srv.Serve(ln)
				defer srv.Close()
				fr.servers = append(fr.servers, s)
				urls = append(urls, "http://"+ln.Addr().String()+"/v1")
			}
			if mode == "pinned" {
				for i, u := range urls {
					name := fmt.Sprintf("%s-%d", fr.model, i)
					fr.pinned = append(fr.pinned, name)
					fmt.Fprintf(&yaml, "  - name: %s\n    runtime: openai\n    upstreamModel: fake-model\n    public: true\n    upstreamUrl: %s\n", name, u)
					if w.adapters > 0 {
						yaml.WriteString("    lora: vllm\n")
					}
				}
			} else {
				fmt.Fprintf(&yaml, "  - name: %s\n    runtime: openai\n    upstreamModel: fake-model\n    public: true\n    replicas: [%s]\n    routing: %s\n",
					fr.model, strings.Join(urls, ", "), mode)
				if w.adapters > 0 {
					fmt.Fprintf(&yaml, "    lora: vllm\n    maxLoras: %d\n", w.engine.MaxLoras)
				}
			}
			if wi == 0 && mi == 0 {
				yaml.WriteString("    default: true\n")
			}
			runs = append(runs, fr)
		}
	}
	models := filepath.Join(tmp, "fleet-models.yaml")
	if err := os.WriteFile(models, []byte(yaml.String()), 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	artifacts := filepath.Join(tmp, "fleet-artifacts")
	if err := os.MkdirAll(artifacts, 0o700); err != nil {
		return err
	}
	// The server's data in a folder of the fleet rows' own, where startEdgeProcess finds it.
	fleetTmp := filepath.Join(tmp, "fleet")
	if err := os.MkdirAll(fleetTmp, 0o700); err != nil {
		return err
	}
	svc, err := start(svcBin, []string{"server", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", filepath.Join(fleetTmp, "data"),
		"--models", models, "--base-url", base, "--artifacts-dir", artifacts}, base, logFile)
	if err != nil {
		return err
	}
	defer svc.stop()

	// Endpoints made through the management API, as a user would: one per model, or one per adapter
	// (a completed job whose final adapter it serves). Anonymous identities keep a few endpoints each.
	var cl *cloudapi.Client
	made := 0
	endpoint := func(slug string, t cloudapi.Target, job string) error {
		var err error
		if made%fleetAnonymousQuota == 0 {
			if cl, err = cloudapi.New(base, "").AnonymousProject(ctx); err != nil {
				return err
			}
		}
		made++
		if job != "" {
			completed := "completed"
			path := slug // an adapter's files, in the artifacts folder (the fake replicas load any)
			if err := os.WriteFile(filepath.Join(artifacts, slug), []byte("adapter"), 0o600); err != nil {
				return err
			}
			j, err := cl.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: job, Status: completed, FinalAdapter: &path})
			if err != nil {
				return fmt.Errorf("job of %s: %w", slug, err)
			}
			t = cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: j.ID}
		}
		_, err = cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, Target: t, AuthMode: cloudapi.AuthNone,
			RunRetentionMode: cloudapi.RetentionNone})
		if err != nil {
			return fmt.Errorf("endpoint %s: %w", slug, err)
		}
		return nil
	}
	for i, fr := range runs {
		if fr.w.adapters == 0 {
			models := []string{fr.model}
			if fr.pinned != nil {
				models = fr.pinned
			}
			for j, m := range models {
				slug := fmt.Sprintf("fleet-%d-%d", i, j)
				if err := endpoint(slug, cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: m}, ""); err != nil {
					return err
				}
				fr.slugs = append(fr.slugs, slug)
			}
			continue
		}
		for a := 0; a < fr.w.adapters; a++ {
			slug := fmt.Sprintf("fleet-%d-a%d", i, a)
			base := fr.model
			if fr.pinned != nil {
				base = fr.pinned[a%len(fr.pinned)]
			}
			if err := endpoint(slug, cloudapi.Target{}, base); err != nil {
				return err
			}
			fr.slugs = append(fr.slugs, slug)
		}
	}

	// The second edge: an `svc edge` process with the same models file and a picker of its own, for
	// the workloads that send a session's turns to either edge (what a balancer in front of edges does).
	edgeHosts := []string{fmt.Sprintf("localhost:%d", port), ""}
	edgeBases := []string{base, ""}
	if slices.ContainsFunc(workloads, func(w *fleetWorkload) bool { return w.twoEdges }) {
		edge, err := startEdgeProcess(ctx, svcBin, fleetTmp, base, models, logFile, "fleet-edge")
		if err != nil {
			return err
		}
		defer edge.stop()
		edgeBases[1] = edge.url
		edgeHosts[1] = strings.TrimPrefix(edge.url, "http://127.0.0.1:")
		edgeHosts[1] = "localhost:" + edgeHosts[1]
	}

	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}}
	loadavg, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nFleet rows (%d fake vLLM replicas per routing, internal/mockupstream.Engine in the bench process; `svc server`'s edge; %d concurrent clients;\n", fleetReplicas, fleetWorkers)
	fmt.Printf("  prefill %v per uncached prompt token; each routing on fresh replicas; load average %s)\n", fleetPrefillPerTok, strings.TrimSpace(string(loadavg)))
	results := map[string]map[string]fleetResult{}
	for wi, w := range workloads {
		fmt.Printf("\n  %s\n", w.name)
		fmt.Printf("    %-13s %9s %9s %9s %8s %16s %8s   %s\n", "routing", "ttft p50", "ttft p95", "req/s", "failed", "cached/prompt", "/ideal", "picks by reason")
		results[w.name] = map[string]fleetResult{}
		// The routings take turns in an order that rotates from one workload to the next, so that none
		// is always measured last (after the machine has run the others).
		var turns []*fleetRun
		for _, fr := range runs {
			if fr.w == w {
				turns = append(turns, fr)
			}
		}
		k := wi % len(turns)
		for _, fr := range append(turns[k:], turns[:k]...) {
			var mu sync.Mutex
			var res fleetResult
			measured := time.Now().Add(w.warmUp) // calls begun before are the warm-up's: not counted
			call := func(ctx context.Context, slug string, edge int, body []byte) error {
				t0 := time.Now()
				ttft, err := fleetCall(ctx, client, edgeBases[edge], slug+"."+edgeHosts[edge], body)
				mu.Lock()
				defer mu.Unlock()
				if w.adapters > 0 {
					res.sent = append(res.sent, sentCall{slug, t0})
				}
				if err != nil { // the warm-up's failures count too
					if res.failed++; res.firstErr == nil {
						res.firstErr = err
					}
					return err
				}
				if t0.Before(measured) {
					return nil
				}
				res.ttft = append(res.ttft, ttft)
				if fr.traces != nil {
					res.calls = append(res.calls, fleetCallTime{key: bodyKey(body), start: t0, ttft: ttft})
				}
				return nil
			}
			w.run(ctx, call, fr.slugs)
			res.elapsed = time.Since(measured)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			slices.Sort(res.ttft)
			for _, s := range fr.servers {
				res.prompt += s.PromptTokens.Load()
				res.cached += s.CachedTokens.Load()
				res.slotWaits += s.SlotWaits.Load()
				res.slotWaitTime += time.Duration(s.SlotWaitTime.Load())
				res.loraLoads += s.LoraLoads.Load()
				res.perReplica = append(res.perReplica, s.Requests.Load())
			}
			res.ideal = fr.ideal.CachedTokens()
			results[w.name][fr.mode] = res
			vsIdeal := "-"
			if res.ideal > 0 {
				vsIdeal = fmt.Sprintf("%.2f×", float64(res.cached)/float64(res.ideal))
			}
			fmt.Printf("    %-13s %9s %9s %9.1f %8d %7d/%-8d %8s   %s\n", fr.mode, bench.Ms(res.p(0.5)), bench.Ms(res.p(0.95)), res.throughput(),
				res.failed, res.cached, res.prompt, vsIdeal, picksByReason(ctx, base, fr.model))
			if w.adapters > 0 {
				mean := time.Duration(0)
				if res.slotWaits > 0 {
					mean = res.slotWaitTime / time.Duration(res.slotWaits)
				}
				minLoads := minAdapterLoads(res.sent, fleetReplicas*w.engine.MaxLoras)
				fmt.Printf("      %d of %d calls waited for an adapter slot on their replica, %s on average; %d adapters brought into a slot\n",
					res.slotWaits, len(res.ttft)+res.failed, bench.Ms(mean), res.loraLoads)
				fmt.Printf("      loads %.3f a call, %.2f× the minimum the traffic needs (%d of %d calls with the warm-up); calls per replica %v\n",
					float64(res.loraLoads)/float64(max(len(res.sent), 1)), float64(res.loraLoads)/float64(max(minLoads, 1)), minLoads, len(res.sent), res.perReplica)
				printSlowest(&res, fr.traces)
			}
			if res.firstErr != nil {
				fmt.Printf("      first failure: %v\n", res.firstErr)
			}
		}
	}
	printFleetBudget(os.Stdout, results, workloads)
	return nil
}

// picksByReason reads the server's svc_fleet_picks_total of model, summed over its replicas, by reason.
func picksByReason(ctx context.Context, base, model string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return ""
	}
	resp, err := opsClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	picks := map[string]float64{}
	var reasons []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "svc_fleet_picks_total{")
		if !ok || !strings.Contains(line, `model="`+model+`"`) {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		_, reason, _ := strings.Cut(labels, `reason="`)
		reason, _, _ = strings.Cut(reason, `"`)
		var v float64
		fmt.Sscan(value, &v)
		if _, seen := picks[reason]; !seen {
			reasons = append(reasons, reason)
		}
		picks[reason] += v
	}
	var out []string
	for _, r := range reasons {
		if picks[r] > 0 {
			out = append(out, fmt.Sprintf("%s %.0f", r, picks[r]))
		}
	}
	return strings.Join(out, ", ")
}

// printFleetBudget judges the fleet rows, as ratios within the run.
func printFleetBudget(w io.Writer, results map[string]map[string]fleetResult, workloads []*fleetWorkload) {
	fmt.Fprintf(w, "\n  fleet budget checks (informative only, like the others; ratios within this run, * = over budget)\n")
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	mark := func(ok bool) string {
		if ok {
			return ""
		}
		return "*"
	}
	agent, adapters, uniform := results[workloads[0].name], results[workloads[1].name], results[workloads[2].name]
	defer func() {
		// Issue 43's proof for many adapters, informative: loads against the minimum the traffic
		// needs (and pinned's), TTFT p95 against one adapter's, and every replica used.
		aff, pin, one := adapters["affinity"], adapters["pinned"], results[workloads[5].name]["affinity"]
		if len(aff.sent) == 0 || len(one.ttft) == 0 {
			return
		}
		perCall := func(r fleetResult) float64 { return float64(r.loraLoads) / float64(max(len(r.sent), 1)) }
		slots := fleetReplicas * fleetMaxLoras
		fmt.Fprintf(w, "    info  many adapters    affinity loads %.2f× the minimum (proof ≤ 1.1×; pinned %.2f×), %.2f× pinned's a call; TTFT p95 %.2f× one adapter's (proof ≤ 1.5×); calls per replica %v\n",
			float64(aff.loraLoads)/float64(max(minAdapterLoads(aff.sent, slots), 1)), float64(pin.loraLoads)/float64(max(minAdapterLoads(pin.sent, slots), 1)),
			perCall(aff)/max(perCall(pin), 1e-9), ratio(aff.p(0.95), one.p(0.95)), aff.perReplica)
		// Each call draws its adapter at random: a call's adapter is in none of the slots with
		// probability (adapters - slots) / adapters whatever was routed before, the fewest loads a
		// call of any rule that serves calls as they come without making them wait to share a load
		// (docs/LORA.md, "Many adapters: loads against latency").
		if online := float64(fleetAdapters-slots) / float64(fleetAdapters); online > 0 {
			fmt.Fprintf(w, "    info  many adapters    no rule without waits loads under %.2f a call, %.2f× the minimum; affinity loaded %.3f a call\n",
				online, online*float64(len(aff.sent))/float64(max(minAdapterLoads(aff.sent, slots), 1)), perCall(aff))
		}
	}()
	aff, rr := agent["affinity"], agent["round-robin"]
	p50, p95 := ratio(aff.p(0.5), rr.p(0.5)), ratio(aff.p(0.95), rr.p(0.95))
	cached := 0.0
	if aff.ideal > 0 {
		cached = float64(aff.cached) / float64(aff.ideal)
	}
	ok := p50 <= budgetAgentP50 && p95 <= budgetAgentP95 && cached >= budgetAgentCached && aff.failed == 0
	fmt.Fprintf(w, "    %s  agent sessions   affinity/round-robin TTFT p50 %.2f×%s (≤ %.1f×), p95 %.2f×%s (≤ %.1f×); cached %.2f×%s the ideal (≥ %.1f×)\n",
		verdict(ok), p50, mark(p50 <= budgetAgentP50), budgetAgentP50, p95, mark(p95 <= budgetAgentP95), budgetAgentP95,
		cached, mark(cached >= budgetAgentCached), budgetAgentCached)
	aff, rr = adapters["affinity"], adapters["round-robin"]
	p95 = ratio(aff.p(0.95), rr.p(0.95))
	ok = p95 <= budgetAdaptersP95 && aff.failed == 0
	fmt.Fprintf(w, "    %s  many adapters    affinity/round-robin TTFT p95 %.2f×%s (≤ %.1f×)\n", verdict(ok), p95, mark(ok), budgetAdaptersP95)
	aff, ll := uniform["affinity"], uniform["least-loaded"]
	tput := aff.throughput() / max(ll.throughput(), 1e-9)
	p95 = ratio(aff.p(0.95), ll.p(0.95))
	ok = tput >= budgetUniformTput && p95 <= budgetUniformP95 && aff.failed == 0
	fmt.Fprintf(w, "    %s  uniform prompts  affinity/least-loaded throughput %.2f×%s (≥ %.2f×), TTFT p95 %.2f×%s (≤ %.1f×)\n",
		verdict(ok), tput, mark(tput >= budgetUniformTput), budgetUniformTput, p95, mark(p95 <= budgetUniformP95), budgetUniformP95)
	if len(workloads) > 3 {
		edges := results[workloads[3].name]
		aff, rr = edges["affinity"], edges["round-robin"]
		p50, p95 = ratio(aff.p(0.5), rr.p(0.5)), ratio(aff.p(0.95), rr.p(0.95))
		cached = 0
		if aff.ideal > 0 {
			cached = float64(aff.cached) / float64(aff.ideal)
		}
		ok = p50 <= budgetEdgesP50 && p95 <= budgetEdgesP95 && cached >= budgetEdgesCached && aff.failed == 0
		fmt.Fprintf(w, "    %s  two edges        affinity/round-robin TTFT p50 %.2f×%s (≤ %.1f×), p95 %.2f×%s (≤ %.1f×); cached %.2f×%s the ideal (≥ %.2f×)\n",
			verdict(ok), p50, mark(p50 <= budgetEdgesP50), budgetEdgesP50, p95, mark(p95 <= budgetEdgesP95), budgetEdgesP95,
			cached, mark(cached >= budgetEdgesCached), budgetEdgesCached)
	}
	// Against the pinned ideal of each workload, informative (no budget): what the picker gives up, or
	// gains, against one replica of its own per session, client or adapter.
	fmt.Fprintf(w, "\n  affinity against pinned (each session, client or adapter on a replica of its own), ratios within this run\n")
	for _, wl := range workloads {
		aff, pin := results[wl.name]["affinity"], results[wl.name]["pinned"]
		if len(pin.ttft) == 0 || len(aff.ttft) == 0 {
			continue
		}
		line := fmt.Sprintf("    %-9s TTFT p50 %.2f×, p95 %.2f×, req/s %.2f×", wl.short, ratio(aff.p(0.5), pin.p(0.5)), ratio(aff.p(0.95), pin.p(0.95)),
			aff.throughput()/max(pin.throughput(), 1e-9))
		if pin.cached > 0 {
			line += fmt.Sprintf(", cached tokens %.2f×", float64(aff.cached)/float64(pin.cached))
		}
		if wl.adapters > 0 && pin.loraLoads > 0 {
			line += fmt.Sprintf(", adapter loads a call %.2f×", float64(aff.loraLoads)/float64(len(aff.ttft)+aff.failed)/(float64(pin.loraLoads)/float64(len(pin.ttft)+pin.failed)))
		}
		fmt.Fprintln(w, line)
	}
}

// fleetCall sends one streamed chat completion through the edge and returns the time to the first
// byte of its answer (the edge answers once the replica sent its first chunk: the TTFT), after
// reading the stream to its end.
func fleetCall(ctx context.Context, client *http.Client, base, host string, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.Peek(1); err != nil {
		return 0, err
	}
	ttft := time.Since(t0)
	rest, err := io.ReadAll(br)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%d: %.200s", resp.StatusCode, rest)
	}
	if !bytes.Contains(rest, []byte("[DONE]")) {
		return 0, fmt.Errorf("the stream ended without [DONE]")
	}
	return ttft, nil
}

// chatBody is a streamed chat request of these messages, alternating user and assistant from a
// system message.
func chatBody(msgs ...map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{"messages": msgs, "stream": true, "max_tokens": fleetAnswerTokens})
	return b
}

func msg(role, content string) map[string]string {
	return map[string]string{"role": role, "content": content}
}

// text returns n bytes of words drawn from rng: prose that shares nothing with other draws.
func text(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "w%x ", rng.Uint32())
	}
	return b.String()[:n]
}

// agentWorkload: concurrent agent sessions behind one long system prompt and tool list (16 KB, about
// 4,000 tokens), each turn adding a tool call and its 2 KB result, as coding agents resend their
// whole conversation every turn. Every session runs its turns one after the other.
func agentWorkload() *fleetWorkload {
	return &fleetWorkload{name: fmt.Sprintf("agent sessions (%d sessions × %d turns, begun %v apart; a 16 KB shared system prompt and tools, +2 KB a turn)", fleetWorkers, fleetAgentTurns, fleetSessionGap),
		short: "agent", engine: agentEngine(), run: agentSessions(func(int) int { return 0 })}
}

// twoEdgesWorkload: the agent sessions with each turn sent to the other edge than the turn before (what
// a balancer in front of `svc edge` processes may do): the two pickers share nothing, so a session
// keeps its replica only if both place it alike (issue 43).
func twoEdgesWorkload() *fleetWorkload {
	return &fleetWorkload{name: fmt.Sprintf("two edges alternating (the agent sessions, turn t through edge t mod 2: `svc server`'s and an `svc edge` process's)"),
		short: "edges", engine: agentEngine(), twoEdges: true, run: agentSessions(func(turn int) int { return turn % 2 })}
}

func agentEngine() mockupstream.EngineConfig {
	return mockupstream.EngineConfig{MaxNumSeqs: 8, CacheBlocks: 8192, PrefillTime: fleetPrefillPerTok, TTFTBase: 2 * time.Millisecond,
		ITL: fleetITL, Tokens: fleetAnswerTokens}
}

// agentSessions runs the agent sessions, turn t through edge edgeOf(t); session s goes to slugs[s mod
// len(slugs)] (its own replica under "pinned").
func agentSessions(edgeOf func(turn int) int) func(context.Context, fleetCallFunc, []string) {
	system := "You are a coding agent. Tools: " + text(rand.New(rand.NewPCG(1, 1)), 16<<10)
	return func(ctx context.Context, call fleetCallFunc, slugs []string) {
		var wg sync.WaitGroup
		for s := 0; s < fleetWorkers; s++ {
			wg.Go(func() {
				// Sessions begin one after another, as their users start them, not all in the same
				// instant (16 cold prefills of the whole prompt at once are 10% of the calls: the p95
				// of any routing).
				if !sleepCtx(ctx, time.Duration(s)*fleetSessionGap) {
					return
				}
				rng := rand.New(rand.NewPCG(2, uint64(s)))
				msgs := []map[string]string{msg("system", system), msg("user", fmt.Sprintf("Session %d: fix the failing test. ", s)+text(rng, 300))}
				for turn := 0; turn < fleetAgentTurns && ctx.Err() == nil; turn++ {
					if call(ctx, slugs[s%len(slugs)], edgeOf(turn), chatBody(msgs...)) != nil {
						return
					}
					msgs = append(msgs, msg("assistant", fmt.Sprintf("tool call %d: read_file", turn)), msg("user", "tool result: "+text(rng, 2<<10)))
				}
			})
		}
		wg.Wait()
	}
}

// unevenWorkload: one-shot prompts of very different sizes, one in five about 5,000 tokens (20 KB) and
// the rest about 100 (400 B), sharing nothing, for a fixed time: the queue a call waits in is the
// prefill ahead of it, not the count of calls (issue 43: no policy beat a fixed split).
func unevenWorkload() *fleetWorkload {
	return &fleetWorkload{name: fmt.Sprintf("uneven prompts (1 in 5 of 20 KB, the rest 400 B, nothing shared, %d clients for %v after %v of warm-up)", fleetWorkers, fleetLoadFor, fleetWarmUp),
		short: "uneven", warmUp: fleetWarmUp,
		engine: mockupstream.EngineConfig{MaxNumSeqs: 8, CacheBlocks: 8192, PrefillTime: fleetPrefillPerTok, TTFTBase: 2 * time.Millisecond,
			ITL: fleetITL, Tokens: fleetAnswerTokens},
		run: func(ctx context.Context, call fleetCallFunc, slugs []string) {
			closedLoop(ctx, func(c int, rng *rand.Rand) error {
				n := 400
				if rng.IntN(5) == 0 {
					n = 20 << 10
				}
				return call(ctx, slugs[c%len(slugs)], 0, chatBody(msg("user", text(rng, n))))
			})
		}}
}

// adaptersWorkload: clients of more adapters (12) than the fleet has slots (4 replicas × maxLoras 2),
// each request for an adapter drawn at random, with its application's 2 KB instructions and a 1 KB
// input of its own, for a fixed time.
func adaptersWorkload() *fleetWorkload {
	return &fleetWorkload{name: fmt.Sprintf("many adapters (%d adapters, %d replicas × maxLoras %d, %d clients for %v after %v of warm-up)", fleetAdapters, fleetReplicas, fleetMaxLoras, fleetWorkers, fleetLoadFor, fleetWarmUp),
		short: "adapters", adapters: fleetAdapters, warmUp: fleetWarmUp,
		engine: mockupstream.EngineConfig{MaxNumSeqs: 8, MaxLoras: fleetMaxLoras, CacheBlocks: 8192, PrefillTime: fleetPrefillPerTok,
			LoraLoadTime: fleetLoraLoad, TTFTBase: 2 * time.Millisecond, ITL: fleetITL, Tokens: fleetAnswerTokens},
		run: func(ctx context.Context, call fleetCallFunc, slugs []string) {
			var instructions []string
			for a := range slugs {
				instructions = append(instructions, fmt.Sprintf("Application %d. ", a)+text(rand.New(rand.NewPCG(3, uint64(a))), 2<<10))
			}
			closedLoop(ctx, func(_ int, rng *rand.Rand) error {
				a := rng.IntN(len(slugs))
				return call(ctx, slugs[a], 0, chatBody(msg("system", instructions[a]), msg("user", text(rng, 1<<10))))
			})
		}}
}

// oneAdapterWorkload is the many-adapters workload's clients all calling one adapter, under affinity
// only: what the adapters' TTFT p95 is judged against (issue 43: at most 1.5x one adapter's).
func oneAdapterWorkload() *fleetWorkload {
	w := adaptersWorkload()
	w.name = fmt.Sprintf("one adapter (the many-adapters clients, all of one adapter, %d replicas × maxLoras %d)", fleetReplicas, fleetMaxLoras)
	w.short, w.adapters, w.modes = "one-adapter", 1, []string{"affinity"}
	return w
}

// uniformWorkload: 4 KB prompts that share nothing, for a fixed time: where affinity has nothing to
// gain and must cost nothing.
func uniformWorkload() *fleetWorkload {
	return &fleetWorkload{name: fmt.Sprintf("uniform prompts (4 KB each, nothing shared, %d clients for %v after %v of warm-up)", fleetWorkers, fleetLoadFor, fleetWarmUp),
		short: "uniform", warmUp: fleetWarmUp,
		engine: mockupstream.EngineConfig{MaxNumSeqs: 4, CacheBlocks: 8192, PrefillTime: fleetPrefillPerTok, TTFTBase: 2 * time.Millisecond,
			ITL: fleetITL, Tokens: fleetAnswerTokens},
		run: func(ctx context.Context, call fleetCallFunc, slugs []string) {
			closedLoop(ctx, func(c int, rng *rand.Rand) error {
				return call(ctx, slugs[c%len(slugs)], 0, chatBody(msg("user", text(rng, 4<<10))))
			})
		}}
}

// closedLoop runs fleetWorkers clients, each sending its next request when the last is answered, for
// fleetWarmUp and then fleetLoadFor; client i draws from the same random sequence under every routing.
func closedLoop(ctx context.Context, one func(client int, rng *rand.Rand) error) {
	end := time.Now().Add(fleetWarmUp + fleetLoadFor) // requests under way then finish: none is cut
	var wg sync.WaitGroup
	for c := 0; c < fleetWorkers; c++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(4, uint64(c)))
			for ctx.Err() == nil && time.Now().Before(end) {
				one(c, rng)
			}
		})
	}
	wg.Wait()
}

// sleepCtx waits d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
