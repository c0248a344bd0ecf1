package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgemodel"
)

// admissionModels is a model that runs one call at once, with a short queue timeout.
const admissionModels = `  - name: up-one
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    supportsMessages: true
    maxConcurrency: 1
    queueTimeoutMs: 400
`

// metricsText scrapes the server's /metrics.
func (e *env) metricsText() string {
	e.t.Helper()
	resp, err := http.Get(e.srv.BaseURL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestBusyModelAnswersModelBusyAfterTheQueueTimeout(t *testing.T) {
	// The upstream holds each chat call until the test lets it go.
	var gated atomic.Bool
	entered, let := make(chan struct{}, 8), make(chan struct{})
	e := newEnvWith(t, envOptions{models: admissionModels, upstreamSaw: func(r *http.Request) {
		if gated.Load() && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			entered <- struct{}{}
			select { // bounded, so that an edge without admission fails the test instead of hanging it
			case <-let:
			case <-time.After(3 * time.Second):
			}
		}
	}})
	d, key := e.deploy("busy-ep", base("up-one"), cloudapi.AuthFixedAPIKey, "", 0)
	other, err := e.srv.Service.IssueKey(context.Background(), e.pr, d.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	gated.Store(true)
	first := make(chan reply, 1)
	go func() { first <- e.do("POST", "busy-ep", "/v1/chat/completions", key, chatBody("first")) }()
	<-entered // the model's one call is in flight

	// Another key's call waits its queue timeout, then 429 model_busy with Retry-After, never reaching
	// the upstream; in the Anthropic envelope on /v1/messages.
	start := time.Now()
	r := e.do("POST", "busy-ep", "/v1/chat/completions", other.Plaintext, chatBody("second"))
	m := wantError(t, r, 429, "model_busy")
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Errorf("refused after %v, before the queue timeout (400 ms)", waited)
	}
	if m["type"] != "rate_limit_error" || r.header.Get("Retry-After") == "" {
		t.Errorf("model_busy: %s, Retry-After %q", r.body, r.header.Get("Retry-After"))
	}
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 || n > 60 {
		t.Errorf("Retry-After %q, want 1 to 60 seconds", r.header.Get("Retry-After"))
	}
	r = e.do("POST", "busy-ep", "/v1/messages", other.Plaintext, map[string]any{"model": "up-one", "max_tokens": 8,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	var env struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if r.status != 429 || json.Unmarshal(r.body, &env) != nil || env.Type != "error" || env.Error.Type != "rate_limit_error" ||
		!strings.Contains(env.Error.Message, "at capacity") || r.header.Get("Retry-After") == "" {
		t.Errorf("messages while busy: %d %s", r.status, r.body)
	}
	// Counting tokens generates nothing: it does not wait for a turn.
	if r := e.do("POST", "busy-ep", "/v1/messages/count_tokens", other.Plaintext, map[string]any{"model": "up-one",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}); r.status != 200 {
		t.Errorf("count_tokens while busy: %d %s", r.status, r.body)
	}

	// A call queued behind the first goes as soon as the first ends.
	third := make(chan reply, 1)
	go func() { third <- e.do("POST", "busy-ep", "/v1/chat/completions", other.Plaintext, chatBody("third")) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.metricsText(), `svc_admission_queue_depth{lane="interactive",model="up-one"} 1`) {
		if time.Now().After(deadline) {
			t.Fatal("the third call never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	let <- struct{}{} // the first call ends
	if r := <-first; r.status != 200 {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	<-entered
	let <- struct{}{}
	if r := <-third; r.status != 200 {
		t.Fatalf("third: %d %s", r.status, r.body)
	}
	text := e.metricsText()
	for _, want := range []string{
		`svc_admission_refused_total{lane="interactive",model="up-one"} 2`,
		`svc_admission_capacity{model="up-one"} 1`,
		`svc_admission_in_flight{model="up-one"} 0`,
		`svc_admission_wait_seconds_count{lane="interactive",model="up-one"} 4`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The refusals are runs of the endpoint, with their code.
	busy := 0
	for _, run := range e.runs(d.ID, 5) {
		if run["errorCode"] == "model_busy" && run["statusCode"] == int64(429) {
			busy++
		}
	}
	if busy != 2 {
		t.Errorf("%d runs with model_busy, want 2", busy)
	}

	// Usage tells the refusals apart from rate limits, and counts the waits: the two refused after
	// waiting 400 ms each, and the third call's.
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	var queued, queueMs, busyCount, refused429 int64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		u, err := api.GetDeploymentUsage(context.Background(), d.ID, cloudapi.UsageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		queued, queueMs, busyCount, refused429 = 0, 0, 0, 0
		for _, b := range u.Buckets {
			queued, queueMs = queued+b.Queued, queueMs+b.QueueMs
			busyCount, refused429 = busyCount+b.RefusedCodes["model_busy"], refused429+b.Refused[429]
		}
		if busyCount == 2 && queued == 3 || time.Now().After(deadline) {
			break
		}
	}
	if busyCount != 2 || refused429 != 2 || queued != 3 || queueMs < 800 {
		t.Errorf("usage: %d refused model_busy of %d 429s, %d calls waited %d ms in all; want 2 of 2, 3 calls at least 800 ms", busyCount, refused429, queued, queueMs)
	}
}

// Shadow copies wait in the shadow lane: a caller's call that arrives after a copy is waiting still goes
// first. Endpoint "lanes-direct" serves up-lanes (one call at once) to callers; endpoint "lanes-primary"
// answers from the simulator and copies every call to up-lanes (a shadow canary at 99%).
func TestShadowCopiesWaitBehindCallers(t *testing.T) {
	var gated atomic.Bool
	entered, let := make(chan string, 8), make(chan struct{})
	e := newEnvWith(t, envOptions{models: `  - name: up-lanes
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    maxConcurrency: 1
    queueTimeoutMs: 10000
`, upstreamSaw: func(r *http.Request) {
		if !gated.Load() || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var body struct{ Messages []struct{ Content string } }
		json.Unmarshal(b, &body)
		entered <- body.Messages[len(body.Messages)-1].Content
		select {
		case <-let:
		case <-time.After(5 * time.Second):
		}
	}})
	_, directKey := e.deploy("lanes-direct", base("up-lanes"), cloudapi.AuthFixedAPIKey, "", 0)
	p, primaryKey := e.deploy("lanes-primary", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(p.ID, "up-lanes", 99, edgemodel.CanaryShadow)
	gated.Store(true)
	depth := func(lane string, n int) {
		t.Helper()
		want := `svc_admission_queue_depth{lane="` + lane + `",model="up-lanes"} ` + strconv.Itoa(n)
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(e.metricsText(), want); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never saw %s", want)
			}
		}
	}
	answers := make(chan reply, 2)
	go func() {
		answers <- e.do("POST", "lanes-direct", "/v1/chat/completions", directKey, chatBody("caller one"))
	}()
	if got := <-entered; got != "caller one" {
		t.Fatalf("the upstream got %q first", got)
	}
	if r := e.do("POST", "lanes-primary", "/v1/chat/completions", primaryKey, chatBody("shadowed")); r.status != http.StatusOK {
		t.Fatalf("primary: %d %s", r.status, r.body)
	}
	depth("shadow", 1) // the copy waits for up-lanes
	go func() {
		answers <- e.do("POST", "lanes-direct", "/v1/chat/completions", directKey, chatBody("caller two"))
	}()
	depth("interactive", 1)
	var order []string
	for range 2 {
		let <- struct{}{}
		order = append(order, <-entered)
	}
	let <- struct{}{}
	if fmt.Sprint(order) != "[caller two shadowed]" {
		t.Fatalf("after caller one, the upstream got %v; want the caller's call before the older shadow copy", order)
	}
	for range 2 {
		if r := <-answers; r.status != http.StatusOK {
			t.Errorf("caller: %d %s", r.status, r.body)
		}
	}
}
