package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/fleet"
)

// Timings of adapter loading on replica pools (docs/LORA.md, "Pools of replicas").
const (
	// DefaultLoraSyncInterval is how often a pool re-resolves its replicas and checks their adapters.
	DefaultLoraSyncInterval = 10 * time.Second
	// loraListTimeout bounds one replica's GET /models; loraLoadTimeout one background load, which
	// may download the adapter first.
	loraListTimeout = 10 * time.Second
	loraLoadTimeout = 5 * time.Minute
)

// loraPool keeps a model's adapters loaded on every replica behind its upstreamUrl (`lora: vllm` with
// loraTargets). Requests still go to upstreamUrl, the Service or gateway that picks a replica; only
// the adapter loads and the listings that check them go to each replica directly.
//
// The adapters wanted are those prepared for deployments and those seen in requests. A background
// loop, started with the first adapter, re-resolves the replicas (DNS mode) and asks each which
// models it serves, loading what is missing: a replica that joined, restarted or failed a load gets
// the adapters within one interval, without anyone calling svc.
type loraPool struct {
	o *openAI
	// fleet, for a model with replicas, owns the model's replicas (its list, or its resolver's lookups
	// of a replicas: {dns} name): the pool reads its set, and looks nothing up itself.
	fleet    *fleet.Fleet
	names    *hostLookup // DNS mode without a fleet: the upstream host's addresses
	interval time.Duration
	log      *slog.Logger

	// DNS mode: each address of host replaces it in the dial, port and URL stay as configured.
	dns  bool
	host string
	port string

	ctx    context.Context // ends when the registry closes
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop and its syncs

	mu       sync.Mutex
	wanted   map[string]string   // adapter name -> artifact
	replicas map[string]*replica // by address (DNS mode) or base URL (list)
	sorted   []*replica          // the same, ordered; replaced, never modified
	resolved bool                // DNS mode: looked up at least once
	started  bool
	closed   bool
}

// replica is one inference server of a pool.
type replica struct {
	id     string // its address or redacted URL, for logs only
	base   string // the URL that /load_lora_adapter and /models are appended to
	client *http.Client
	tr     *http.Transport // DNS mode: this replica's own transport, closed when it leaves
	busy   atomic.Bool     // a background sync is under way
	// fleet, for a model with replicas, is told whether the replica serves each adapter (base is the
	// fleet's URL of it), so that its picker sends no call where the adapter is missing or mid-load.
	fleet *fleet.Fleet

	mu       sync.Mutex
	adapters map[string]*replicaAdapter
	failing  bool
}

// replicaAdapter is what a pool knows of one adapter on one replica.
type replicaAdapter struct {
	sem chan struct{} // held during a load: one load per adapter per replica at a time
	// Guarded by replica.mu: whether the replica has the adapter, as of at.
	loaded bool
	at     time.Time
}

