package inference

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestKVEventsValidation(t *testing.T) {
	replicas := &Replicas{URLs: []string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"}}
	for _, c := range []struct {
		name string
		m    ModelConfig
		want string // "" for none
	}{
		{"listen", ModelConfig{Replicas: replicas, KVEvents: &KVEvents{Listen: "tcp://0.0.0.0:5557"}}, ""},
		{"port", ModelConfig{Replicas: replicas, KVEvents: &KVEvents{Port: 5557, BlockSize: 32}}, ""},
		{"neither", ModelConfig{Replicas: replicas, KVEvents: &KVEvents{}}, "set listen"},
		{"both", ModelConfig{Replicas: replicas, KVEvents: &KVEvents{Listen: "tcp://0.0.0.0:5557", Port: 5557}}, "set listen"},
		{"not tcp", ModelConfig{Replicas: replicas, KVEvents: &KVEvents{Listen: "0.0.0.0:5557"}}, "is not tcp://host:port"},
		{"round-robin", ModelConfig{Replicas: replicas, Routing: "round-robin", KVEvents: &KVEvents{Port: 5557}}, "needs routing affinity"},
		{"no replicas", ModelConfig{UpstreamURL: "http://10.0.0.1:8000/v1", KVEvents: &KVEvents{Port: 5557}}, "only for a model with replicas"},
		{"simulator", ModelConfig{Runtime: RuntimeSimulator, KVEvents: &KVEvents{Port: 5557}}, "kvEvents is only for runtime"},
	} {
		m := c.m
		m.Name = "m"
		if m.Runtime == "" {
			m.Runtime, m.UpstreamModel = RuntimeOpenAI, "m"
		}
		err := Validate("models.yaml", []ModelConfig{m})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// TestKVEventsThroughTheRuntime, on llm-d-inference-sim (LLMD_SIM; skipped without): a model of two
// simulator replicas whose models-file entry names kvEvents {listen}; a conversation's turns through
// the runtime get their prompt tokenized after each answer, the replicas' events reach the index, the
// model's cache signal reads kv-events and the turns after the first are placed by the events, on the
// replica that reports their earlier turns cached.
func TestKVEventsThroughTheRuntime(t *testing.T) {
	sim := os.Getenv("LLMD_SIM")
	if sim == "" {
		t.Skip("LLMD_SIM names no llm-d-inference-sim binary")
	}
	port := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	zmq := "tcp://127.0.0.1:" + strconv.Itoa(port())
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	var urls []string
	for range 2 {
		p := port()
		c := exec.Command(sim, "--port", strconv.Itoa(p), "--model", model, "--force-dummy-tokenizer", "--mode", "echo",
			"--enable-kvcache", "--kv-cache-size", "1024", "--block-size", "16", "--prefill-time-per-token", "100us",
			"--max-model-len", "16384", "--event-batch-size", "1", "--zmq-endpoint", zmq)
		c.Env = append(os.Environ(), "POD_IP=127.0.0.1")
		if os.Getenv("KV_DEBUG") != "" {
			c.Stderr, c.Stdout = os.Stderr, os.Stderr
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		root := fmt.Sprintf("http://127.0.0.1:%d", p)
		urls = append(urls, root+"/v1")
		deadline := time.Now().Add(30 * time.Second)
		for {
			if resp, err := http.Get(root + "/health"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not healthy in 30 s", root)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	reg := fleetRegistryOf(t, ModelConfig{Name: "fleet", Runtime: RuntimeOpenAI, UpstreamModel: model,
		Replicas: &Replicas{URLs: urls}, KVEvents: &KVEvents{Listen: zmq}})
	if f, _ := reg.Fleet("fleet"); f.CacheSignal != "kv-events" {
		t.Fatalf("cache signal %q, want kv-events", f.CacheSignal)
	}
	mf := reg.Runtime("fleet").(*openAI).fleet
	// The simulators dial svc's socket every second until it is bound (it was bound after they
	// started): call each until one of its batches lands (a prompt of a block or more: a shorter one
	// stores nothing).
	for i, u := range urls {
		deadline := time.Now().Add(10 * time.Second)
		for mf.kv.x.StateOf(i).Batches == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no KV event from %s in 10 s", u)
			}
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"warm up %s %s"}]}`, model, time.Now(), strings.Repeat("word ", 40))
			resp, err := http.Post(u+"/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			time.Sleep(50 * time.Millisecond)
		}
	}
	msgs := []map[string]string{{"role": "system", "content": strings.Repeat("You are an agent with tools. ", 60)}}
	replicas := map[string]int{}
	for turn := range 4 {
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("turn %d %s", turn, strings.Repeat("context ", 80))})
		m, _ := json.Marshal(msgs)
		c := &Call{Model: "fleet", Served: "fleet", Body: map[string]json.RawMessage{"messages": m}}
		if err := run(t, reg, c); err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		replicas[c.Replica]++
		msgs = append(msgs, map[string]string{"role": "assistant", "content": "done"})
		// The prompt is tokenized in the background: wait for it, as a next turn a person types would.
		key, _ := sessionKey(c)
		deadline := time.Now().Add(10 * time.Second)
		for !mf.kv.x.Known(key) {
			if time.Now().After(deadline) {
				t.Fatalf("turn %d: its prompt was not tokenized in 10 s", turn)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var byEvents uint64
	for _, s := range mf.States() {
		byEvents += s.KVPicks
		if s.KV.State != "exact" && s.KV.State != "partial" {
			t.Errorf("replica %s: kv state %q, want exact or partial (joined mid-stream)", s.Addr, s.KV.State)
		}
	}
	if byEvents < 3 || len(replicas) != 1 {
		t.Errorf("%d of the 3 later turns placed by the events, over replicas %v; want 3 on one", byEvents, replicas)
	}
}

// TestTokenizeSendsTheUpstreamKey: a replica guarded by an API key (vLLM's --api-key guards
// /tokenize as it does the call) is asked with the model's key, as the call was; a refusal is an
// error that names the status only.
func TestTokenizeSendsTheUpstreamKey(t *testing.T) {
	var got []string
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		if r.URL.Path != "/tokenize" || r.Header.Get("Authorization") != "Bearer up-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"count":3,"max_model_len":8192,"tokens":[7,8,9]}`))
	}))
	defer replica.Close()
	kf := newKVFollower(&KVEvents{Port: 5557}, 0, nil)
	m := ModelConfig{Name: "m", Runtime: RuntimeOpenAI, UpstreamURL: replica.URL + "/v1", UpstreamModel: "m"}
	toks, err := kf.tokenize(newOpenAI(m, "up-secret", Options{}), replica.URL, []byte(`{"messages":[]}`))
	if err != nil || len(toks) != 3 || toks[2] != 9 {
		t.Fatalf("tokens %v, err %v; want [7 8 9]", toks, err)
	}
	_, err = kf.tokenize(newOpenAI(m, "", Options{}), replica.URL, []byte(`{"messages":[]}`))
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without the key: err %v, want one naming 401", err)
	}
	if len(got) != 2 || got[0] != "Bearer up-secret" || got[1] != "" {
		t.Errorf("Authorization headers %q", got)
	}
}
