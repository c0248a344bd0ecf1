package edge_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// BenchmarkShadow sends streamed chat completions one after the other (make bench's streamed row at
// one connection) to a deployment without a canary and to one whose shadow canary copies every call;
// `-cpuprofile` shows what a copy costs the process beside the callers' requests.
func BenchmarkShadow(b *testing.B) {
	const chat = `{"stream":true,"messages":[{"role":"user","content":"Say something about foxes."}],"max_tokens":64}`
	for _, shadow := range []bool{false, true} {
		name := "no-canary"
		if shadow {
			name = "shadow"
		}
		b.Run(name, func(b *testing.B) {
			env := newEnv(b)
			env.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 16})
			d, key := env.deploy("bench-"+name, base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
			if shadow {
				env.setCanary(d.ID, "up", 1, edgemodel.CanaryShadow)
			}
			url := "http://bench-" + name + "." + env.srv.EndpointDomain + "/v1/chat/completions"
			b.ResetTimer()
			for b.Loop() {
				req, _ := http.NewRequest("POST", url, bytes.NewReader([]byte(chat)))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := env.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