func newLoraPool(o *openAI, opts Options) *loraPool {
	p := &loraPool{o: o, interval: opts.LoraSyncInterval, log: opts.Logger,
		wanted: map[string]string{}, replicas: map[string]*replica{}}
	if p.interval <= 0 {
		p.interval = DefaultLoraSyncInterval
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.log = p.log.With("model", o.cfg.Name)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if o.fleet != nil {
		p.fleet = o.fleet.Fleet
		p.fromFleet()
		return p
	}
	if o.cfg.LoraTargets.Mode == LoraTargetsDNS {
		u, _ := url.Parse(o.cfg.UpstreamURL) // checked by Validate
		p.dns, p.host, p.port = true, u.Hostname(), u.Port()
		if p.port == "" {
			p.port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		p.names = newHostLookup(p.host, opts.LookupHost, loraListTimeout, p.log)
		return p
	}
	for _, raw := range o.cfg.LoraTargets.URLs {
		id := raw
		if u, err := url.Parse(raw); err == nil {
			id = u.Redacted()
		}
		p.replicas[raw] = &replica{id: id, base: raw, client: o.client, adapters: map[string]*replicaAdapter{}}
	}
	p.sortReplicas()
	return p
}

// want adds an adapter to the set kept on every replica and starts the background loop.
func (p *loraPool) want(name, artifact string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wanted[name] = artifact
	if !p.started && !p.closed {
		p.started = true
		p.wg.Add(1)
		go p.run()
	}
}

// close stops the loop and waits for the syncs under way.
func (p *loraPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.replicas {
		if r.tr != nil {
			r.tr.CloseIdleConnections()
		}
	}
}

func (p *loraPool) run() {
	defer p.wg.Done()
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.round()
	}
}

// round re-resolves the replicas and syncs each one in its own goroutine, skipping those whose last
// sync is still running, so that a slow replica holds up no other.
func (p *loraPool) round() {
	p.refresh(p.ctx)
	for _, r := range p.snapshot() {
		if !r.busy.CompareAndSwap(false, true) {
			continue
		}
		p.wg.Add(1) // the loop's own count keeps the group above zero, so this cannot race close's Wait
		go func() {
			defer p.wg.Done()
			defer r.busy.Store(false)
			ctx, cancel := context.WithTimeout(p.ctx, loraLoadTimeout)
			defer cancel()
			p.syncReplica(ctx, r, "")
		}()
	}
}

// refresh looks the upstream host up again (DNS mode) and updates the replicas: new addresses join
// with nothing known about them, gone ones are dropped. A failed lookup keeps the last set.
func (p *loraPool) refresh(ctx context.Context) {
	if p.fleet != nil {
		p.fromFleet()
		return
	}
	if !p.dns {
		return
	}
	addrs, err := p.names.addrs(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		return
	}
	p.resolved = true
	seen := map[string]bool{}
	changed := false
	for _, a := range addrs {
		addr := net.JoinHostPort(a, p.port)
		seen[addr] = true
		if p.replicas[addr] == nil {
			p.replicas[addr] = p.dnsReplica(addr)
			changed = true
		}
	}
	for addr, r := range p.replicas {
		if !seen[addr] {
			delete(p.replicas, addr)
			r.tr.CloseIdleConnections()
			changed = true
		}
	}
	if changed {
		p.sortReplicas()
	}
}

// fromFleet takes the fleet's replicas as they stand: those the fleet added join with nothing known
// about them, those it dropped leave.
func (p *loraPool) fromFleet() {
	urls := map[string]string{} // base URL -> address
	for _, r := range p.fleet.Replicas() {
		urls[r.URL] = r.Addr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	for u, addr := range urls {
		if p.replicas[u] == nil {
			p.replicas[u] = &replica{id: addr, base: u, client: p.o.client, adapters: map[string]*replicaAdapter{}, fleet: p.fleet}
			changed = true
		}
	}
	for u := range p.replicas {
		if _, ok := urls[u]; !ok {
			delete(p.replicas, u)
			changed = true
		}
	}
	if changed {
		p.sortReplicas()
	}
}

// dnsReplica addresses one address of the upstream host. Its URL keeps the host name, so that the Host
// header and TLS server name are the Service's, and its own transport dials the address.
func (p *loraPool) dnsReplica(addr string) *replica {
	tr := p.o.client.Transport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, addr)
	}
	return &replica{id: addr, base: p.o.cfg.UpstreamURL, client: &http.Client{Transport: tr}, tr: tr,
		adapters: map[string]*replicaAdapter{}}
}

// snapshot returns the current replicas, in a stable order. Callers must not modify the slice.
func (p *loraPool) snapshot() []*replica {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sorted
}

