package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/mockupstream"
)

func TestLoraTargetsValidation(t *testing.T) {
	const head = "models:\n  - name: pool\n    runtime: openai\n"
	cases := []struct{ yaml, want string }{
		{head + "    upstreamUrl: http://vllm.ns.svc:8000/v1\n    loraTargets: dns\n", `models[0] "pool": loraTargets is only for lora: vllm (lora is "none")`},
		{head + "    upstreamUrl: http://vllm.ns.svc:8000/v1\n    lora: resolver\n    loraTargets: dns\n", `models[0] "pool": loraTargets is only for lora: vllm (lora is "resolver")`},
		{head + "    upstreamUrl: http://10.0.0.1:8000/v1\n    lora: vllm\n    loraTargets: dns\n", `models[0] "pool": loraTargets: dns needs a host name in upstreamUrl`},
		{head + "    upstreamUrl: http://vllm:8000/v1\n    lora: vllm\n    loraTargets: srv\n", `models[0] "pool": loraTargets "srv" is not dns or a list of URLs`},
		{head + "    upstreamUrl: http://gw/v1\n    lora: vllm\n    loraTargets: [http://10.0.0.2:8000/v1, ftp://x]\n", `models[0] "pool": loraTargets[1] "ftp://x" is not an http(s) URL`},
		{head + "    upstreamUrl: http://gw/v1\n    lora: vllm\n    loraTargets: [10.0.0.2:8000]\n", `loraTargets[0] "10.0.0.2:8000" is not an http(s) URL`},
		{head + "    upstreamUrl: http://gw/v1\n    lora: vllm\n    loraTargets: []\n", `models[0] "pool": loraTargets lists no URLs`},
		{head + "    upstreamUrl: http://gw/v1\n    lora: vllm\n    loraTargets: [http://a/v1, http://a/v1/]\n", `loraTargets[1] "http://a/v1/" is listed twice`},
		{head + "    upstreamUrl: http://gw/v1\n    lora: vllm\n    loraTargets: {dns: true}\n", `loraTargets must be dns or a list of URLs`},
		{head + "    upstreamUrl: http://gw/v1\n    lora: lorax\n", `lora "lorax" is not one of none, vllm, resolver`},
		{"models:\n  - name: sim\n    loraTargets: dns\n", `models[0] "sim": loraTargets is only for runtime "openai"`},
	}
	for _, c := range cases {
		_, err := ParseModels("models.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.yaml, err, c.want)
		}
	}

	models, err := ParseModels("models.yaml", []byte(head+"    upstreamUrl: http://gw/v1\n    lora: vllm\n    loraTargets: [http://10.0.0.2:8000/v1/, https://10.0.0.3/v1]\n"+
		"  - name: headless\n    runtime: openai\n    upstreamUrl: http://vllm.ns.svc.cluster.local:8000/v1\n    lora: vllm\n    loraTargets: dns\n"+
		"  - name: gateway\n    runtime: openai\n    upstreamUrl: http://llm-d/v1\n    lora: resolver\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := models[0].LoraTargets; got == nil || strings.Join(got.URLs, " ") != "http://10.0.0.2:8000/v1 https://10.0.0.3/v1" {
		t.Errorf("list targets %+v", got)
	}
	if got := models[1].LoraTargets; got == nil || got.Mode != LoraTargetsDNS || got.URLs != nil {
		t.Errorf("dns targets %+v", got)
	}
	if models[2].Lora != LoraResolver || models[2].LoraTargets != nil {
		t.Errorf("resolver model %+v", models[2])
	}
}

// pool is a set of fake vLLM replicas behind one round-robin "Service".
type pool struct {
	replicas []*mockupstream.Replica
	gateway  *mockupstream.RoundRobin
	url      string // the gateway's base URL (…/v1)
}

func (p *pool) backends() []string {
	var out []string
	for _, r := range p.replicas {
		out = append(out, "http://"+r.Addr)
	}
	return out
}

// startPool starts one replica per listener and a round-robin gateway in front of them on gw.
func startPool(t *testing.T, gw net.Listener, lns []net.Listener, cfg mockupstream.Config) *pool {
	t.Helper()
	p := &pool{}
	for _, ln := range lns {
		r := mockupstream.StartReplica(ln, cfg)
		t.Cleanup(r.Close)
		p.replicas = append(p.replicas, r)
	}
	p.gateway = mockupstream.NewRoundRobin(p.backends()...)
	srv := &http.Server{Handler: p.gateway}
	go srv.Serve(gw)
	t.Cleanup(func() { srv.Close() })
	p.url = "http://" + gw.Addr().String() + "/v1"
	return p
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func adapterCall(model, name string) *Call {
	return &Call{Model: model, Served: name, Adapter: "hf://acme/" + name, AdapterName: name,
		Body:     map[string]json.RawMessage{"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`)},
		Messages: []Message{{Role: "user", Content: "hi"}}}
}

func prepare(t *testing.T, r *Registry, model, name string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Prepare(ctx, &edgemodel.EdgeDeployment{BaseModel: model, Adapter: "hf://acme/" + name, AdapterName: name})
}

// complete sends a chat request for the adapter through the registry and checks that it is answered.
func complete(t *testing.T, r *Registry, model, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := r.Runtime(model).Complete(ctx, adapterCall(model, name))
	if err != nil {
		t.Fatalf("request for adapter %s: %v", name, err)
	}
	var got struct{ Model string }
	if json.Unmarshal(out.JSON, &got); got.Model != name {
		t.Fatalf("answer names %q, want %q", got.Model, name)
	}
}

// loads counts the load_lora_adapter calls a replica received for an adapter.
func loads(r *mockupstream.Replica, name string) int {
	n := 0
	for _, l := range r.Loads() {
		if l["lora_name"] == name {
			n++
		}
	}
	return n
}

// lists reports whether the replica's GET /v1/models names the adapter.
func lists(t *testing.T, r *mockupstream.Replica, name string) bool {
	t.Helper()
	resp, err := http.Get(r.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Data []struct{ ID string } }
	json.NewDecoder(resp.Body).Decode(&body)
	for _, m := range body.Data {
		if m.ID == name {
			return true
		}
	}
	return false
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeDNS answers LookupHost for one made-up host with a changeable list of addresses.
type fakeDNS struct {
	host    string
	mu      sync.Mutex
	addrs   []string
	lookups atomic.Int64
}

func (d *fakeDNS) set(addrs ...string) {
	d.mu.Lock()
	d.addrs = addrs
	d.mu.Unlock()
}

func (d *fakeDNS) LookupHost(ctx context.Context, host string) ([]string, error) {
	d.lookups.Add(1)
	if host != d.host {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...), nil
}

// TestLoraDNSPool: with loraTargets: dns every address of the upstream host gets the adapters, and a
// replica that restarts or joins gets them back within the sync interval with no call to svc.
//
// The replicas listen on 127.0.0.2 and 127.0.0.3 with one port, as the pods of a headless Service
// share theirs; the injected resolver maps the upstream host to those addresses. Requests go to the
// upstream URL itself, here a round-robin balancer on 127.0.0.1 with the same port, so that a request
// reaches one replica as it would through the Service.
func TestLoraDNSPool(t *testing.T) {
	lns, err := mockupstream.ListenSamePort("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")
	if err != nil {
		t.Skipf("needs several loopback addresses: %v", err)
	}
	port := fmt.Sprint(lns[0].Addr().(*net.TCPAddr).Port)
	p := startPool(t, lns[0], lns[1:3], mockupstream.Config{StrictModels: true})
	dns := &fakeDNS{host: "localhost"}
	dns.set("127.0.0.2", "127.0.0.3")
	const interval = 150 * time.Millisecond
	reg, err := NewRegistryWith([]ModelConfig{{Name: "pool", Runtime: RuntimeOpenAI, UpstreamModel: "mock-model",
		UpstreamURL: "http://localhost:" + port + "/v1", Lora: LoraVLLM, LoraTargets: &LoraTargets{Mode: LoraTargetsDNS}}},
		Options{LookupHost: dns.LookupHost, LoraSyncInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	if err := prepare(t, reg, "pool", "ft-a"); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	for i, r := range p.replicas {
		if n := loads(r, "ft-a"); n != 1 || r.Loads()[0]["lora_path"] != "acme/ft-a" {
			t.Fatalf("replica %d: %d loads of ft-a (%v) after Prepare, want 1", i, n, r.Loads())
		}
	}
	for range 4 {
		complete(t, reg, "pool", "ft-a")
	}
	for i, r := range p.replicas {
		if r.ChatCount() != 2 {
			t.Errorf("replica %d answered %d requests, want 2 (round robin)", i, r.ChatCount())
		}
	}

	// An adapter first seen in a request, not prepared, is loaded on every replica too.
	complete(t, reg, "pool", "ft-b")
	for i, r := range p.replicas {
		if loads(r, "ft-b") != 1 {
			t.Errorf("replica %d: %d loads of ft-b, want 1", i, loads(r, "ft-b"))
		}
	}

	// A replica restarts at the same address: it gets both adapters back by itself.
	p.replicas[1].Restart()
	eventually(t, 20*interval, "the restarted replica lists ft-a and ft-b", func() bool {
		return lists(t, p.replicas[1], "ft-a") && lists(t, p.replicas[1], "ft-b")
	})
	if loads(p.replicas[0], "ft-a") != 1 || loads(p.replicas[0], "ft-b") != 1 {
		t.Errorf("the replica that kept its adapters was loaded again: %v", p.replicas[0].Loads())
	}

	// A replica joins the Service: it gets the adapters once DNS names it.
	joined := mockupstream.StartReplica(lns[3], mockupstream.Config{StrictModels: true})
	defer joined.Close()
	p.replicas = append(p.replicas, joined)
	dns.set("127.0.0.2", "127.0.0.3", "127.0.0.4")
	eventually(t, 20*interval, "the joined replica lists ft-a and ft-b", func() bool {
		return lists(t, joined, "ft-a") && lists(t, joined, "ft-b")
	})
	p.gateway.SetBackends(p.backends()...)
	for range 3 {
		complete(t, reg, "pool", "ft-a")
	}
	if joined.ChatCount() != 1 {
		t.Errorf("the joined replica answered %d requests, want 1", joined.ChatCount())
	}
}

// TestLoraPoolReloadsAndRetries: a request that the Service sends to a replica that lost the adapter
// is answered: the adapter is loaded again where it is missing, and the request retried once.
func TestLoraPoolReloadsAndRetries(t *testing.T) {
	p := startPool(t, listen(t), []net.Listener{listen(t), listen(t)}, mockupstream.Config{StrictModels: true})
	reg, err := NewRegistryWith([]ModelConfig{{Name: "pool", Runtime: RuntimeOpenAI, UpstreamModel: "mock-model", UpstreamURL: p.url,
		Lora: LoraVLLM, LoraTargets: &LoraTargets{URLs: []string{p.replicas[0].URL, p.replicas[1].URL}}}},
		Options{LoraSyncInterval: time.Hour}) // no background round during the test: only the retry can help
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := prepare(t, reg, "pool", "ft-a"); err != nil {
		t.Fatal(err)
	}
	p.replicas[1].Restart()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 4 {
		if i%2 == 0 {
			complete(t, reg, "pool", "ft-a")
			continue
		}
		st, err := reg.Runtime("pool").Stream(ctx, &Call{Model: "pool", Served: "ft-a", Adapter: "hf://acme/ft-a", AdapterName: "ft-a", Stream: true,
			Body: map[string]json.RawMessage{"messages": json.RawMessage(`[]`), "stream": json.RawMessage(`true`)}})
		if err != nil {
			t.Fatalf("streamed request %d: %v", i, err)
		}
		for {
			if _, err := st.Next(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
		}
		st.Close()
	}
	if n := loads(p.replicas[1], "ft-a"); n != 2 {
		t.Errorf("the restarted replica got %d loads, want 2", n)
	}
	if n := loads(p.replicas[0], "ft-a"); n != 1 {
		t.Errorf("the replica that kept the adapter got %d loads, want 1", n)
	}
	if p.replicas[1].ChatCount() == 0 {
		t.Errorf("the restarted replica answered no request after the reload")
	}
}

// TestLoraPoolRetriesFailedReplica: a replica that is down when the adapter is prepared gets it once
// it is up, within the sync interval; Prepare reports the failure without the replica's address.
func TestLoraPoolRetriesFailedReplica(t *testing.T) {
	p := startPool(t, listen(t), []net.Listener{listen(t)}, mockupstream.Config{StrictModels: true})
	down := listen(t)
	downAddr := down.Addr().String()
	down.Close()
	const interval = 100 * time.Millisecond
	reg, err := NewRegistryWith([]ModelConfig{{Name: "pool", Runtime: RuntimeOpenAI, UpstreamModel: "mock-model", UpstreamURL: p.url,
		Lora: LoraVLLM, LoraTargets: &LoraTargets{URLs: []string{p.replicas[0].URL, "http://" + downAddr + "/v1"}}}},
		Options{LoraSyncInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	err = prepare(t, reg, "pool", "ft-a")
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "failed on 1 of 2 replicas") || strings.Contains(e.Message, downAddr) {
		t.Fatalf("prepare with a replica down: %v", err)
	}
	// The replica that is up serves the adapter meanwhile.
	complete(t, reg, "pool", "ft-a")

	ln, err := net.Listen("tcp", downAddr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	late := mockupstream.StartReplica(ln, mockupstream.Config{StrictModels: true})
	defer late.Close()
	eventually(t, 30*interval, "the replica that came up lists ft-a", func() bool { return lists(t, late, "ft-a") })
}

// TestLoraPoolOneLoadPerReplica: concurrent first requests for an adapter cause one load per replica.
func TestLoraPoolOneLoadPerReplica(t *testing.T) {
	p := startPool(t, listen(t), []net.Listener{listen(t), listen(t)}, mockupstream.Config{StrictModels: true})
	reg, err := NewRegistryWith([]ModelConfig{{Name: "pool", Runtime: RuntimeOpenAI, UpstreamModel: "mock-model", UpstreamURL: p.url,
		Lora: LoraVLLM, LoraTargets: &LoraTargets{URLs: []string{p.replicas[0].URL, p.replicas[1].URL}}}},
		Options{LoraSyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := reg.Runtime("pool").Complete(context.Background(), adapterCall("pool", "ft-c")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, r := range p.replicas {
		if n := loads(r, "ft-c"); n != 1 {
			t.Errorf("replica %d got %d loads, want 1", i, n)
		}
	}
}

// TestLoraResolver: with lora: resolver the adapter name is sent as the model and nothing is loaded.
func TestLoraResolver(t *testing.T) {
	p := startPool(t, listen(t), []net.Listener{listen(t), listen(t)}, mockupstream.Config{})
	reg, err := NewRegistry([]ModelConfig{{Name: "gw", Runtime: RuntimeOpenAI, UpstreamModel: "mock-model", UpstreamURL: p.url, Lora: LoraResolver}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := prepare(t, reg, "gw", "ft-a"); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	complete(t, reg, "gw", "ft-a")
	complete(t, reg, "gw", "ft-a")
	for i, r := range p.replicas {
		if len(r.Loads()) != 0 {
			t.Errorf("replica %d saw load calls: %v", i, r.Loads())
		}
		if last := r.LastRequest(); last == nil || last.Body["model"] != "ft-a" {
			t.Errorf("replica %d: last request %+v, want model ft-a", i, last)
		}
	}
}

// TestRegistryCloseStopsLoraPools: after Close a pool neither resolves nor calls its replicas.
func TestRegistryCloseStopsLoraPools(t *testing.T) {
	var calls atomic.Int64
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, `{"object":"list","data":[{"id":"mock-model"}]}`)
	}))
	defer replica.Close()
	dns := &fakeDNS{host: "vllm.test"}
	dns.set("127.0.0.1")
	const interval = 20 * time.Millisecond
	reg, err := NewRegistryWith([]ModelConfig{{Name: "pool", Runtime: RuntimeOpenAI, UpstreamModel: "mock-model",
		UpstreamURL: "http://vllm.test:" + replica.URL[strings.LastIndex(replica.URL, ":")+1:] + "/v1", Lora: LoraVLLM,
		LoraTargets: &LoraTargets{Mode: LoraTargetsDNS}}}, Options{LookupHost: dns.LookupHost, LoraSyncInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	prepare(t, reg, "pool", "ft-a")
	eventually(t, 50*interval, "background rounds", func() bool { return dns.lookups.Load() >= 3 })
	reg.Close()
	lookups := dns.lookups.Load()
	time.Sleep(2 * interval) // a call cut short by Close may still reach the handler
	seen := calls.Load()
	time.Sleep(10 * interval) // on purpose: ten rounds' time in which nothing more should happen
	if dns.lookups.Load() != lookups || calls.Load() != seen {
		t.Fatalf("after Close: lookups %d -> %d, replica calls %d -> %d", lookups, dns.lookups.Load(), seen, calls.Load())
	}
}

// TestLoraPoolReadsTheFleetsReplicas: on a model with replicas, the pool that keeps adapters loaded
// reads the model's replicas from its fleet, the one owner of that set: a replica the fleet takes in
// (its resolver's next lookup of the name, here set directly, the lookup interval being an hour) gets
// the adapters at the next Prepare, one it drops gets none, and the pool looks the name up no more than
// the fleet does.
func TestLoraPoolReadsTheFleetsReplicas(t *testing.T) {
	lns, err := mockupstream.ListenSamePort("127.0.0.2", "127.0.0.3", "127.0.0.4")
	if err != nil {
		t.Skipf("needs several loopback addresses: %v", err)
	}
	var reps []*mockupstream.Replica
	for _, ln := range lns {
		r := mockupstream.StartReplica(ln, mockupstream.Config{StrictModels: true})
		t.Cleanup(r.Close)
		reps = append(reps, r)
	}
	port := fmt.Sprint(lns[0].Addr().(*net.TCPAddr).Port)
	dns := &fakeDNS{host: "vllm-headless"}
	dns.set("127.0.0.2", "127.0.0.3")
	models := []ModelConfig{{Name: "fleet", Runtime: RuntimeOpenAI, UpstreamModel: "mock-model", Lora: LoraVLLM,
		Replicas: &Replicas{DNS: "vllm-headless:" + port}}}
	if err := Validate("test", models); err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistryWith(models, Options{LookupHost: dns.LookupHost, LoraSyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if err := prepare(t, reg, "fleet", "ft-a"); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if loads(reps[0], "ft-a") != 1 || loads(reps[1], "ft-a") != 1 || loads(reps[2], "ft-a") != 0 {
		t.Fatalf("loads of ft-a on .2, .3, .4 = %d, %d, %d; want 1, 1, 0", loads(reps[0], "ft-a"), loads(reps[1], "ft-a"), loads(reps[2], "ft-a"))
	}
	if n := dns.lookups.Load(); n != 1 {
		t.Errorf("%d lookups of the name, want 1 (the fleet's)", n)
	}
	// The fleet takes .4 in and drops .2, as its resolver does when the name's addresses move.
	o := reg.Runtime("fleet").(*openAI)
	if err := o.fleet.SetReplicas([]string{reps[1].URL, reps[2].URL}); err != nil {
		t.Fatal(err)
	}
	if err := prepare(t, reg, "fleet", "ft-b"); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if loads(reps[0], "ft-b") != 0 || loads(reps[1], "ft-b") != 1 || loads(reps[2], "ft-b") != 1 {
		t.Fatalf("loads of ft-b on .2, .3, .4 = %d, %d, %d; want 0, 1, 1 (the fleet's replicas)", loads(reps[0], "ft-b"), loads(reps[1], "ft-b"), loads(reps[2], "ft-b"))
	}
}
