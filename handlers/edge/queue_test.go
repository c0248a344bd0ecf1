package edge_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/poll"
)

// A run records its wait for its model's turn (queueMs): a call that waited behind another for at
// least 150 ms says so in its run, as the API reads it; the call that went at once says 0; a call
// refused model_busy records the wait it gave up after.
func TestRunRecordsItsQueueWait(t *testing.T) {
	var gated atomic.Bool
	entered, let := make(chan struct{}, 8), make(chan struct{})
	e := newEnvWith(t, envOptions{models: admissionModels, upstreamSaw: func(r *http.Request) {
		if gated.Load() && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			entered <- struct{}{}
			select {
			case <-let:
			case <-time.After(3 * time.Second):
			}
		}
	}})
	d, key := e.deploy("queue-ep", base("up-one"), cloudapi.AuthFixedAPIKey, "", 0)
	gated.Store(true)
	first := make(chan reply, 1)
	go func() { first <- e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("first")) }()
	<-entered
	second := make(chan reply, 1)
	go func() { second <- e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("second")) }()
	poll.Until(t, 5*time.Second, "the second call queued", func() bool {
		return strings.Contains(e.metricsText(), `svc_admission_queue_depth{lane="interactive",model="up-one"} 1`)
	})
	time.Sleep(150 * time.Millisecond) // the wait the run must record (below the 400 ms queue timeout)
	let <- struct{}{}
	<-entered
	let <- struct{}{}
	for _, ch := range []chan reply{first, second} {
		if r := <-ch; r.status != 200 {
			t.Fatalf("call: %d %s", r.status, r.body)
		}
	}
	// A third call while the model is busy gives up after the queue timeout.
	go func() { first <- e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("held")) }()
	<-entered
	if r := e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("refused")); r.status != 429 {
		t.Fatalf("refused: %d %s", r.status, r.body)
	}
	let <- struct{}{}
	<-first

	var got map[string]int64
	poll.Until(t, 5*time.Second, "four runs", func() bool {
		page, err := e.srv.Service.ListRuns(context.Background(), e.pr, d.ID, core.RunFilter{}, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]int64{}
		for _, r := range page.Items {
			run, err := e.srv.Service.GetRun(context.Background(), e.pr, d.ID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			got[string(run.Request)] = run.Queue.Milliseconds()
		}
		return len(got) == 4
	})
	for req, ms := range got {
		switch {
		case strings.Contains(req, `"first"`) || strings.Contains(req, `"held"`):
			if ms != 0 {
				t.Errorf("a call that went at once records %d ms of queue: %s", ms, req)
			}
		case strings.Contains(req, `"second"`):
			if ms < 150 || ms > 3000 {
				t.Errorf("the call that waited records %d ms of queue, want at least 150", ms)
			}
		case strings.Contains(req, `"refused"`):
			if ms < 400 {
				t.Errorf("the model_busy call records %d ms of queue, want its 400 ms timeout", ms)
			}
		}
	}
}

// A deployment's own queueTimeoutMs bounds its calls' wait over the model's (400 ms here): 100 ms, then
// model_busy; cleared, the model's applies again.
func TestDeploymentQueueTimeoutOverridesTheModels(t *testing.T) {
	var gated atomic.Bool
	entered, let := make(chan struct{}, 8), make(chan struct{})
	e := newEnvWith(t, envOptions{models: admissionModels, upstreamSaw: func(r *http.Request) {
		if gated.Load() && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			entered <- struct{}{}
			select {
			case <-let:
			case <-time.After(5 * time.Second):
			}
		}
	}})
	d, key := e.deploy("qt-ep", base("up-one"), cloudapi.AuthFixedAPIKey, "", 0)
	ms := 100
	if _, err := e.srv.Service.UpdateDeployment(context.Background(), e.pr, d.ID, core.DeploymentChange{QueueTimeoutMs: core.LimitChange{Set: true, Value: &ms}}); err != nil {
		t.Fatal(err)
	}
	gated.Store(true)
	held := make(chan reply, 1)
	go func() { held <- e.do("POST", "qt-ep", "/v1/chat/completions", key, chatBody("held")) }()
	<-entered
	wait := func() time.Duration {
		start := time.Now()
		wantError(t, e.do("POST", "qt-ep", "/v1/chat/completions", key, chatBody("waits")), 429, "model_busy")
		return time.Since(start)
	}
	if w := wait(); w < 100*time.Millisecond || w >= 400*time.Millisecond {
		t.Errorf("with the deployment's 100 ms the call was refused after %v", w)
	}
	if _, err := e.srv.Service.UpdateDeployment(context.Background(), e.pr, d.ID, core.DeploymentChange{QueueTimeoutMs: core.LimitChange{Set: true}}); err != nil {
		t.Fatal(err)
	}
	if w := wait(); w < 400*time.Millisecond {
		t.Errorf("back to the model's 400 ms, the call was refused after %v", w)
	}
	let <- struct{}{}
	<-held
}

