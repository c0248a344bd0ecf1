package edge_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// A model whose upstreamUrl points back at svc (here through a proxy, as a Service or a load balancer
// would) answers in one hop: the call that comes back is refused 508 loop_detected before anything
// else, and relayed to the caller in the surface's envelope, with one run recorded (the caller's).
// Without the hop header the call went round until a connection cap stopped it, a run each time.
func TestSelfPointingUpstreamAnswersInOneHop(t *testing.T) {
	var target atomic.Pointer[url.URL]
	var hops atomic.Int64
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		hops.Add(1)
		pr.SetURL(target.Load())
	}})
	t.Cleanup(proxy.Close)
	e := newEnvWith(t, envOptions{models: `  - name: self
    runtime: openai
    upstreamUrl: ` + proxy.URL + `/e/loop/v1
    supportsMessages: true
`})
	target.Store(&url.URL{Scheme: "http", Host: e.srv.Addr.String()})
	d, _ := e.deploy("loop", base("self"), cloudapi.AuthNone, cloudapi.RetentionDays, 7)

	r := e.do("POST", "loop", "/v1/chat/completions", "", chatBody("hello"))
	wantError(t, r, http.StatusLoopDetected, "loop_detected")
	if n := hops.Load(); n != 1 {
		t.Fatalf("the call went through the proxy %d times, want 1", n)
	}
	// Messages callers get it in Anthropic's envelope; streamed, before the stream starts.
	r = e.do("POST", "loop", "/v1/messages", "", map[string]any{"model": "self", "max_tokens": 16, "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if m := r.json(t); r.status != http.StatusLoopDetected || m["type"] != "error" ||
		!strings.Contains(string(r.body), "upstreamUrl") {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
	runs := e.runs(d.ID, 2)
	if len(runs) != 2 {
		t.Fatalf("%d runs for two calls, want 2: %v", len(runs), runs)
	}
	for _, run := range runs {
		if run["statusCode"] != int64(http.StatusLoopDetected) || run["errorCode"] != "loop_detected" {
			t.Errorf("run %v: %v %v", run["id"], run["statusCode"], run["errorCode"])
		}
	}
}
