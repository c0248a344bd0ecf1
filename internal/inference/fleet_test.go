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
	"testing"
	"time"

	"github.com/svcdev/svc/internal/mockupstream"
)

// fleetCall is a chat call of a session whose history has turns turns after a long system prompt.
func fleetCall(session string, turns int, stream bool) *Call {
	msgs := []map[string]string{{"role": "system", "content": strings.Repeat("You are an agent with tools. ", 60)}}
	for i := range turns {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("%s turn %d %s", session, i, strings.Repeat("context ", 30))},
			map[string]string{"role": "assistant", "content": "done"})
	}
	m, _ := json.Marshal(msgs)
	body := map[string]json.RawMessage{"messages": m}
	if stream {
		body["stream"] = json.RawMessage(`true`)
	}
	return &Call{Model: "fleet", Served: "fleet", Stream: stream, Body: body}
}

func startFakes(t *testing.T, n int) ([]*mockupstream.Engine, []*httptest.Server) {
	var fakes []*mockupstream.Engine
	var srvs []*httptest.Server
	for range n {
		f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: time.Nanosecond})
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		fakes, srvs = append(fakes, f), append(srvs, s)
	}
	return fakes, srvs
}

func fleetRegistry(t *testing.T, srvs []*httptest.Server) *Registry {
	var urls []string
	for _, s := range srvs {
		urls = append(urls, s.URL+"/v1")
	}
	return fleetRegistryOf(t, ModelConfig{Name: "fleet", Runtime: RuntimeOpenAI, UpstreamModel: "fake-model", Replicas: &Replicas{URLs: urls}})
}

