package inference

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/fleet"
)

// A model with a list of replicas routes each call through its picker (docs/LORA.md, "Fleets"): send
// asks it for a replica, tells it how the call ended, and retries once elsewhere when nothing of the
// answer was received.

// sessionKey is the picker's key of the conversation c continues (fleet.Request.Session): its first
// system (or developer) message and first user message, which every turn repeats, so that each edge
// places a conversation's turns alike. The messages the edge read when it has them, else the body's
// opening as conv reads it; 0 (the prompt's first block keys it) for a call with neither. opening says
// the call is the conversation's first, as far as its messages tell: no answer in them yet.
func sessionKey(c *Call) (key uint64, opening bool) {
	if len(c.Messages) == 0 {
		if o := conv.Opening(c.Body); o != "\x00" {
			return fleet.SessionKey("", o), false
		}
		return 0, false
	}
	var system, user string
	opening = true
	for _, m := range c.Messages {
		switch m.Role {
		case "system", "developer":
			if system == "" {
				system = m.Content
			}
		case "user":
			if user == "" {
				user = m.Content
			}
		default: // an answer, a tool's result
			opening = false
		}
	}
	if system == "" && user == "" {
		return 0, false
	}
	return fleet.SessionKey(system, user), opening
}

// modelFleet is a model's picker and the loop that probes and scrapes its replicas.
type modelFleet struct {
	*fleet.Fleet
	kv   *kvFollower // nil without kvEvents
	stop context.CancelFunc
	done sync.WaitGroup
}

// newModelFleet starts the picker of a model with replicas; nil for a model with one upstreamUrl. With
// replicas: {dns: host:port} the replicas are the name's addresses, looked up at start and again every
// opts.LoraSyncInterval (a headless Service's pods as they come and go; a failed lookup keeps the last
// set); until a lookup answers, the name itself is the one replica.
func newModelFleet(m ModelConfig, opts Options) *modelFleet {
	if m.Replicas == nil || len(m.Replicas.URLs) == 0 && m.Replicas.DNS == "" {
		return nil
	}
	mode, _ := fleet.ParseMode(m.Routing) // checked by Validate
	ctx, stop := context.WithCancel(context.Background())
	urls := m.Replicas.URLs
	var rs *resolver
	if m.Replicas.DNS != "" {
		rs = newResolver(m.Replicas.DNS, opts)
		if urls = rs.urls(ctx); urls == nil {
			urls = []string{"http://" + m.Replicas.DNS + "/v1"}
		}
	}
	mf := &modelFleet{stop: stop}
	cfg := fleet.Config{Mode: mode, MaxLoras: m.MaxLoras}
	if m.KVEvents != nil {
		mf.kv = newKVFollower(m.KVEvents, m.MaxLoras, opts.Logger)
		cfg.KV = mf.kv.x
	}
	f, err := fleet.New(cfg, urls)
	if err != nil {
		stop()
		return nil // unreachable: Validate checked the list, and a lookup yields 1 to MaxReplicas URLs
	}
	mf.Fleet = f
	if mf.kv != nil {
		mf.kv.start(ctx, m.KVEvents, f, mf.done.Go)
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2}}
	mf.done.Go(func() { f.Run(ctx, client) })
	if rs != nil {
		mf.done.Go(func() { rs.follow(ctx, f) })
	}
	return mf
}

// resolver keeps a replicas: {dns} fleet's replicas in step with the name's addresses.
type resolver struct {
	names *hostLookup
	port  string
	every time.Duration
}

func newResolver(hostport string, opts Options) *resolver {
	host, port, _ := net.SplitHostPort(hostport) // checked by Validate
	r := &resolver{names: newHostLookup(host, opts.LookupHost, 2*time.Second, opts.Logger), port: port, every: opts.LoraSyncInterval}
	if r.every <= 0 {
		r.every = DefaultLoraSyncInterval
	}
	return r
}

// urls looks the name up and returns its replicas' base URLs, sorted (at most fleet.MaxReplicas); on
// failure, nil.
func (r *resolver) urls(ctx context.Context) []string {
	addrs, err := r.names.addrs(ctx)
	if err != nil {
		return nil
	}
	if len(addrs) > fleet.MaxReplicas {
		addrs = addrs[:fleet.MaxReplicas]
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = "http://" + net.JoinHostPort(a, r.port) + "/v1"
	}
	return out
}

// follow looks the name up every interval and hands the addresses to the picker: replicas kept keep
// their state, new ones start healthy, gone ones leave.
func (r *resolver) follow(ctx context.Context, f *fleet.Fleet) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if urls := r.urls(ctx); urls != nil {
				f.SetReplicas(urls)
			}
		}
	}
}