// sortReplicas rebuilds the slice that snapshot hands out (a new one: old snapshots stay valid); it
// runs when the replicas change, not on every request. Callers hold p.mu.
func (p *loraPool) sortReplicas() {
	out := make([]*replica, 0, len(p.replicas))
	for _, r := range p.replicas {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	p.sorted = out
}

// replicasFor returns the replicas, resolving them first if that never happened (DNS mode).
func (p *loraPool) replicasFor(ctx context.Context) []*replica {
	if p.fleet != nil {
		p.fromFleet()
		return p.snapshot()
	}
	p.mu.Lock()
	resolved := p.resolved
	p.mu.Unlock()
	if p.dns && !resolved {
		p.refresh(ctx)
	}
	return p.snapshot()
}

// ensure makes an adapter servable before a request: when no replica is known to have it, it is
// loaded on all of them. A replica that has lost it answers 404, which recover handles.
func (p *loraPool) ensure(ctx context.Context, name, artifact string) error {
	p.want(name, artifact)
	reps := p.replicasFor(ctx)
	for _, r := range reps {
		if r.has(name) {
			return nil
		}
	}
	if len(reps) == 0 {
		return p.noReplicas(name)
	}
	if p.fleet != nil {
		return p.ensureAny(ctx, reps, name, artifact)
	}
	errs := p.each(reps, func(r *replica) error {
		err := p.load(ctx, r, name, artifact, time.Time{})
		if err != nil {
			p.report(ctx, r, fmt.Errorf("adapter %q: %w", name, err))
		}
		return err
	})
	return p.outcome(name, len(reps), errs, false)
}

// ensureAny is ensure for a fleet's replicas: it loads the adapter on every replica and returns once
// one has it (or every load failed, or ctx ended); the other loads go on in the background, and the
// fleet's picker sends the adapter's calls only where it is loaded meanwhile. Waiting for every
// replica held a call for the slowest load, and a call sent to a replica mid-load was answered 404
// and waited for that load before its retry.
func (p *loraPool) ensureAny(ctx context.Context, reps []*replica, name, artifact string) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return context.Canceled
	}
	p.wg.Add(len(reps)) // the loop's own count keeps the group above zero (want started it)
	p.mu.Unlock()
	errs := make(chan error, len(reps))
	for _, r := range reps {
		go func() {
			defer p.wg.Done()
			lctx, cancel := context.WithTimeout(p.ctx, loraLoadTimeout)
			defer cancel()
			err := p.load(lctx, r, name, artifact, time.Time{})
			if err != nil {
				p.report(lctx, r, fmt.Errorf("adapter %q: %w", name, err))
			}
			errs <- err
		}()
	}
	var all []error
	for range reps {
		select {
		case err := <-errs:
			if err == nil {
				return nil
			}
			all = append(all, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return p.outcome(name, len(reps), all, false)
}

// prepare checks every replica for the adapter and loads it where it is missing (Registry.Prepare).
// An error means some replica lacks it; the loop keeps trying.
func (p *loraPool) prepare(ctx context.Context, name, artifact string) error {
	p.want(name, artifact)
	return p.resync(ctx, name, true)
}

// recover runs after the upstream answered that the adapter does not exist: some replica behind it
// lost the adapter (it restarted) or never had it (it just joined). Every replica is asked and the
// adapter loaded where it is missing; the caller then retries the request once.
func (p *loraPool) recover(ctx context.Context, name, artifact string) error {
	p.want(name, artifact)
	p.refresh(ctx)
	return p.resync(ctx, name, false)
}

func (p *loraPool) resync(ctx context.Context, name string, all bool) error {
	reps := p.replicasFor(ctx)
	if len(reps) == 0 {
		return p.noReplicas(name)
	}
	errs := p.each(reps, func(r *replica) error { return p.syncReplica(ctx, r, name) })
	return p.outcome(name, len(reps), errs, all)
}

// each runs fn on every replica at once and returns the errors, nil ones included.
func (p *loraPool) each(reps []*replica, fn func(*replica) error) []error {
	errs := make([]error, len(reps))
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(r)
		}()
	}
	wg.Wait()
	return errs
}

// outcome turns per-replica errors into the caller's: with all, any failure is one; without, the
// adapter only has to be on one replica. Messages name the model and adapter, never an address.
func (p *loraPool) outcome(name string, n int, errs []error, all bool) error {
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed == 0 || (!all && failed < n) {
		return nil
	}
	var e *Error
	if errors.As(first, &e) {
		e = &Error{Status: http.StatusBadGateway, Type: "api_error", Code: e.Code, Message: e.Message}
	} else if errors.Is(first, context.Canceled) || errors.Is(first, context.DeadlineExceeded) {
		return first
	} else {
		e = &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamUnavailable, Message: first.Error()}
	}
	e.Message = fmt.Sprintf("loading adapter %q for %q failed on %d of %d replicas: %s", name, p.o.cfg.Name, failed, n, e.Message)
	return e
}

func (p *loraPool) noReplicas(name string) error {
	return &Error{Status: http.StatusBadGateway, Type: "api_error", Code: CodeUpstreamUnavailable,
		Message: fmt.Sprintf("cannot load adapter %q: no replica of the upstream serving %q was found", name, p.o.cfg.Name)}
}