// fleetRegistryOf is a registry of one model, validated as a models file's would be.
func fleetRegistryOf(t *testing.T, m ModelConfig) *Registry {
	t.Helper()
	models := []ModelConfig{m}
	if err := Validate("test", models); err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistryWith(models, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

func run(t *testing.T, reg *Registry, c *Call) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt := reg.Runtime("fleet")
	if !c.Stream {
		_, err := rt.Complete(ctx, c)
		return err
	}
	st, err := rt.Stream(ctx, c)
	if err != nil {
		return err
	}
	defer st.Close()
	for {
		if _, err := st.Next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func TestFleetAffinityKeepsASessionOnOneReplica(t *testing.T) {
	fakes, srvs := startFakes(t, 3)
	reg := fleetRegistry(t, srvs)
	answeredBy := map[string]bool{}
	for turn := range 8 {
		c := fleetCall("s1", turn+1, turn%2 == 1) // each turn with a user message, as a session's are
		if err := run(t, reg, c); err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		answeredBy[c.Replica] = true
	}
	var got []int64
	for i, f := range fakes {
		got = append(got, f.Requests.Load())
		// Each call names the replica that answered it (host:port), as its run will.
		if f.Requests.Load() == 8 && (len(answeredBy) != 1 || !answeredBy[strings.TrimPrefix(srvs[i].URL, "http://")]) {
			t.Errorf("the calls named replicas %v, want only %s", answeredBy, srvs[i].URL)
		}
	}
	if fmt.Sprint(got) != "[8 0 0]" && fmt.Sprint(got) != "[0 8 0]" && fmt.Sprint(got) != "[0 0 8]" {
		t.Errorf("a growing session's 8 turns went %v over the replicas, want all on one", got)
	}
	var cached, prompt int64
	for _, f := range fakes {
		cached, prompt = cached+f.CachedTokens.Load(), prompt+f.PromptTokens.Load()
	}
	if float64(cached) < 0.7*float64(prompt) {
		t.Errorf("%d of %d prompt tokens cached", cached, prompt)
	}
}

func TestFleetEjectsAKilledReplicaAndRetries(t *testing.T) {
	fakes, srvs := startFakes(t, 3)
	reg := fleetRegistry(t, srvs)
	// Find the replica of a session, then kill it: the session's next turns still succeed, elsewhere.
	// (Its first call has a user message: the opening that keys the session's place.)
	if err := run(t, reg, fleetCall("s1", 1, false)); err != nil {
		t.Fatal(err)
	}
	dead := -1
	for i, f := range fakes {
		if f.Requests.Load() == 1 {
			dead = i
		}
	}
	srvs[dead].Close()
	for turn := 2; turn < 10; turn++ {
		c := fleetCall("s1", turn, turn%2 == 0)
		if err := run(t, reg, c); err != nil {
			t.Fatalf("turn %d after the kill: %v", turn, err)
		}
		if c.Replica == "" || c.Replica == strings.TrimPrefix(srvs[dead].URL, "http://") {
			t.Fatalf("turn %d after the kill was answered by %q, the killed replica is %s", turn, c.Replica, srvs[dead].URL)
		}
	}
	for i, s := range reg.Runtime("fleet").(*openAI).fleet.States() {
		if want := i != dead; s.Healthy != want {
			t.Errorf("replica %d healthy=%v, want %v", i, s.Healthy, want)
		}
	}
	// A 5xx before any byte counts as a failure too; with every replica down the answer is a 503
	// naming the model and no address.
	for i, f := range fakes {
		if i != dead {
			f.FailStatus.Store(500)
		}
	}
	// The first call tries one replica, then the other, and relays the last one's 500.
	var e *Error
	if err := run(t, reg, fleetCall("s2", 0, false)); !errors.As(err, &e) || e.Status != http.StatusInternalServerError {
		t.Fatalf("both live replicas failing: %v, want the last one's 500", err)
	}
	err := run(t, reg, fleetCall("s2", 0, false))
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, `"fleet"`) || strings.Contains(e.Message, "127.0.0.1") {
		t.Fatalf("every replica out: %v, want a 503 naming the model and no address", err)
	}
	for _, f := range fakes {
		f.FailStatus.Store(0)
	}
	// Back within the 1 s ejection and a probe (the live ones; the killed one stays out).
	deadline := time.Now().Add(3 * time.Second)
	for run(t, reg, fleetCall("s2", 0, false)) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the replicas that answer /health again were not back in within 3 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestFleetNeverRetries4xx(t *testing.T) {
	fakes, srvs := startFakes(t, 2)
	reg := fleetRegistry(t, srvs)
	c := fleetCall("s", 0, false)
	c.Body["messages"] = json.RawMessage(`[]`) // the fake answers 400 to no messages
	err := run(t, reg, c)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Fatalf("got %v, want the upstream's 400", err)
	}
	for _, s := range reg.Runtime("fleet").(*openAI).fleet.States() {
		if !s.Healthy {
			t.Errorf("%s ejected for a 400", s.Addr)
		}
	}
	_ = fakes
}

// With replicas: {dns: host:port} the replicas are the name's addresses (a headless Service's pods,
// here fake vLLM servers on 127.0.0.2-4 sharing one port): calls spread over them,
// each call names the address that answered, and a pod that joins gets sessions within the lookup
// interval while one that leaves gets none (round-robin here: the sessions share a system prompt,
// which affinity would keep on one replica).
func TestFleetFollowsTheNamesAddresses(t *testing.T) {
	lns, err := mockupstream.ListenSamePort("127.0.0.2", "127.0.0.3", "127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	fakes := map[string]*mockupstream.Engine{}
	for _, ln := range lns {
		f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: time.Nanosecond})
		srv := &http.Server{Handler: f}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		fakes[ln.Addr().String()] = f
	}
	_, port, _ := net.SplitHostPort(lns[0].Addr().String())
	dns := &fakeDNS{host: "vllm-headless"}
	dns.set("127.0.0.3", "127.0.0.2")
	models := []ModelConfig{{Name: "fleet", Runtime: RuntimeOpenAI, UpstreamModel: "fake-model", Routing: "round-robin", Replicas: &Replicas{DNS: "vllm-headless:" + port}}}
	if err := Validate("test", models); err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistryWith(models, Options{LookupHost: dns.LookupHost, LoraSyncInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)

	answered := func(sessions int) map[string]int {
		t.Helper()
		out := map[string]int{}
		for s := range sessions {
			for turn := range 2 {
				c := fleetCall(fmt.Sprintf("session-%d", s), turn, false)
				if err := run(t, reg, c); err != nil {
					t.Fatalf("session %d: %v", s, err)
				}
				out[c.Replica]++
			}
		}
		return out
	}
	a, b, c := "127.0.0.2:"+port, "127.0.0.3:"+port, "127.0.0.4:"+port
	got := answered(24)
	if got[a] == 0 || got[b] == 0 || got[c] != 0 || got[a]+got[b] != 48 {
		t.Fatalf("24 sessions over %s and %s answered by %v", a, b, got)
	}
	if fakes[c].Requests.Load() != 0 {
		t.Fatalf("the replica not in the name's addresses got %d requests", fakes[c].Requests.Load())
	}
	// A pod joins and one leaves: within the lookup interval the fleet follows.
	dns.set("127.0.0.4", "127.0.0.3")
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = answered(24)
		if got[a] == 0 && got[c] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the name moved to %s and %s, calls were answered by %v", b, c, got)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// TestFleetHoldsAnAdapterCallForTheFirstFreeSlot: two replicas of one adapter slot each, both held by
// long calls of two adapters; a call of a third adapter is held in svc, not sent to wait on a
// replica, and goes to the replica whose call ended first (docs/LORA.md, "Fleets").
func TestFleetHoldsAnAdapterCallForTheFirstFreeSlot(t *testing.T) {
	var fakes []*mockupstream.Engine
	var urls []string
	for range 2 {
		f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", MaxLoras: 1, PrefillTime: time.Nanosecond, ITL: 150 * time.Millisecond, Tokens: 3})
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		fakes, urls = append(fakes, f), append(urls, s.URL+"/v1")
	}
	reg := fleetRegistryOf(t, ModelConfig{Name: "fleet", Runtime: RuntimeOpenAI, UpstreamModel: "fake-model", Replicas: &Replicas{URLs: urls},
		Lora: LoraVLLM, MaxLoras: 1})
	for _, a := range []string{"ft-1", "ft-2", "ft-3"} {
		if err := prepare(t, reg, "fleet", a); err != nil {
			t.Fatal(err)
		}
	}
	started := func(n int64) {
		t.Helper()
		for range 1000 {
			if fakes[0].Requests.Load()+fakes[1].Requests.Load() >= n {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("%d calls never reached the replicas", n)
	}
	calls := []*Call{adapterCall("fleet", "ft-1"), adapterCall("fleet", "ft-2"), adapterCall("fleet", "ft-3")}
	errs := make(chan error, len(calls))
	for i, c := range calls {
		go func() { errs <- run(t, reg, c) }()
		if i < 2 {
			started(int64(i + 1)) // the first two take both slots, in this order
		}
		if i == 0 {
			// ft-1's call ends 200 ms before ft-2's: which slot frees first is not left to the
			// scheduler's jitter (it was, and ft-2's ended first under -race at load 12).
			time.Sleep(200 * time.Millisecond)
		}
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if calls[0].Replica == calls[1].Replica {
		t.Fatalf("ft-1 and ft-2 both went to %s, of one slot, the other free", calls[0].Replica)
	}
	if calls[2].Replica != calls[0].Replica {
		t.Errorf("ft-3 went to %s, want %s, whose slot freed first", calls[2].Replica, calls[0].Replica)
	}
	if w := fakes[0].SlotWaits.Load() + fakes[1].SlotWaits.Load(); w != 0 {
		t.Errorf("%d calls waited for a slot on a replica, want ft-3 held in svc instead", w)
	}
}

func TestAdmissionSettings(t *testing.T) {
	for yaml, says := range map[string]string{
		"models:\n  - name: a\n    maxConcurrency: -1\n":                        "maxConcurrency must be between 0",
		"models:\n  - name: a\n    maxConcurrency: 1\n    queueTimeoutMs: -5\n": "queueTimeoutMs must be between 0",
		"models:\n  - name: a\n    queueTimeoutMs: 100\n":                       "queueTimeoutMs needs maxConcurrency",
	} {
		if _, err := ParseModels("models.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: error %v, want one saying %q", yaml, err, says)
		}
	}
	healthy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) // GET /health: 200
	defer healthy.Close()
	r, err := NewRegistryWith([]ModelConfig{{Name: "bounded", MaxConcurrency: 4, QueueTimeoutMs: 2500}, {Name: "free"},
		{Name: "fleet", Runtime: RuntimeOpenAI, MaxConcurrency: 3, Replicas: &Replicas{URLs: []string{healthy.URL + "/v1", healthy.URL + "/v2"}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c, d := r.Admission("bounded"); c != 4 || d != 2500*time.Millisecond {
		t.Errorf("bounded: %d, %v", c, d)
	}
	if c, _ := r.Admission("free"); c != 0 {
		t.Errorf("a model without maxConcurrency admits %d at once, want no bound (0)", c)
	}
	if c, _ := r.Admission("fleet"); c != 6 {
		t.Errorf("two healthy replicas of 3: %d at once, want 6", c)
	}
}

// TestAnAdapterIsServedOnceOneReplicaHasItAndNeverWhereItLoads: an edge's first call of an adapter no
// replica has goes once the first replica has loaded it, not after the slowest, and while another
// replica still loads it (vLLM reading its weights) no call goes there to be answered 404; once that
// load ends, the replica serves it too.
func TestAnAdapterIsServedOnceOneReplicaHasItAndNeverWhereItLoads(t *testing.T) {
	const slowLoad = 1500 * time.Millisecond
	var fakes []*mockupstream.Engine
	var urls []string
	for _, load := range []time.Duration{0, slowLoad} {
		f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", MaxLoras: 2, PrefillTime: time.Nanosecond, ITL: 50 * time.Millisecond, AdapterLoadTime: load})
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		fakes, urls = append(fakes, f), append(urls, s.URL+"/v1")
	}
	reg := fleetRegistryOf(t, ModelConfig{Name: "fleet", Runtime: RuntimeOpenAI, UpstreamModel: "fake-model", Replicas: &Replicas{URLs: urls},
		Lora: LoraVLLM, MaxLoras: 2})
	start := time.Now()
	errs := make(chan error, 8)
	for range 8 { // at once: the affinity picker spreads them over both replicas when both serve the adapter
		go func() { errs <- run(t, reg, adapterCall("fleet", "ft-1")) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took >= slowLoad {
		t.Errorf("8 calls took %v: they waited for the slow replica's load (%v)", took, slowLoad)
	}
	if n := fakes[1].Missing.Load(); n != 0 {
		t.Errorf("%d calls went to the replica loading the adapter and were answered 404", n)
	}
	if n := fakes[0].Requests.Load(); n != 8 {
		t.Errorf("the replica with the adapter served %d of 8 calls", n)
	}
	// The models API says where it loads (what `svc models get` and the studio's Fleet page show).
	if f, ok := reg.Fleet("fleet"); !ok || fmt.Sprint(f.Replicas[1].Unready) != "[ft-1]" {
		t.Errorf("the fleet's state while the slow replica loads: %+v", f.Replicas)
	}
	// Once its load ends, the slow replica serves the adapter too.
	o := reg.Runtime("fleet").(*openAI)
	deadline := time.Now().Add(5 * time.Second)
	for len(o.fleet.States()[1].Unready) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slow replica is still unready for ft-1 5 s on: %v", o.fleet.States()[1].Unready)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 8 {
		go func() { errs <- run(t, reg, adapterCall("fleet", "ft-1")) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if fakes[1].Requests.Load() == 0 {
		t.Error("the slow replica served none of 8 calls at once once it had loaded the adapter")
	}
}
