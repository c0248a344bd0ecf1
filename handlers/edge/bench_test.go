package edge_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// BenchmarkEdge measures requests through the whole server (dispatch, auth, runtime, recording)
// against the mock upstream; `go test -bench Edge -cpuprofile` shows where the edge spends its time.
// The translated sub-benchmarks send the same conversation, streamed, on /v1/messages and
// /v1/responses to a deployment without run recording, beside its relayed chat stream (make bench's
// "edge, retention none", "edge, messages" and "edge, responses" rows).
func BenchmarkEdge(b *testing.B) {
	const chat = `{"stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	cases := []struct {
		name, path, body string
		retention        string
	}{
		{"plain", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`, cloudapi.RetentionDays},
		{"stream", "/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`, cloudapi.RetentionDays},
		{"chat-stream-noruns", "/v1/chat/completions", chat, cloudapi.RetentionNone},
		{"chat-stream-runs", "/v1/chat/completions", chat, cloudapi.RetentionDays}, // against chat-stream-noruns: what recording a run costs
		{"messages-stream-noruns", "/v1/messages", `{"model":"mock-model","max_tokens":64,"stream":true,"system":"You are terse.","messages":[{"role":"user","content":"Say something about foxes."}]}`, cloudapi.RetentionNone},
		{"responses-stream-noruns", "/v1/responses", `{"model":"mock-model","instructions":"You are terse.","input":"Say something about foxes.","max_output_tokens":64,"stream":true}`, cloudapi.RetentionNone},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			env := newEnv(b)
			env.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 16})
			_, key := env.deploy("bench-"+c.name, base("up"), cloudapi.AuthFixedAPIKey, c.retention, 7)
			url := "http://bench-" + c.name + "." + env.srv.EndpointDomain + c.path
			body := []byte(c.body)
			b.ResetTimer()
			postInParallel(b, env, url, key, body)
		})
	}
}

// BenchmarkAdmission is what admission costs a call when nothing waits: the same streamed chat through
// the whole server to the mock upstream, on a model without maxConcurrency ("off") and on the same
// upstream with a bound never reached ("on"). Run with -count to interleave the two.
func BenchmarkAdmission(b *testing.B) {
	const body = `{"stream":true,"messages":[{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	env := newEnvWith(b, envOptions{models: `  - name: up-bounded
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    maxConcurrency: 100000
`})
	env.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 16})
	for _, c := range []struct{ name, model string }{{"off", "up"}, {"on", "up-bounded"}} {
		_, key := env.deploy("adm-"+c.name, base(c.model), cloudapi.AuthFixedAPIKey, cloudapi.RetentionNone, 0)
		url := "http://adm-" + c.name + "." + env.srv.EndpointDomain + "/v1/chat/completions"
		b.Run(c.name, func(b *testing.B) { postInParallel(b, env, url, key, []byte(body)) })
	}
}

// postInParallel sends body to url with the key, from every benchmark goroutine, until b.N calls have
// answered 200.
func postInParallel(b *testing.B, env *env, url, key string, body []byte) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := env.client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