// syncReplica asks a replica which models it serves and loads the wanted adapters it lacks (only the
// one named by only, when set).
func (p *loraPool) syncReplica(ctx context.Context, r *replica, only string) error {
	p.mu.Lock()
	wanted := make(map[string]string, len(p.wanted))
	for name, artifact := range p.wanted {
		if only == "" || name == only {
			wanted[name] = artifact
		}
	}
	p.mu.Unlock()
	if len(wanted) == 0 {
		return nil
	}
	at := time.Now()
	have, err := p.list(ctx, r)
	if err != nil {
		p.report(ctx, r, err)
		return err
	}
	var errs []error
	for name, artifact := range wanted {
		r.observe(name, have[name], at)
		if have[name] {
			continue
		}
		if err := p.load(ctx, r, name, artifact, at); err != nil {
			errs = append(errs, fmt.Errorf("adapter %q: %w", name, err))
		}
	}
	err = errors.Join(errs...)
	p.report(ctx, r, err)
	return err
}

// report logs a replica's failures when they start and its recovery, not every round in between.
func (p *loraPool) report(ctx context.Context, r *replica, err error) {
	if ctx.Err() != nil {
		return // shutting down or the request went away: nothing about the replica
	}
	r.mu.Lock()
	was := r.failing
	r.failing = err != nil
	r.mu.Unlock()
	switch {
	case err != nil && !was:
		p.log.Warn("keeping adapters on a replica failed; retrying every round", "replica", r.id, "every", p.interval, "err", err)
	case err == nil && was:
		p.log.Info("a replica has its adapters again", "replica", r.id)
	}
}

// list returns the model ids a replica serves; vLLM lists loaded adapters among them.
func (p *loraPool) list(ctx context.Context, r *replica) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, loraListTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/models", nil)
	if err != nil {
		return nil, err
	}
	if p.o.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.o.key)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, p.o.transportError(ctx, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode/100 != 2 {
		e := p.o.upstreamError(resp.StatusCode, resp.Header, b)
		return nil, fmt.Errorf("listing models answered %d: %s", resp.StatusCode, e.Message)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("listing models: invalid JSON: %w", err)
	}
	have := make(map[string]bool, len(list.Data))
	for _, m := range list.Data {
		have[m.ID] = true
	}
	return have, nil
}

// load loads an adapter on a replica unless the replica is known to have had it since the given
// time (the zero time: known at all). Concurrent callers wait for the one load under way.
func (p *loraPool) load(ctx context.Context, r *replica, name, artifact string, since time.Time) error {
	st := r.state(name)
	select {
	case st.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-st.sem }()
	r.mu.Lock()
	fresh := st.loaded && !st.at.Before(since)
	r.mu.Unlock()
	if fresh {
		return nil
	}
	r.mu.Lock()
	r.tell(name, false) // mid-load: the picker sends its calls elsewhere
	r.mu.Unlock()
	if err := p.o.postLoad(ctx, r.client, r.base, name, artifact); err != nil {
		return err
	}
	r.mu.Lock()
	st.loaded, st.at = true, time.Now()
	r.tell(name, true)
	r.mu.Unlock()
	return nil
}

// tell tells the fleet's picker whether the replica serves the adapter. Called with r.mu held, so that
// the fleet learns the replica's states in the order they were known.
func (r *replica) tell(name string, loaded bool) {
	if r.fleet != nil {
		r.fleet.SetAdapterReady(r.base, name, loaded)
	}
}

func (r *replica) state(name string) *replicaAdapter {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.adapters[name]
	if st == nil {
		st = &replicaAdapter{sem: make(chan struct{}, 1)}
		r.adapters[name] = st
	}
	return st
}

func (r *replica) has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.adapters[name]
	return st != nil && st.loaded
}

// observe records what a listing taken at time at said, unless something newer is known (a load
// that finished after the listing began).
func (r *replica) observe(name string, present bool, at time.Time) {
	st := r.state(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !st.at.After(at) {
		st.loaded, st.at = present, at
		r.tell(name, present)
	}
}

// postLoad calls vLLM's POST {base}/load_lora_adapter. An adapter already loaded counts as loaded; a
// refusal comes back as a 502 Error carrying the upstream's message.
func (o *openAI) postLoad(ctx context.Context, client *http.Client, base, name, artifact string) error {
	body, _ := json.Marshal(map[string]string{"lora_name": name, "lora_path": adapterPath(artifact)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/load_lora_adapter", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return o.transportError(ctx, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	// vLLM answers 400 "has already been loaded" when another replica or an earlier run loaded it.
	if resp.StatusCode/100 == 2 || strings.Contains(string(b), "already been loaded") {
		return nil
	}
	e := o.upstreamError(resp.StatusCode, resp.Header, b)
	e.Status = http.StatusBadGateway
	return e
}