// A key's weight is its share of the turns: with one call at once and two keys waiting, a key of weight
// 3 is admitted three times for each call of a key of weight 1.
func TestKeyWeightSharesTheTurns(t *testing.T) {
	var gated atomic.Bool
	order := make(chan string, 64)
	let := make(chan struct{})
	e := newEnvWith(t, envOptions{models: admissionModels, upstreamSaw: func(r *http.Request) {
		if gated.Load() && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			switch {
			case bytes.Contains(b, []byte("heavy")):
				order <- "heavy"
			case bytes.Contains(b, []byte("light")):
				order <- "light"
			default:
				order <- "first"
			}
			select {
			case <-let:
			case <-time.After(5 * time.Second):
			}
		}
	}})
	d, key := e.deploy("weights", base("up-one"), cloudapi.AuthFixedAPIKey, "", 0)
	ctx := context.Background()
	heavy, err := e.srv.Service.IssueKeyWith(ctx, e.pr, d.ID, core.NewKey{Label: "heavy", Weight: 3})
	if err != nil {
		t.Fatal(err)
	}
	light, err := e.srv.Service.IssueKey(ctx, e.pr, d.ID, "light")
	if err != nil {
		t.Fatal(err)
	}
	ms := 5000
	if _, err := e.srv.Service.UpdateDeployment(ctx, e.pr, d.ID, core.DeploymentChange{QueueTimeoutMs: core.LimitChange{Set: true, Value: &ms}}); err != nil {
		t.Fatal(err)
	}
	gated.Store(true)
	done := make(chan reply, 32)
	go func() { done <- e.do("POST", "weights", "/v1/chat/completions", key, chatBody("first")) }()
	if got := <-order; got != "first" {
		t.Fatalf("first upstream call: %s", got)
	}
	const each = 8
	for i := range 2 * each {
		k, text := heavy.Plaintext, "heavy"
		if i%2 == 1 {
			k, text = light.Plaintext, "light"
		}
		go func() { done <- e.do("POST", "weights", "/v1/chat/completions", k, chatBody(text)) }()
	}
	poll.Until(t, 5*time.Second, "16 calls queued", func() bool {
		return strings.Contains(e.metricsText(), `svc_admission_queue_depth{lane="interactive",model="up-one"} 16`)
	})
	var got []string
	for range 2 * each {
		let <- struct{}{} // the call upstream ends: the next turn is taken
		got = append(got, <-order)
	}
	let <- struct{}{}
	heavyFirst := 0
	for _, k := range got[:8] {
		if k == "heavy" {
			heavyFirst++
		}
	}
	if heavyFirst != 6 {
		t.Errorf("of the first 8 turns the weight-3 key took %d, want 6 (3 for each of the other's): %v", heavyFirst, got)
	}
	for range 2*each + 1 {
		if r := <-done; r.status != 200 {
			t.Errorf("call: %d %s", r.status, r.body)
		}
	}
}

// A fleet whose models file sets no maxConcurrency learns its capacity from vLLM's own numbers: once a
// replica was scraped running 2 requests while others waited on it (--max-num-seqs 2), the edge admits
// 2 calls at once and holds the rest itself, instead of piling them into the replica's queue.
func TestFleetCapacityLearnedFromVLLM(t *testing.T) {
	f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", MaxNumSeqs: 2, PrefillTime: time.Nanosecond,
		TTFTBase: 1500 * time.Millisecond, Tokens: 1})
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	e := newEnvWith(t, envOptions{models: `  - name: learn-fleet
    runtime: openai
    replicas: [` + s.URL + `/v1]
    upstreamModel: fake-model
    queueTimeoutMs: 10000
`})
	e.deploy("learn", base("learn-fleet"), cloudapi.AuthNone, "", 0)
	calls := func(n int) chan reply {
		out := make(chan reply, n)
		for i := range n {
			go func() { out <- e.do("POST", "learn", "/v1/chat/completions", "", chatBody("call "+strconv.Itoa(i))) }()
		}
		return out
	}
	// Before anything is learned nothing waits at the edge: 4 calls reach the replica, 2 wait there
	// for 1.5 s, and the scrape (once a second) sees it saturated.
	first := calls(4)
	for range 4 {
		if r := <-first; r.status != 200 {
			t.Fatalf("call: %d %s", r.status, r.body)
		}
	}
	// Now 4 calls: the first re-reads the capacity (2), 2 run on the replica, 2 wait at the edge (queue
	// depth 2), none in the replica's queue.
	second := calls(4)
	poll.Until(t, 5*time.Second, "two calls held at the edge", func() bool {
		return strings.Contains(e.metricsText(), `svc_admission_queue_depth{lane="interactive",model="learn-fleet"} 2`)
	})
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `vllm:num_requests_waiting{model_name="fake-model"} 0`) {
		t.Errorf("calls wait in the replica's queue while the edge holds its own:\n%s", m)
	}
	for range 4 {
		if r := <-second; r.status != 200 {
			t.Fatalf("call: %d %s", r.status, r.body)
		}
	}
}