func (mf *modelFleet) close() {
	mf.stop()
	mf.done.Wait()
}

// noReplica is the 503 of a model none of whose replicas is healthy; it names the model, never an
// address.
func (o *openAI) noReplica() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "api_error", Code: CodeUpstreamUnavailable,
		Message: fmt.Sprintf("no replica serving %q is healthy; try again shortly", o.cfg.Name)}
}

// FleetStates returns the replicas' states of every model with replicas, by model name, for the
// metrics (internal/metrics WatchFleets).
func (r *Registry) FleetStates() map[string][]fleet.State {
	out := map[string][]fleet.State{}
	for i, rt := range r.rts {
		if o, ok := rt.(*openAI); ok && o.fleet != nil {
			out[r.configs[i].Name] = o.fleet.States()
		}
	}
	return out
}

// Fleet returns the replicas of model id as this process sees them (edgemodel.Fleets: the management
// API's model read); false for a model without replicas.
func (r *Registry) Fleet(id string) (edgemodel.Fleet, bool) {
	i, ok := r.byName[id]
	if !ok {
		return edgemodel.Fleet{}, false
	}
	o, ok := r.rts[i].(*openAI)
	if !ok || o.fleet == nil {
		return edgemodel.Fleet{}, false
	}
	cfg := o.fleet.Config()
	out := edgemodel.Fleet{Routing: cfg.Mode.String(), CacheSignal: o.fleet.CacheSignal(), MaxLoras: cfg.MaxLoras}
	for _, s := range o.fleet.States() {
		out.Replicas = append(out.Replicas, edgemodel.Replica{Addr: s.Addr, Healthy: s.Healthy, Out: s.Out, OutUntil: s.OutUntil,
			InFlight: s.InFlight, Waiting: s.Waiting, Running: s.Running, Ejections: s.Ejections,
			MeanCall: s.MeanCall, Pace: s.Pace, Adapters: s.Adapters, Resident: s.Resident, Unready: s.Unready,
			KVState: s.KV.State, KVBlocks: s.KV.Blocks})
	}
	return out, true
}

// Admission returns how many calls a model admits at once and how long a call may wait for its turn
// (internal/admission): maxConcurrency for each healthy replica (the upstreamUrl or the simulator count as
// one), 0 when it sets none or when no replica is healthy (then calls go at once and get the runtime's
// 503), and queueTimeoutMs (0: the default). A fleet without maxConcurrency admits what its healthy
// replicas were seen running at most while requests waited on them (vLLM's num_requests_running and
// num_requests_waiting, scraped off the request path): 0, no bound, until one was seen saturated. A
// fleet's health is read from its picker: call it now and then, not on every call.
func (r *Registry) Admission(id string) (capacity int, timeout time.Duration) {
	i, ok := r.byName[id]
	if !ok {
		return 0, 0
	}
	m := r.configs[i]
	if m.MaxConcurrency == 0 {
		return r.learnedCapacity(i), time.Duration(m.QueueTimeoutMs) * time.Millisecond
	}
	healthy := 1
	if o, ok := r.rts[i].(*openAI); ok && o.fleet != nil {
		healthy = 0
		for _, s := range o.fleet.States() {
			if s.Healthy {
				healthy++
			}
		}
	}
	return m.MaxConcurrency * healthy, time.Duration(m.QueueTimeoutMs) * time.Millisecond
}

// Gated reports whether a model's calls go through admission: it sets maxConcurrency, or it is a fleet
// whose capacity is learned from its replicas (Admission).
func (r *Registry) Gated(id string) bool {
	i, ok := r.byName[id]
	if !ok {
		return false
	}
	if r.configs[i].MaxConcurrency > 0 {
		return true
	}
	o, ok := r.rts[i].(*openAI)
	return ok && o.fleet != nil
}

// learnedCapacity is the sum of the healthy replicas' learned capacities of model i, 0 (no bound) while
// a healthy replica was never seen saturated, or for a model without a fleet.
func (r *Registry) learnedCapacity(i int) int {
	o, ok := r.rts[i].(*openAI)
	if !ok || o.fleet == nil {
		return 0
	}
	total := 0
	for _, s := range o.fleet.States() {
		if !s.Healthy {
			continue
		}
		if s.Capacity == 0 {
			return 0 // one replica's room is unknown: no bound rather than a guess
		}
		total += s.Capacity
	}
	return total
}
