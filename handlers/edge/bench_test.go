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
func BenchmarkEdge(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			env := newEnv(b)
			env.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 16})
			_, key := env.deploy("bench-"+name, base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
			body := []byte(`{"messages":[{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`)
			if stream {
				body = []byte(`{"stream":true,"messages":[{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`)
			}
			url := "http://bench-" + name + "." + env.srv.EndpointDomain + "/v1/chat/completions"
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+key)
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
		})
	}
}
