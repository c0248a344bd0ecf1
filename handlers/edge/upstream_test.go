package edge_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/mockupstream"
)

func TestUpstreamProxy(t *testing.T) {
	e := newEnv(t)
	e.deploy("up-ep", base("up"), cloudapi.AuthNone, "", 0)

	r := e.do("POST", "up-ep", "/v1/chat/completions", "", chatBody("hi", "model", "whatever"))
	if r.status != 200 || r.json(t)["model"] != "up" {
		t.Fatalf("proxied answer: %d %s", r.status, r.body)
	}
	seen := e.mock.LastRequest()
	if seen.Body["model"] != "mock-model" {
		t.Errorf("upstream got model %v, want the upstreamModel", seen.Body["model"])
	}
	if seen.Authorization != "Bearer "+upstreamKey {
		t.Errorf("upstream key not sent from apiKeyEnv")
	}

	// Streams are relayed event by event; usage is stripped unless asked for.
	r = e.do("POST", "up-ep", "/v1/chat/completions", "", chatBody("hi", "stream", true))
	data := sseData(r.body)
	if data[len(data)-1] != "[DONE]" || strings.Contains(string(r.body), `"total_tokens"`) || !strings.Contains(data[1], `"model":"up"`) {
		t.Fatalf("relayed stream:\n%s", r.body)
	}
	if e.mock.LastRequest().Body["stream_options"].(map[string]any)["include_usage"] != true {
		t.Errorf("usage not requested from the upstream")
	}
	r = e.do("POST", "up-ep", "/v1/chat/completions", "", chatBody("hi", "stream", true, "stream_options", map[string]any{"include_usage": true}))
	if !strings.Contains(string(r.body), `"total_tokens"`) {
		t.Fatalf("usage missing when asked:\n%s", r.body)
	}

	// Upstream errors keep their status, in the OpenAI shape.
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, FailStatus: 400,
		FailBody: `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":"max_tokens","code":400}`})
	m := wantError(t, e.do("POST", "up-ep", "/v1/chat/completions", "", chatBody("hi")), 400, "")
	if m["message"] != "max_tokens is too large" {
		t.Errorf("relayed message %v", m["message"])
	}
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, FailStatus: 503, FailBody: `{"error":{"message":"overloaded","type":"server_error","code":null}}`})
	wantError(t, e.do("POST", "up-ep", "/v1/chat/completions", "", chatBody("hi", "stream", true)), 503, "")

	// Timeout → 504; unreachable → 502.
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, TTFT: 4 * time.Second})
	wantError(t, e.do("POST", "up-ep", "/v1/chat/completions", "", chatBody("hi")), 504, "upstream_timeout")
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey})
	e.deploy("down-ep", base("up-down"), cloudapi.AuthNone, "", 0)
	m = wantError(t, e.do("POST", "down-ep", "/v1/chat/completions", "", chatBody("hi")), 502, "upstream_unavailable")
	if strings.Contains(m["message"].(string), "127.0.0.1") {
		t.Errorf("502 leaks the upstream address: %v", m["message"])
	}
}

func TestUpstreamStreamCut(t *testing.T) {
	e := newEnv(t)
	e.deploy("cut-ep", base("up"), cloudapi.AuthNone, "", 0)
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 10, CutAfter: 3})
	r := e.do("POST", "cut-ep", "/v1/chat/completions", "", chatBody("hi", "stream", true))
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	data := sseData(r.body)
	last := data[len(data)-1]
	if !strings.Contains(last, `"error"`) || !strings.Contains(last, "ended the stream early") || strings.Contains(string(r.body), "[DONE]") {
		t.Fatalf("want an error event at the end of a cut stream:\n%s", r.body)
	}
	// The connection was closed cleanly: the body was read to its end without error (do checks).
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	e := newEnv(t)
	e.deploy("gone-ep", base("up"), cloudapi.AuthNone, "", 0)
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 200, ITL: 20 * time.Millisecond})

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://gone-ep."+e.srv.EndpointDomain+"/v1/chat/completions",
		strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for i := 0; i < 3; i++ { // read a few bytes of events, then walk away
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	resp.Body.Close()
	up := e.mock.LastRequest()
	select {
	case <-up.Cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled when the client went away")
	}
}

func TestAdapterLoading(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	artifact := "hf://acme/support-lora"
	completed := core.JobCompleted
	job, err := e.srv.Service.CreateJob(ctx, e.pr, core.NewJob{BaseModel: "up", Status: &completed, FinalAdapter: &artifact})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := e.deploy("lora-ep", cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: job.ID}, cloudapi.AuthNone, "", 0)
	_ = d
	r := e.do("POST", "lora-ep", "/v1/chat/completions", "", chatBody("hi"))
	if r.status != 200 {
		t.Fatalf("adapter request: %d %s", r.status, r.body)
	}
	name := "ft-" + job.ID
	if got := r.json(t)["model"]; got != name {
		t.Errorf("answer names %v, want the adapter %s", got, name)
	}
	if got := e.mock.LastRequest().Body["model"]; got != name {
		t.Errorf("upstream model %v, want the adapter name", got)
	}
	loads := e.mock.Loads()
	if len(loads) != 1 || loads[0]["lora_name"] != name || loads[0]["lora_path"] != "acme/support-lora" {
		t.Fatalf("loads = %v", loads)
	}
	// An upstream restart forgets the adapter: the edge loads it again and retries.
	e.mock.Restart()
	if r := e.do("POST", "lora-ep", "/v1/chat/completions", "", chatBody("hi", "stream", true)); r.status != 200 || strings.Contains(string(r.body), "error") {
		t.Fatalf("after restart: %d %s", r.status, r.body)
	}
	if n := len(e.mock.Loads()); n != 2 {
		t.Fatalf("%d loads after the upstream restart, want 2", n)
	}
}

// Finished streams give their upstream connection back: chat streams, translated Messages streams and
// passed-through Messages streams, one after the other, all use the first ones (an upstream connection
// dropped after each stream would cost a TLS handshake per request in production).
func TestStreamsReuseUpstreamConnections(t *testing.T) {
	e := newEnv(t)
	// The end of each HTTP answer comes 2ms after its last event, as it can from a busy upstream.
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, StrictModels: true, ServeMessages: true, EndDelay: 2 * time.Millisecond})
	e.deploy("reuse-chat", base("up"), cloudapi.AuthNone, "", 0)
	e.deploy("reuse-native", base("up-native"), cloudapi.AuthNone, "", 0)
	chat := map[string]any{"stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	msg := map[string]any{"stream": true, "max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	calls := []struct{ slug, path string }{{"reuse-chat", "/v1/chat/completions"}, {"reuse-chat", "/v1/messages"}, {"reuse-native", "/v1/messages"}}
	var first int64 // the connections of the first round: one per model (each has its own transport)
	for i := 0; i < 8; i++ {
		if i == 1 {
			first = e.mockConns.Load()
		}
		for _, c := range calls {
			body := any(chat)
			if c.path == "/v1/messages" {
				body = msg
			}
			r := e.do("POST", c.slug, c.path, "", body)
			if r.status != 200 || !bytes.Contains(r.body, []byte("data: ")) {
				t.Fatalf("%s %s: %d %s", c.slug, c.path, r.status, r.body)
			}
		}
	}
	if n := e.mockConns.Load(); first != 2 || n != first {
		t.Fatalf("streams of 2 models opened %d upstream connections in the first round and %d more in 7 rounds after it, want 2 and 0", first, n-first)
	}
}
