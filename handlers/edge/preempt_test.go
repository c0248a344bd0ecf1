package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgemodel"
)

// A replay eval that fills its model while no caller is about borrows the callers' reserve (one place of
// 4); a caller who then comes gets that place at once instead of waiting for a replay to end: the
// youngest replay is cut (its upstream call cancelled), recorded by nobody, and sent again by the eval
// worker, so that the eval still ends with every run replayed exactly once and none failed.
func TestCallerTakesAReplaysBorrowedPlace(t *testing.T) {
	var gated atomic.Bool
	var mu sync.Mutex
	replays, cut := 0, 0
	inUpstream := atomic.Int64{}
	let := make(chan struct{})
	e := newEnvWith(t, envOptions{models: `  - name: up-yield
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    maxConcurrency: 4
    queueTimeoutMs: 3000
`, upstreamSaw: func(r *http.Request) {
		if !gated.Load() || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var body struct{ Messages []struct{ Content string } }
		json.Unmarshal(b, &body)
		if !strings.HasPrefix(body.Messages[len(body.Messages)-1].Content, "q") {
			return // the caller's call is answered at once
		}
		mu.Lock()
		replays++
		mu.Unlock()
		inUpstream.Add(1)
		defer inUpstream.Add(-1)
		select {
		case <-let:
		case <-r.Context().Done():
			mu.Lock()
			cut++
			mu.Unlock()
		case <-time.After(20 * time.Second):
		}
	}})
	d, key := e.deploy("yield", base("up-yield"), cloudapi.AuthFixedAPIKey, "", 0)
	const n = 6
	for i := range n {
		if r := e.do("POST", "yield", "/v1/chat/completions", key, chatBody("q"+string(rune('0'+i)))); r.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	count := func(q string) int {
		var c int
		if err := e.db.QueryRow(q, d.ID).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for deadline := time.Now().Add(10 * time.Second); count(`SELECT count(*) FROM runs WHERE deployment_id = ? AND arm != 'eval'`) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the callers' runs were never stored")
		}
	}
	gated.Store(true)
	ev, err := e.srv.Service.CreateEval(context.Background(), e.pr, d.ID, core.NewEval{
		Candidate: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "up-yield"}, Concurrency: 4}, "idn_test")
	if err != nil {
		t.Fatal(err)
	}
	// Once no caller has been about for the lending delay (5-6 s), the reserve is lent: 4 replays in the
	// upstream at once; the fourth waited longer than the model's queueTimeoutMs (3 s), which a replay
	// does not heed (it failed its item so, seen).
	for deadline := time.Now().Add(15 * time.Second); inUpstream.Load() < 4; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d replays in the upstream at once, want 4 (the reserve lent)", inUpstream.Load())
		}
	}
	start := time.Now()
	r := e.do("POST", "yield", "/v1/chat/completions", key, chatBody("caller"))
	if r.status != http.StatusOK {
		t.Fatalf("caller beside the eval: %d %s after %v; want a place at once", r.status, r.body, time.Since(start))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the caller took %v beside the eval", took)
	}
	close(let)
	var got *core.Eval
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got, err = e.srv.Service.GetEval(context.Background(), e.pr, d.ID, ev.ID); err != nil {
			t.Fatal(err)
		}
		if got.State == core.EvalDone || got.State == core.EvalFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the eval is %s with %+v", got.State, got.Progress)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got.State != core.EvalDone || got.Progress.Done != n || got.Progress.Failed != 0 {
		t.Fatalf("eval %s with %+v, want done with %d done and none failed", got.State, got.Progress, n)
	}
	if cut != 1 || replays != n+1 {
		t.Fatalf("the upstream saw %d replays, %d of them cut; want %d (one yielded and sent again)", replays, cut, n+1)
	}
	if runs, sources := count(`SELECT count(*) FROM runs WHERE deployment_id = ? AND arm = 'eval'`),
		count(`SELECT count(DISTINCT eval_of) FROM runs WHERE deployment_id = ? AND arm = 'eval'`); runs != n || sources != n {
		t.Fatalf("%d eval runs of %d source runs, want %d of %d: each replayed once", runs, sources, n, n)
	}
}

// A shadow copy in the callers' reserve gives its place back the same way: it is dropped, counted in
// svc_edge_shadow_dropped_total as a copy a full queue turns away, and not recorded. Endpoint
// "copied" answers from the simulator and copies every call to up-copies (2 places, 1 the callers'
// reserve); endpoint "direct" serves up-copies to callers.
func TestCallerTakesACopysBorrowedPlace(t *testing.T) {
	var gated atomic.Bool
	inUpstream := atomic.Int64{}
	let := make(chan struct{})
	e := newEnvWith(t, envOptions{models: `  - name: up-copies
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    maxConcurrency: 2
    queueTimeoutMs: 3000
`, upstreamSaw: func(r *http.Request) {
		if !gated.Load() || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if !bytes.Contains(b, []byte("copied")) {
			return // the caller's call is answered at once
		}
		inUpstream.Add(1)
		defer inUpstream.Add(-1)
		select {
		case <-let:
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	}})
	_, directKey := e.deploy("direct", base("up-copies"), cloudapi.AuthFixedAPIKey, "", 0)
	p, primaryKey := e.deploy("copied", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(p.ID, "up-copies", 99, edgemodel.CanaryShadow)
	gated.Store(true)
	for i := range 2 {
		if r := e.do("POST", "copied", "/v1/chat/completions", primaryKey, chatBody("copied "+string(rune('0'+i)))); r.status != http.StatusOK {
			t.Fatalf("primary: %d %s", r.status, r.body)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); inUpstream.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d copies in the upstream at once, want 2 (the reserve lent)", inUpstream.Load())
		}
	}
	start := time.Now()
	if r := e.do("POST", "direct", "/v1/chat/completions", directKey, chatBody("caller")); r.status != http.StatusOK {
		t.Fatalf("caller beside the copies: %d %s after %v; want a place at once", r.status, r.body, time.Since(start))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the caller took %v beside the copies", took)
	}
	want := `svc_edge_shadow_dropped_total 1`
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(e.metricsText(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", want)
		}
	}
	close(let)
	var copies int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := e.db.QueryRow(`SELECT count(*) FROM runs WHERE deployment_id = ? AND shadow_of != ''`, p.ID).Scan(&copies); err != nil {
			t.Fatal(err)
		}
		if copies >= 1 || time.Now().After(deadline) {
			break
		}
	}
	e.srv.Flush() // whatever else was answered is stored now
	if err := e.db.QueryRow(`SELECT count(*) FROM runs WHERE deployment_id = ? AND shadow_of != ''`, p.ID).Scan(&copies); err != nil {
		t.Fatal(err)
	}
	if inUpstream.Load() != 0 || copies != 1 {
		t.Fatalf("%d copies recorded, want 1: the yielded copy is not", copies)
	}
}
